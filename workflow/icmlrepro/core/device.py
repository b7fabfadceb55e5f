"""Which device a job runs on, and the probe that GPU-tagged rules report through.

GPU rules (Triton kernels, decoding, benchmarks) ask the scheduler for an accelerator through the
standard resources ``gpu``/``gpu_model`` (the SLURM executor turns them into ``--gpus=a100:1``).
They must still run where there is none: code asks :func:`torch_device` and falls back to the CPU
(and to the torch references of the kernels). The probe records what a GPU-tagged job actually got,
so that the report's provenance says where GPU rules ran, not only where the report was rendered.
"""

from __future__ import annotations

import os
import platform

from .io import write_json

SCHEDULER_VARS = ("SLURM_JOB_ID", "SLURM_JOB_PARTITION", "SLURM_GPUS", "SLURM_GPUS_ON_NODE",
                  "SLURM_JOB_GPUS", "SLURM_MEM_PER_NODE", "SLURM_CPUS_PER_TASK", "CUDA_VISIBLE_DEVICES")


def scheduler_facts() -> dict[str, str]:
    """The scheduler variables (SLURM job id, GPUs, CPUs...) this process was started with."""
    return {k: os.environ[k] for k in SCHEDULER_VARS if k in os.environ}


GPU_ENV = "ICMLREPRO_GPU"  # the job's ``gpu`` resource, set by the stage runner from the rule's spec


def job_gpus() -> int:
    """How many GPUs the scheduler gave this job: the rule's ``gpu`` resource, which
    :func:`icmlrepro.core.cli.run_stage` copies into ``ICMLREPRO_GPU`` (0 outside a GPU-tagged rule,
    and when the config says ``gpu: cpu``)."""
    try:
        return max(0, int(os.environ.get(GPU_ENV, "0") or 0))
    except ValueError:
        return 0


def torch_device(gpu: int | None = None) -> str:
    """The torch device string a stage computes on: ``"cuda"`` when the job was given a GPU (``gpu``,
    default :func:`job_gpus`) and CUDA is available, else ``"cpu"``.

    Both conditions matter: a CPU-tagged job on a GPU node must not take the GPU that the scheduler
    gave another job, and a GPU-tagged job where CUDA is missing (a laptop, the CI) falls back to the
    CPU and the kernels' torch references, so the same code path runs everywhere.
    """
    requested = job_gpus() if gpu is None else gpu
    if requested <= 0:
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def use_triton(t) -> bool:
    """Whether Triton kernels run for tensor ``t``: on CUDA, or anywhere under the Triton interpreter
    (``TRITON_INTERPRET=1``, the CPU tests); otherwise the kernels' torch references run."""
    try:
        import triton  # noqa: F401
    except ImportError:  # pragma: no cover - triton is pinned in the environment
        return False
    return t.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def benchmark_dir(out: str) -> "Path | None":
    """For the GPU benchmark scripts: the output folder (created), or None with a message on stderr
    when there is no CUDA device (their CPU path is the pipeline's own)."""
    import sys
    from pathlib import Path

    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark needs a GPU (the CPU path runs in the pipeline)", file=sys.stderr)
        return None
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    return path


def gpu_resources(setting: str) -> dict:
    """Resources of a GPU rule from the config key ``gpu``: a model name, ``any`` or ``cpu``."""
    if setting == "cpu":
        return {"gpu": 0, "gpu_model": ""}
    if setting == "any":
        return {"gpu": 1, "gpu_model": ""}
    return {"gpu": 1, "gpu_model": setting}


def probe() -> dict:
    import torch

    info = {
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "scheduler": scheduler_facts(),
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:  # pragma: no cover - triton is pinned in the environment
        info["triton"] = None
    return info


def run(job) -> None:
    """Stage ``core.device``: write what this (GPU-tagged) job runs on."""
    info = probe()
    info["requested"] = job.params.get("gpu", "")
    write_json(job.output.device, info)
