"""The smoke DAG end to end through Snakemake: outputs, determinism, targeted reruns, failure handling."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import copy_workflow, non_timing, snakemake

pytestmark = pytest.mark.integration

LEC = Path("results/smoke/lec")
FIGURES = ["risk_vs_alpha.png", "retention_vs_alpha.png", "routing.png", "synthetic_risk.png"]


def planned_rules(proc: subprocess.CompletedProcess) -> dict[str, int]:
    """Rule -> job count from the 'Job stats' table of a dry run."""
    text = proc.stdout + proc.stderr
    if "Nothing to be done" in text:
        return {}
    table = text.split("Job stats:")[1].split("total")[0]
    return {m[0]: int(m[1]) for m in re.findall(r"^(\w+)\s+(\d+)\s*$", table, flags=re.M)}


def clone_run(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


def test_outputs_and_offline_guard(smoke_run):
    assert (smoke_run / LEC / "metrics.json").exists()
    for f in FIGURES:
        assert (smoke_run / LEC / "figures" / f).stat().st_size > 1000
    assert (smoke_run / "report" / "report-smoke.html").exists()
    logs = list((smoke_run / LEC / "logs").rglob("*.log"))
    assert len(logs) >= 9
    for log in logs:
        assert "network guard on" in log.read_text(), log
    bench = list((smoke_run / LEC / "benchmarks").rglob("*.tsv"))
    assert len(bench) == len(logs)


def test_timing_metrics_flagged(smoke_run):
    raw = json.loads((smoke_run / LEC / "metrics.json").read_text())
    timings = [k for k, v in raw["metrics"].items() if v["timing"]]
    assert timings == ["eval_seconds"]
    assert all(len(v["values"]) == len(raw["replicates"]) for v in raw["metrics"].values())


def test_second_run_gives_identical_metrics(smoke_run, tmp_path):
    again = copy_workflow(tmp_path)
    snakemake(again, str(LEC / "metrics.json"), "--cores", "2", "--config", "scale=smoke")
    assert non_timing(again / LEC / "metrics.json") == non_timing(smoke_run / LEC / "metrics.json")


def test_lint_is_clean(smoke_run):
    proc = snakemake(smoke_run, "--lint", "--config", "scale=smoke", check=False)
    assert "Lints for" not in proc.stdout + proc.stderr
    assert proc.returncode == 0


def test_forcerun_eval_plans_eval_figures_report_only(smoke_run):
    plan = planned_rules(snakemake(smoke_run, "-n", "--config", "scale=smoke", "--forcerun", "lec_eval"))
    assert set(plan) == {"lec_eval", "lec_figures", "report", "all"}


def test_complete_run_has_nothing_to_do(smoke_run):
    assert planned_rules(snakemake(smoke_run, "-n", "--config", "scale=smoke")) == {}


def test_until_and_single_target_plans(tmp_path):
    work = copy_workflow(tmp_path)
    plan = planned_rules(snakemake(work, "-n", "--config", "scale=smoke", "--until", "lec_train"))
    assert plan == {"lec_data": 1, "lec_train": 6}
    target = "results/smoke/lec/train/mlp/seed1/predictions.parquet"
    assert planned_rules(snakemake(work, "-n", target)) == {"lec_data": 1, "lec_train": 1}


def test_paper_scale_dag_builds(tmp_path):
    work = copy_workflow(tmp_path)
    plan = planned_rules(snakemake(work, "-n", "--config", "scale=paper"))
    assert plan["lec_train"] == 30 and plan["report"] == 1


def test_corrupt_intermediate_fails_naming_file_and_rerun_fixes(smoke_run, tmp_path):
    work = clone_run(smoke_run, tmp_path / "w")
    bad = LEC / "train" / "logreg" / "seed0" / "predictions.parquet"
    data = (work / bad).read_bytes()
    (work / bad).write_bytes(data[: len(data) // 2])
    proc = snakemake(work, "--cores", "2", "--config", "scale=smoke", "--forcerun", "lec_eval", check=False)
    assert proc.returncode != 0
    log = (work / LEC / "logs" / "lec_eval.log").read_text()
    assert str(bad) in log and "corrupt or truncated" in log
    assert not (work / LEC / "metrics.json").exists() or "lec_eval" in proc.stderr
    snakemake(work, "--cores", "2", "--config", "scale=smoke", "--forcerun", str(bad))
    assert non_timing(work / LEC / "metrics.json") == non_timing(smoke_run / LEC / "metrics.json")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_run_leaves_nothing_taken_as_complete(smoke_run, tmp_path, sig):
    """Killed while lec_eval's outputs are on disk but the job is unfinished: a rerun redoes lec_eval.

    SIGTERM (Ctrl-C, scancel) lets Snakemake clean up; after SIGKILL its lock stays and the README's
    `snakemake --unlock` is needed first. Either way the outputs are never taken as complete.
    """
    work = clone_run(smoke_run, tmp_path / "w")
    metrics = work / LEC / "metrics.json"
    before = metrics.stat().st_mtime_ns
    exe = Path(sys.executable).with_name("snakemake")
    proc = subprocess.Popen([str(exe), "--cores", "2", "--config", "scale=smoke", "--forcerun", "lec_eval"],
                            cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "ICMLREPRO_FAULT_SLEEP": "lec.evaluate:300"},
                            start_new_session=True)
    try:
        deadline = time.time() + 240
        while time.time() < deadline:  # wait until the new metrics.json is on disk, job still running
            if metrics.exists() and metrics.stat().st_mtime_ns != before:
                break
            time.sleep(0.5)
        else:
            pytest.fail("lec_eval never wrote its metrics")
        assert proc.poll() is None
        os.killpg(proc.pid, sig)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    if sig == signal.SIGKILL:
        snakemake(work, "--unlock", "--config", "scale=smoke")
    target = str(LEC / "metrics.json")
    plan = planned_rules(snakemake(work, "-n", target, "--config", "scale=smoke"))
    assert "lec_eval" in plan and "lec_train" not in plan
    snakemake(work, "--cores", "2", target, "--config", "scale=smoke")
    snakemake(work, "--cores", "2", "--config", "scale=smoke")
    assert planned_rules(snakemake(work, "-n", "--config", "scale=smoke")) == {}
    assert non_timing(metrics) == non_timing(smoke_run / LEC / "metrics.json")


def test_lm_substrate_chain_is_deterministic(smoke_run, tmp_path):
    """lm_data -> lm_train (target, draft) -> lm_eval -> lm_figures at smoke scale, twice: same metrics."""
    lm = Path("results/smoke/lm")
    targets = [str(lm / "metrics.json"), str(lm / "figures" / "training_curve.png"),
               str(lm / "figures" / "accuracy_vs_trace_length.png")]
    snakemake(smoke_run, *targets, "--cores", "2")
    raw = json.loads((smoke_run / lm / "metrics.json").read_text())
    for role in ("target", "draft"):
        for fam in ("add", "mod", "sort", "dyck"):
            assert f"accuracy.{role}.{fam}" in raw["metrics"]
        assert raw["metrics"][f"tpot_ms.{role}.b8"]["timing"]
    assert (smoke_run / lm / "models" / "target" / "config.json").exists()
    again = copy_workflow(tmp_path)
    snakemake(again, str(lm / "metrics.json"), "--cores", "2")
    assert non_timing(again / lm / "metrics.json") == non_timing(smoke_run / lm / "metrics.json")
