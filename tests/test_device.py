"""Device plumbing, checked without a GPU: which device a job computes on, from the rule's ``gpu``
resource through the stage runner to ``torch_device()``."""

from __future__ import annotations

import json

import pytest
import torch

from icmlrepro.core import cli, device


@pytest.fixture
def fake_cuda(monkeypatch):
    """Pretend CUDA is present: only the device *string* is checked, nothing is moved."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


@pytest.mark.parametrize("env, cuda, expected", [
    (None, False, "cpu"), ("0", False, "cpu"), ("1", False, "cpu"),
    (None, True, "cpu"), ("0", True, "cpu"), ("1", True, "cuda"), ("junk", True, "cpu"),
])
def test_torch_device_needs_a_gpu_given_and_cuda(monkeypatch, env, cuda, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    if env is None:
        monkeypatch.delenv(device.GPU_ENV, raising=False)
    else:
        monkeypatch.setenv(device.GPU_ENV, env)
    assert device.torch_device() == expected


def test_explicit_gpu_count_overrides_the_job(monkeypatch, fake_cuda):
    monkeypatch.setenv(device.GPU_ENV, "0")
    assert device.torch_device(gpu=1) == "cuda"
    assert device.torch_device(gpu=0) == "cpu"


def test_stage_runner_exports_the_rules_gpu_resource(monkeypatch, fake_cuda):
    """The spec's ``gpu`` (what common.smk's paths_spec writes for a GPU-tagged rule) reaches the stage;
    a spec without it (a CPU rule, or config gpu: cpu) gives the CPU even where CUDA exists."""
    seen = {}

    class Stage:
        @staticmethod
        def run(job):
            seen["device"] = device.torch_device()

    monkeypatch.setattr(cli, "stage_module", lambda stage: Stage)
    monkeypatch.setattr(cli, "install_network_guard", lambda: None)
    monkeypatch.setenv(device.GPU_ENV, "1")  # a stale value from the parent must not leak
    cli.run_stage("x.y", {"rule": "r", "threads": 1})
    assert seen["device"] == "cpu"
    cli.run_stage("x.y", json.loads('{"rule": "r", "threads": 1, "gpu": 1}'))
    assert seen["device"] == "cuda"


# --- models and timers on the job's device ----------------------------------------------------------
def test_lm_load_puts_the_model_on_the_given_device(tmp_path):
    """``lm.model.load`` moves the model to the device string it is given (``meta``: a fake device
    that allocates nothing), in the checkpoint's own dtype unless told otherwise."""
    from icmlrepro.lm.model import build_model, load
    from icmlrepro.lm.tokenizer import train_tokenizer

    tok = train_tokenizer(["12+34=46", "sort 3 1 2 -> 1 2 3"])
    build_model(len(tok), dict(hidden=16, intermediate=32, layers=1, heads=2, kv_heads=1, max_positions=64),
                tok, seed=0).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model, _ = load(tmp_path, device="meta")
    assert {p.device.type for p in model.parameters()} == {"meta"} and model.dtype == torch.float32
    assert load(tmp_path, dtype=torch.bfloat16)[0].dtype == torch.bfloat16


def test_asyncspade_proxy_is_built_in_place_in_the_requested_dtype():
    from icmlrepro.papers.asyncspade.tpot import proxy_model

    size = dict(hidden=32, intermediate=64, layers=1, heads=2, kv_heads=1, max_positions=64)
    model = proxy_model(size, 50, seed=0, device="meta", dtype=torch.bfloat16)
    assert {(p.device.type, p.dtype) for p in model.parameters()} == {("meta", torch.bfloat16)}


def test_cpu_timer_measures_host_time():
    import time

    from icmlrepro.core.timer import Timings

    t = Timings("cpu")
    with t.region("step"):
        time.sleep(0.02)
    with t.region("step"):
        pass
    t.discard_last("step")
    t.add_host("wait", 0.5)
    assert len(t.seconds("step")) == 1 and 0.015 < t.total("step") < 1.0 and t.total("wait") == 0.5


# --- paper-scale memory arithmetic (resources/claims/asyncspade.yaml states it) -----------------------
QWEN3_8B = dict(hidden=4096, intermediate=12288, layers=36, heads=32, kv_heads=8, max_positions=40960)


def test_qwen3_8b_weights_and_kv_cache_per_token():
    from icmlrepro.papers.asyncspade import memory as M

    assert abs(M.weight_count(QWEN3_8B, 151936) / 1e9 - 8.19) < 0.01  # Qwen3-8B: 8.2 B parameters
    assert M.kv_bytes_per_token(QWEN3_8B, 2) == 144 * 1024


def test_workloads_that_do_not_fit_80_gb_are_skipped_and_the_claim_workload_must_run():
    from icmlrepro.papers.asyncspade import memory as M

    t = dict(size=QWEN3_8B, vocab=151936, contexts=[8192, 16384, 32768], batches=[1, 8, 32], warmup=16,
             steps=256, repeats=5, budget=2048, memory_gb=80, claim_workload={"context": 32768, "batch": 32})
    run, skipped = M.fitting_workloads(t, 2)
    assert {(c, b) for c, b, _ in skipped} == {(16384, 32), (32768, 32)}
    assert all(M.workload_bytes(t, c, b, 2) <= 0.9 * 80e9 for c, b in run)
    assert M.heaviest(run) == (32768, 8)
    with pytest.raises(ValueError, match="claim_workload"):
        M.claim_workload(t, run)
    assert M.runtime_minutes(t) >= 30


# --- kernel rules ---------------------------------------------------------------------------------------
def test_kernel_check_catches_a_planted_bug_and_timings_are_nan_off_cuda():
    from icmlrepro.core import kernelbench as KB
    from icmlrepro.core.metrics import MetricsFile

    x = torch.arange(6.0)
    good = KB.Case("double", "n6", lambda: 2 * x, lambda: x + x, lambda a, r: float((a - r).abs().max()), 0.0, 48)
    bad = KB.Case("double", "n6", lambda: 2 * x + (x == 5), lambda: x + x,  # wrong in one element
                  lambda a, r: float((a - r).abs().max()), 0.0, 48)
    result = KB.run_cases([good, bad], lambda: pytest.fail("timing cases are built only on CUDA"),
                          [("double", "n6")], "cpu")
    assert [c["passed"] for c in result["checks"]] == [True, False]
    mf = MetricsFile("x", "smoke")
    KB.kernel_metrics(mf, json.loads(json.dumps(result).replace("NaN", "null")))  # as read back from disk
    assert mf.get("kernel_check_passed.double").values == [0.0]
    ms = mf.get("kernel_ms.double.n6")
    assert ms.timing and ms.values[0] != ms.values[0] and "NOT MEASURED" in ms.description


def test_peak_bandwidth_table():
    from icmlrepro.core.kernelbench import peak_bandwidth_gbps

    assert peak_bandwidth_gbps("NVIDIA A100-SXM4-80GB") == 2039.0
    assert peak_bandwidth_gbps("NVIDIA H100 80GB HBM3") == 3350.0
    assert peak_bandwidth_gbps("NVIDIA H200") == 4800.0
    assert peak_bandwidth_gbps("NVIDIA GeForce RTX 4090") != peak_bandwidth_gbps("NVIDIA GeForce RTX 4090")  # NaN


def test_interpreter_cannot_be_switched_on_after_triton_was_imported(monkeypatch):
    import sys

    from icmlrepro.core.kernelbench import prepare_interpreter

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setitem(sys.modules, "triton", object())
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        prepare_interpreter("cpu")
    assert prepare_interpreter("cuda") is False


def test_onlinespec_kernel_rule_cpu_branch():
    """The verification kernel under the interpreter (fresh process): no mismatch, timings not measured."""
    from .conftest import run_interpreted

    result = run_interpreted("icmlrepro.papers.onlinespec.kernel_bench")
    assert result["triton_kernels_ran"] and all(c["passed"] and c["error"] == 0 for c in result["checks"])
    assert all(not t["timed"] for t in result["timings"])


def test_rules_pass_the_gpu_to_the_stage_and_the_interpreter_to_kernel_rules(tmp_path):
    """Dry runs: with ``gpu: cpu`` the kernel rule's shell switches Triton's interpreter on and no spec
    carries a GPU; with ``gpu: any`` every GPU-tagged rule's spec says ``"gpu": 1`` (what torch_device()
    reads) and CPU rules' specs do not."""
    from .conftest import copy_workflow, snakemake

    work = copy_workflow(tmp_path)
    target = "results/smoke/asyncspade/metrics.json"
    cpu = snakemake(work, target, "-n", "-p", "--config", "scale=smoke", "gpu=cpu").stdout
    assert "TRITON_INTERPRET=1 python -m icmlrepro stage asyncspade.kernel_bench" in cpu
    assert '"gpu":' not in cpu
    gpu = snakemake(work, target, "-n", "-p", "--config", "scale=smoke", "gpu=any").stdout
    assert "TRITON_INTERPRET" not in gpu
    commands = [line for line in gpu.splitlines() if "python -m icmlrepro stage" in line]
    tagged = {"asyncspade.kernel_bench", "asyncspade.tpot", "asyncspade.prediction", "asyncspade.accuracy"}
    for line in commands:
        stage = line.split("python -m icmlrepro stage ")[1].split()[0]
        assert ('"gpu": 1' in line) == (stage in tagged), line[:200]
