"""The smoke DAG through a real SLURM cluster (the local one of workflow/scripts/local_slurm.sh):
jobs go through sbatch, the A100 tag reaches it, a failed job is retried with more memory, the CPU
override drops the GPU request, and the report equals a local run's, timings aside."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from .conftest import copy_workflow, non_timing, snakemake
from .test_pipeline_smoke import LEC

pytestmark = [pytest.mark.integration, pytest.mark.slurm]

FAST_POLL = ["--slurm-init-seconds-before-status-checks", "1", "--seconds-between-status-checks", "2"]


def cluster_ready() -> str | None:
    if not shutil.which("sinfo"):
        return "SLURM is not installed (bash workflow/scripts/local_slurm.sh start)"
    out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    if out.returncode != 0 or not re.search(r"idle|mixed|allocated", out.stdout):
        return f"no usable SLURM node (sinfo: {out.stdout.strip() or out.stderr.strip()})"
    return None


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory):
    reason = cluster_ready()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    work = copy_workflow(tmp_path_factory.mktemp("slurm"))
    marker = work / "fail-once.txt"
    # LEC and the device probe only: enough for every SLURM path (GPU tag, retries), and fast enough that
    # scontrol still knows the jobs (finished jobs are purged after MinJobAge)
    proc = snakemake(work, "--profile", "slurm", "--config", "scale=smoke", "papers=[lec]", *FAST_POLL,
                     env={"ICMLREPRO_FAIL_ONCE": f"lec.train:{marker}"}, timeout=420)
    return work, marker, proc


def scontrol(job_id: str) -> str:
    return subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True).stdout


def test_jobs_went_through_slurm(slurm_run):
    work, _, _ = slurm_run
    logs = work / ".snakemake" / "slurm_logs"
    rules = {p.name for p in logs.iterdir()}
    assert {"rule_lec_data", "rule_lec_train", "rule_lec_eval", "rule_lec_figures", "rule_report",
            "rule_device_probe"} <= rules
    stage_logs = list((work / LEC / "logs").rglob("*.log"))
    assert stage_logs and all("SLURM_JOB_ID=" in p.read_text() for p in stage_logs)


def test_a100_tag_reaches_sbatch(slurm_run):
    work, _, _ = slurm_run
    import json

    device = json.loads((work / "results/smoke/device/gpu_rule.json").read_text())
    assert device["requested"] == "a100"
    assert device["scheduler"].get("SLURM_GPUS_ON_NODE") == "1"
    assert "gres:gpu:a100:1" in scontrol(device["scheduler"]["SLURM_JOB_ID"])


def test_failed_job_retried_with_more_memory(slurm_run):
    _, marker, _ = slurm_run
    lines = [line.split() for line in marker.read_text().splitlines()]
    failed_job = lines[0][1]  # the wildcards of the job whose first attempt failed
    attempts = [job_id for job_id, wildcards in lines if wildcards == failed_job]
    assert len(attempts) == 2 and attempts[0] != attempts[1], lines
    mem = [int(re.search(r"MinMemoryNode=(\d+)M", scontrol(j)).group(1)) for j in attempts]
    assert mem[1] == 2 * mem[0], mem


def test_report_equals_local_run(slurm_run, smoke_run):
    work, _, _ = slurm_run
    assert non_timing(work / LEC / "metrics.json") == non_timing(smoke_run / LEC / "metrics.json")

    def rows(path: Path):
        html = BeautifulSoup(path.read_text(), "html.parser")
        return [(r["data-claim"], r["data-verdict"], r.select("td")[3].get_text(" ", strip=True))
                for r in html.select("tr.claim-row") if r["data-claim"].startswith("lec.")]

    lec_rows = rows(work / "report" / "report-smoke.html")
    assert lec_rows and lec_rows == rows(smoke_run / "report" / "report-smoke.html")


def test_cpu_override_drops_the_gpu_request(slurm_run):
    work, _, _ = slurm_run
    import json

    snakemake(work, "results/smoke/device/gpu_rule.json", "--profile", "slurm", "--config", "scale=smoke",
              "gpu=cpu", "--forcerun", "device_probe", *FAST_POLL, timeout=240)
    device = json.loads((work / "results/smoke/device/gpu_rule.json").read_text())
    assert device["requested"] == "cpu" and "SLURM_GPUS_ON_NODE" not in device["scheduler"]
    assert "gres:gpu" not in scontrol(device["scheduler"]["SLURM_JOB_ID"])
