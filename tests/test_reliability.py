"""Failure modes a user meets, on LEC's smoke chain (the smallest) in scratch copies: a report that
follows its claims, schema and template; jobs that run the code of the checkout being run and record
its commit; a stage killed while it writes; one recovery command in every error."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from icmlrepro.core.io import read_parquet

from .conftest import ROOT, copy_workflow, non_timing, snakemake

pytestmark = pytest.mark.integration

CONFIG = ("--config", "scale=smoke", "papers=[lec]")
LEC = Path("results/smoke/lec")
REPORT = Path("report/report-smoke.html")


@pytest.fixture(scope="module")
def lec_run(tmp_path_factory) -> Path:
    """LEC's smoke chain and the report, once for this module."""
    work = copy_workflow(tmp_path_factory.mktemp("lec_run"))
    snakemake(work, "--cores", "2", *CONFIG)
    return work


def clone(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


def planned(work: Path, *args: str, proc: subprocess.CompletedProcess | None = None) -> set[str]:
    """The rules a dry run would run (empty when there is nothing to do)."""
    proc = proc or snakemake(work, "-n", *CONFIG, *args)
    text = proc.stdout + proc.stderr
    if "Nothing to be done" in text:
        return set()
    table = text.split("Job stats:")[1].split("total")[0]
    return set(re.findall(r"^(\w+)\s+\d+\s*$", table, flags=re.M)) - {"all"}


def verdict(html: str, claim: str) -> str:
    return re.search(rf'data-claim="{re.escape(claim)}" data-verdict="([^"]+)"', html).group(1)


def test_edited_claims_schema_or_template_rerun_the_report(lec_run, tmp_path):
    """Editing a predicate, the claims schema or the template reruns `report` alone (it used to stay
    stale: "Nothing to be done"), and the edited predicate changes the verdict it shows."""
    work = clone(lec_run, tmp_path / "w")
    assert planned(work) == set()
    before = verdict((work / REPORT).read_text(), "lec.risk_control")

    claims_file = work / "resources" / "claims" / "lec.yaml"
    raw = yaml.safe_load(claims_file.read_text())
    claim = next(c for c in raw["claims"] if c["id"] == "risk_control")
    pred = claim["predicate"]
    first = dict((pred.get("all_of") or pred.get("any_of") or [pred])[0])
    first.pop("control", None)
    # a bound no finite value can meet (or one every value meets): the verdict must move to it
    fails = before != "not reproduced"
    first.update(op=">=" if fails else "<=", threshold=1.0e9)
    claim["predicate"] = {"all_of": [first]}
    claim["gates"] = []  # judged on the edited predicate alone (lec's gates may block it at smoke)
    time.sleep(1.1)  # a coarse file system clock must see the edits as newer than the report
    claims_file.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    edited = ["resources/claims/lec.yaml", "config/schema/claims.schema.yaml", "report/templates/report.html.j2"]
    for name in edited[1:]:
        with (work / name).open("a") as fh:
            fh.write("\n")
    dry = snakemake(work, "-n", *CONFIG)
    assert planned(work, proc=dry) == {"report"}
    reason = re.search(r"reason: Updated input files: (.*)", dry.stdout + dry.stderr).group(1)
    assert set(reason.split(", ")) == set(edited)
    snakemake(work, "--cores", "2", *CONFIG)
    after = verdict((work / REPORT).read_text(), "lec.risk_control")
    assert after == ("not reproduced" if fails else "reproduced") != before


def _git_commit(work: Path, marker: str) -> str:
    (work / "workflow" / "icmlrepro" / "checkout_marker.py").write_text(f"MARK = {marker!r}\n")
    git = ["git", "-C", str(work), "-c", "user.name=test", "-c", "user.email=test@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "Snakefile", "workflow", "config", "resources"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", marker], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_two_checkouts_run_and_record_their_own_code(lec_run, tmp_path):
    """Two checkouts share one environment (whose editable install points to this repository): each
    checkout's jobs import its own package, and its report records its own commit."""
    runs = {name: clone(lec_run, tmp_path / name) for name in ("a", "b")}
    commits = {name: _git_commit(work, name) for name, work in runs.items()}
    for name, work in runs.items():
        snakemake(work, "--cores", "1", *CONFIG, "--forcerun", "report", "--allowed-rules", "report", "all")
        log = (work / "results" / "smoke" / "logs" / "report.log").read_text()
        assert f"code from {work.resolve()}/workflow/icmlrepro" in log, log[-2000:]
        html = (work / REPORT).read_text()
        other = commits["b" if name == "a" else "a"]
        assert commits[name] in html and other not in html


def test_stage_refuses_another_checkouts_code(tmp_path):
    """A job whose package does not come from the checkout the rules named stops, naming both."""
    (tmp_path / "other").mkdir()
    other = copy_workflow(tmp_path / "other")
    env = {**os.environ, "ICMLREPRO_ROOT": str(other), "PYTHONPATH": str(ROOT / "workflow")}
    proc = subprocess.run([sys.executable, "-m", "icmlrepro", "stage", "lec.data", "--spec", "{}",
                           "--settings", "{}"], capture_output=True, text=True, env=env, timeout=60,
                          cwd=tmp_path)
    assert proc.returncode != 0
    assert "WrongCheckoutError" in proc.stderr and str(other) in proc.stderr


def test_stage_killed_mid_write_leaves_no_output_and_rerun_cleans_up(lec_run, tmp_path):
    """Kill Snakemake and the stage while the stage's output is in its temporary file: the partial file
    is never taken as the output, the job is planned again, and the rerun deletes the leftover."""
    work = clone(lec_run, tmp_path / "w")
    target = LEC / "data" / "digits.parquet"
    original = read_parquet(work / target)
    exe = Path(sys.executable).with_name("snakemake")
    proc = subprocess.Popen([str(exe), "--cores", "1", *CONFIG, "--forcerun", "lec_data", "--", str(target)],
                            cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "ICMLREPRO_FAULT_WRITE": "digits.parquet:300"},
                            start_new_session=True)
    partials = lambda: list((work / target).parent.glob(".digits.parquet.*.part"))  # noqa: E731
    try:
        deadline = time.time() + 120
        while not any(p.stat().st_size > 0 for p in partials() if p.exists()):
            if time.time() > deadline or proc.poll() is not None:
                pytest.fail("the stage never started writing digits.parquet")
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    left = partials()
    assert left, "the kill should leave the temporary file behind"
    assert not (work / target).exists()  # Snakemake removed the old output; the partial never took its name
    snakemake(work, "--unlock", *CONFIG)
    assert "lec_data" in planned(work, "--", str(target))
    snakemake(work, "--cores", "1", *CONFIG, "--", str(target))
    assert partials() == []
    pd.testing.assert_frame_equal(read_parquet(work / target), original)
    log = (work / LEC / "logs" / "lec_data.log").read_text()
    assert "left by an interrupted attempt" in log and f"code from {work.resolve()}/workflow/icmlrepro" in log


def test_failed_rerun_is_redone_by_the_next_plain_command(lec_run, tmp_path):
    """The README's code-change flow fails (`--forcerun lec_eval` raises): Snakemake deletes the job's outputs,
    and the next plain command must redo lec_eval and the report, not say "Nothing to be done" because the
    old report is still on disk (issue 43, item 1)."""
    work = clone(lec_run, tmp_path / "w")
    metrics = work / LEC / "metrics.json"
    before = non_timing(metrics)
    marker = tmp_path / "attempts.txt"
    proc = snakemake(work, "--cores", "1", *CONFIG, "--forcerun", "lec_eval", "--retries", "0",
                     env={**os.environ, "ICMLREPRO_FAIL_ONCE": f"lec.evaluate:{marker}"}, check=False)
    assert proc.returncode != 0 and marker.exists()
    assert not metrics.exists() and (work / REPORT).exists()  # outputs gone, the old report still there
    assert {"lec_eval", "report"} <= planned(work)
    snakemake(work, "--cores", "1", *CONFIG)
    assert non_timing(metrics) == before  # the same numbers, timings aside
    assert planned(work) == set()


def test_corrupt_intermediate_prints_the_command_that_fixes_it(lec_run, tmp_path):
    """The error names the file and the one command to run; running exactly that command, then the
    original command again, completes the run."""
    work = clone(lec_run, tmp_path / "w")
    bad = LEC / "train" / "gnb" / "seed0" / "predictions.parquet"
    (work / bad).write_bytes((work / bad).read_bytes()[:100])
    proc = snakemake(work, "--cores", "1", *CONFIG, "--forcerun", "lec_eval", check=False)
    assert proc.returncode != 0
    log = (work / LEC / "logs" / "lec_eval.log").read_text()
    command = re.search(r"rebuild it with `([^`]+)`", log).group(1)
    assert command == f".venv/bin/snakemake --cores 2 --force {bad}"
    args = shlex.split(command)
    assert args[0] == ".venv/bin/snakemake"
    snakemake(work, *args[1:])
    snakemake(work, "--cores", "1", *CONFIG)
    read_parquet(work / bad)
    assert planned(work) == set()


def test_every_job_log_names_its_network_barrier(lec_run):
    """Each job says which barrier kept it off the network: its own network namespace where the kernel permits
    unprivileged ones (this machine's answer decides which text is expected), else the audit hook alone."""
    permitted = shutil.which("unshare") and subprocess.run(["unshare", "-rn", "true"],
                                                           capture_output=True).returncode == 0
    expected = "own network namespace" if permitted else "Python audit hook only"
    logs = sorted((lec_run / LEC / "logs").rglob("*.log"))
    assert logs
    for log in logs:
        barrier = re.search(r"network barrier: (.*)", log.read_text())
        assert barrier and barrier.group(1).startswith(expected), (log, barrier)


def job_counts(proc: subprocess.CompletedProcess) -> dict[str, int]:
    """The jobs per rule a dry run would run (empty when there is nothing to do)."""
    text = proc.stdout + proc.stderr
    if "Nothing to be done" in text:
        return {}
    table = text.split("Job stats:")[1].split("total")[0]
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)\s*$", table, flags=re.M) if rule != "all"}


def test_a_setting_reruns_only_the_jobs_that_read_it(lec_run, tmp_path):
    """Each job gets only the settings it reads (issue 43 item 5): the MLP's epochs retrain the MLP's seeds and
    not GNB's or logistic regression's; an unconfigured paper's block, or another scale's settings, rerun
    nothing (the report used to take the whole config)."""
    work = clone(lec_run, tmp_path / "w")
    cfg_file = work / "config" / "config.yaml"
    original = cfg_file.read_text()
    raw = yaml.safe_load(original)
    n_seeds = raw["lec"]["smoke"]["n_seeds"]

    raw["timesx"]["smoke"]["n_seeds"] += 1  # not configured in this run (papers=[lec])
    raw["lec"]["default"]["alphas"] = [0.1]  # another scale
    cfg_file.write_text(yaml.safe_dump(raw, sort_keys=False))
    assert job_counts(snakemake(work, "-n", *CONFIG)) == {}

    raw["lec"]["smoke"]["mlp_epochs"] += 1
    cfg_file.write_text(yaml.safe_dump(raw, sort_keys=False))
    counts = job_counts(snakemake(work, "-n", *CONFIG))
    assert counts == {"lec_train": n_seeds, "lec_eval": 1, "lec_figures": 1, "report": 1}, counts
