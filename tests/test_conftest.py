"""The test suite's own Snakemake runner: its time limit follows the machine's speed, and when it runs out the
error names the jobs that were still running (issue 43 item 6: a loaded machine used to turn into errors that
said nothing about which job was slow)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from . import conftest
from .conftest import snakemake_timeout, unfinished_jobs

LOG = """Building DAG of jobs...
[Sat Dec  5 12:41:05 2026]
localrule lm_data:
    output: results/smoke/lm/data/train.parquet
    jobid: 16
    wildcards: scale=smoke
    priority: 100
[Sat Dec  5 12:41:05 2026]
rule lec_train:
    output: results/smoke/lec/train/mlp/seed1/predictions.parquet
    jobid: 7
    wildcards: scale=smoke, model=mlp, seed=1
[Sat Dec  5 12:41:06 2026]
Finished jobid: 16 (Rule: lm_data)
"""


def test_unfinished_jobs_names_what_was_running(tmp_path):
    log_dir = tmp_path / ".snakemake" / "log"
    log_dir.mkdir(parents=True)
    (log_dir / "2026-12-05T124104.000000.snakemake.log").write_text(LOG)
    assert unfinished_jobs(tmp_path) == ["lec_train[scale=smoke, model=mlp, seed=1] started Sat Dec  5 12:41:05 2026"]
    assert unfinished_jobs(tmp_path / "nowhere") == []


def test_the_limit_grows_with_the_measured_slowness(tmp_path, monkeypatch):
    monkeypatch.delenv("ICMLREPRO_TEST_TIMEOUT_FACTOR", raising=False)
    args = ("--config", "papers=[lec]")
    quiet = snakemake_timeout(tmp_path, args, slowness=1.0)
    assert quiet == conftest.TIMEOUT_FIXED_S + conftest.TIMEOUT_PER_PAPER_S
    assert snakemake_timeout(tmp_path, args, slowness=3.0) == 3 * quiet
    monkeypatch.setattr(conftest, "_calibration_loop", lambda: 4 * conftest.REFERENCE_LOOP_S)
    assert conftest.machine_slowness() == pytest.approx(4.0)  # a loaded machine measures slower


def test_a_timed_out_call_names_the_running_job(tmp_path, monkeypatch):
    """A stand-in 'snakemake' that writes a log with one started job and hangs: the runner's error names it."""
    fake = tmp_path / "bin" / "snakemake"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport pathlib, time\nd = pathlib.Path('.snakemake/log'); "
                    f"d.mkdir(parents=True, exist_ok=True)\n(d / 'x.snakemake.log').write_text({LOG!r})\n"
                    "time.sleep(60)\n")
    fake.chmod(0o755)
    monkeypatch.setattr(conftest.sys, "executable", str(fake.parent / "python"))
    with pytest.raises(AssertionError, match=r"still running: lec_train\[scale=smoke, model=mlp, seed=1\]"):
        conftest.snakemake(Path(tmp_path), "--cores", "1", timeout=3)
