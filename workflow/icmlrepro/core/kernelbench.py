"""Kernel rules (``<paper>_kernels``): every Triton kernel against its torch reference, and on CUDA
their speed and achieved memory bandwidth as a share of the device's peak.

One code path for the pipeline's kernel rules and the standalone GPU benchmark scripts:

- **check**: the kernel and its reference on the same random inputs; the error (or mismatch count)
  must stay within a tolerance. On CUDA the compiled kernels run; on the CPU they run under Triton's
  interpreter, which must be switched on *before* triton is imported (``TRITON_INTERPRET=1``: the
  rule's shell sets it when the job has no GPU, and :func:`prepare_interpreter` sets it in-process
  when the job was given a GPU it cannot use and triton is not imported yet);
- **timing**: ``triton.testing.do_bench`` (median ms, CUDA events, L2 flushed between runs) of the
  kernel and of the reference; the kernel's achieved bandwidth is its minimal traffic (bytes it
  must read and write) over its time, as a share of the peak bandwidth of the device, from
  :data:`PEAK_BANDWIDTH_GBPS` (vendor data-sheet figures: an assumption, not a measurement).

Timings exist only on CUDA. Under the interpreter a kernel's time says nothing about the kernel,
so on the CPU timing rows are written with NaN and ``timed: false``: the paper's metrics carry them
as NaN with a description saying so (no claim of the papers is about kernel speed; a NaN metric
reads as not measured, never as a pass).
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Callable

# Peak HBM bandwidth by device name (first matching substring of torch.cuda.get_device_name()),
# GB/s, from NVIDIA's data sheets. An assumption of the report, stated with every share.
PEAK_BANDWIDTH_GBPS = (
    ("H200", 4800.0),
    ("H100 NVL", 3900.0),
    ("H100 PCIe", 2000.0),
    ("H100", 3350.0),
    ("A100 80GB PCIe", 1935.0),
    ("A100-PCIE-40GB", 1555.0),
    ("A100-SXM4-40GB", 1555.0),
    ("A100", 2039.0),
)


def peak_bandwidth_gbps(device_name: str) -> float:
    """Data-sheet peak bandwidth of ``device_name``; NaN for a device not in the table."""
    for key, gbps in PEAK_BANDWIDTH_GBPS:
        if key in device_name:
            return gbps
    return math.nan


def prepare_interpreter(device: str) -> bool:
    """On the CPU, make sure Triton kernels run under the interpreter; returns whether they do.

    Triton decides between compiling and interpreting when a kernel is decorated, i.e. when the
    kernels' module is imported; the variable therefore has to be set before that. If triton was
    imported already without it, the check would silently compare the reference with itself, so
    that is an error."""
    if device != "cpu":
        return False
    if os.environ.get("TRITON_INTERPRET") != "1":
        if "triton" in sys.modules:
            raise RuntimeError("triton was imported before TRITON_INTERPRET=1 was set: the kernel check "
                               "on the CPU would not run the kernels (set it in the rule's shell)")
        os.environ["TRITON_INTERPRET"] = "1"
    return True


@dataclass
class Case:
    """One kernel at one shape: ``kernel()`` and ``reference()`` take no arguments (inputs bound)."""

    kernel: str                 # kernel name
    shape: str                  # readable shape label
    run_kernel: Callable
    run_reference: Callable
    compare: Callable           # (kernel output, reference output) -> error (float)
    tolerance: float
    bytes_moved: int            # minimal traffic of the kernel: inputs read once + outputs written


def check(case: Case) -> dict:
    err = float(case.compare(case.run_kernel(), case.run_reference()))
    return {"kernel": case.kernel, "shape": case.shape, "error": err, "tolerance": case.tolerance,
            "passed": bool(err <= case.tolerance)}


def time_case(case: Case, device_name: str) -> dict:
    """On CUDA: kernel and reference times (ms) and the kernel's share of the peak bandwidth."""
    import triton.testing

    row = untimed_row(case.kernel, case.shape, device_name)
    row.update(timed=True, bytes=case.bytes_moved, kernel_ms=float(triton.testing.do_bench(case.run_kernel)),
               torch_ms=float(triton.testing.do_bench(case.run_reference)))
    row["kernel_gbps"] = case.bytes_moved / (row["kernel_ms"] * 1e-3) / 1e9
    row["share_of_peak"] = row["kernel_gbps"] / row["peak_gbps"]
    return row


def untimed_row(kernel: str, shape: str, device_name: str) -> dict:
    return {"kernel": kernel, "shape": shape, "timed": False, "bytes": math.nan, "kernel_ms": math.nan,
            "torch_ms": math.nan, "kernel_gbps": math.nan, "peak_gbps": peak_bandwidth_gbps(device_name),
            "share_of_peak": math.nan}


def device_name(device: str) -> str:
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name()
    return "cpu (Triton interpreter)"


def run_cases(check_cases: list[Case], timing_cases: Callable[[], list[Case]], timing_labels: list[tuple[str, str]],
              device: str) -> dict:
    """The kernel rule's result: device, checks (every case), timings. ``timing_cases`` is built
    and run only on CUDA (paper-size inputs); elsewhere ``timing_labels`` (kernel, shape) give
    NaN rows, so that metrics.json holds the same keys on every device."""
    name = device_name(device)
    timings = [time_case(c, name) for c in timing_cases()] if device == "cuda" else \
        [untimed_row(kernel, shape, name) for kernel, shape in timing_labels]
    import torch

    from .device import use_triton

    return {"device": device, "device_name": name, "interpreted": device == "cpu",
            "triton_kernels_ran": use_triton(torch.empty(0, device=device)),
            "peak_gbps_assumed": peak_bandwidth_gbps(name),
            "checks": [check(c) for c in check_cases], "timings": timings}


def kernel_metrics(mf, result: dict) -> None:
    """The kernel rule's numbers as metrics of the paper: the worst check error per kernel (and
    whether every shape passed), and per timed case the kernel's and the reference's ms and the
    kernel's share of peak bandwidth (one value each; NaN with the reason off CUDA)."""
    where = f"on {result['device_name']}"
    for kernel in sorted({c["kernel"] for c in result["checks"]}):
        rows = [c for c in result["checks"] if c["kernel"] == kernel]
        mf.add(f"kernel_check_error.{kernel}", [max(c["error"] for c in rows)], unit="max abs error / mismatches",
               direction="lower", description=f"Triton kernel vs torch reference, worst of {len(rows)} shapes, {where}")
        mf.add(f"kernel_check_passed.{kernel}", [float(all(c["passed"] for c in rows))], unit="1 = all within tolerance",
               direction="higher", description=f"every shape within tolerance ({rows[0]['tolerance']}), {where}")
    def num(v) -> float:  # NaN is stored as null in JSON (core.io.write_json)
        return math.nan if v is None else float(v)

    why = "" if result["device"] == "cuda" else " NOT MEASURED (NaN): no CUDA device, kernels ran under the interpreter"
    peak = num(result["peak_gbps_assumed"])
    for t in result["timings"]:
        key = f"{t['kernel']}.{t['shape']}"
        mf.add(f"kernel_ms.{key}", [num(t["kernel_ms"])], unit="ms", direction="lower", timing=True,
               description=f"Triton kernel, do_bench median, {where}.{why}")
        mf.add(f"kernel_torch_ms.{key}", [num(t["torch_ms"])], unit="ms", direction="lower", timing=True,
               description=f"torch reference, do_bench median, {where}.{why}")
        mf.add(f"kernel_bandwidth_share.{key}", [num(t["share_of_peak"])], unit="fraction of peak", direction="higher",
               timing=True, description=f"kernel's minimal traffic / time over the assumed peak {peak} GB/s "
                                        f"(data sheet), {where}.{why}")


def figure(result: dict, path) -> None:
    """The kernel rule's figure in the report: check errors against their tolerance, and on CUDA the
    kernel's and the reference's times with the bandwidth share (off CUDA: says they were not run)."""
    from .figures import new_figure, save

    fig, (ax_err, ax_t) = new_figure(ncols=2, width=5.0)
    kernels = sorted({c["kernel"] for c in result["checks"]})
    tol = [next(c["tolerance"] for c in result["checks"] if c["kernel"] == k) for k in kernels]
    log_scale = min(tol) > 0  # counts (mismatches, tolerance 0) on a linear axis
    worst = [max(max(c["error"] for c in result["checks"] if c["kernel"] == k), 1e-12 if log_scale else 0)
             for k in kernels]
    ax_err.barh(kernels, worst, color="C0", label="worst error")
    ax_err.scatter(tol, kernels, color="C3", marker="|", s=300, label="tolerance")
    ax_err.set(xscale="log" if log_scale else "linear", xlabel="worst error (max abs / mismatches) vs reference",
               title=f"check ({result['device_name']})")
    if not log_scale:
        ax_err.set_xlim(-0.5, max(1.0, *worst) + 0.5)
    ax_err.legend(fontsize=7)
    timed = [t for t in result["timings"] if t["timed"]]
    if timed:
        labels = [f"{t['kernel']}\n{t['shape']}" for t in timed]
        y = range(len(timed))
        ax_t.barh([i + 0.2 for i in y], [t["kernel_ms"] for t in timed], 0.4, label="Triton kernel")
        ax_t.barh([i - 0.2 for i in y], [t["torch_ms"] for t in timed], 0.4, label="torch reference")
        for i, t in zip(y, timed):
            ax_t.annotate(f"{t['share_of_peak']:.0%} of peak", (t["kernel_ms"], i + 0.2), fontsize=6, va="center")
        ax_t.set_yticks(list(y), labels, fontsize=5)
        ax_t.set(xscale="log", xlabel="ms (do_bench median)",
                 title=f"speed; peak {result['peak_gbps_assumed']:.0f} GB/s assumed (data sheet)")
        ax_t.legend(fontsize=7)
    else:
        ax_t.axis("off")
        ax_t.text(0.5, 0.5, "timings not measured:\nno CUDA device\n(kernels ran under the Triton interpreter)",
                  ha="center", va="center", fontsize=9)
    save(fig, path)


def standalone(bench: Callable[[str], dict], default_out: str, description: str) -> int:
    """``workflow/scripts/gpu_benchmark_<paper>.py``: run the kernel rule's ``bench`` on CUDA outside the
    pipeline; writes kernels.json and kernels.png under ``--out``; 2 without CUDA."""
    import argparse
    import json

    from .device import benchmark_dir
    from .io import write_json

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", default=default_out)
    out = benchmark_dir(ap.parse_args().out)
    if out is None:
        return 2
    result = bench("cuda")
    write_json(out / "kernels.json", result)
    figure(result, out / "kernels.png")
    print(json.dumps(result, indent=1))
    return 0


def stage(job, bench: Callable[[str], dict]) -> None:
    """A kernel rule's stage: ``bench`` on the job's device (``torch_device()``), JSON and figure out."""
    from .device import torch_device
    from .io import write_json

    result = bench(torch_device())
    write_json(job.output.kernels, result)
    figure(result, job.output.figure)


def print_result(bench: Callable[[str], dict]) -> None:
    """``python -m icmlrepro.papers.<paper>.kernel_bench``: the result as one JSON line (the tests run the
    CPU branch this way, with TRITON_INTERPRET=1 in a fresh process)."""
    import json

    from .device import torch_device

    print(json.dumps(bench(torch_device())))
