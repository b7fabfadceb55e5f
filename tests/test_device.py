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
