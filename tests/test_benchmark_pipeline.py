"""The benchmark script's analysis of a finished run: critical path, CPU use and start-up share,
checked on a hand-made run directory whose answers are known."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("benchmark_pipeline", ROOT / "workflow/scripts/benchmark_pipeline.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


JOB = """[Thu Dec  3 10:00:{start:02d} 2026]
rule {rule}:
    input: {input}
    output: {output}
    log: logs/{name}.log
    jobid: {jobid}
    benchmark: bench/{name}.tsv
    wildcards: scale=smoke{wc}
"""


def make_run(tmp: Path, jobs: list[dict]) -> Path:
    """jobs: name, rule, input, output, start, end, wall, cpu, startup (wall, cpu) or None."""
    (tmp / ".snakemake/log").mkdir(parents=True)
    (tmp / "logs").mkdir()
    (tmp / "bench").mkdir()
    text = "Provided cores: 2 (use --cores to define parallelism)\n"
    for i, j in enumerate(jobs):
        text += JOB.format(jobid=i, start=j["start"], wc=j.get("wc", ""), **{k: j[k] for k in ("rule", "input", "output", "name")})
    for i, j in sorted(enumerate(jobs), key=lambda x: x[1]["end"]):
        text += f"[Thu Dec  3 10:00:{j['end']:02d} 2026]\nFinished jobid: {i} (Rule: {j['rule']})\n"
    (tmp / ".snakemake/log/2026-12-03T100000.000000.snakemake.log").write_text(text)
    for j in jobs:
        (tmp / "bench" / f"{j['name']}.tsv").write_text(f"s\th:m:s\tcpu_time\n{j['wall']}\t0:00:00\t{j['cpu']}\n")
        log = ""
        if j.get("startup"):
            log = (f"x icmlrepro INFO stage a.b: start-up {j['startup'][0]:.2f} s wall, {j['startup'][1]:.2f} s CPU (...)\n"
                   f"x icmlrepro INFO stage a.b: {j['cpu_logged']:.2f} s CPU in all (...)\n")
        (tmp / "logs" / f"{j['name']}.log").write_text(log)
    return tmp


def test_critical_path_cpu_use_and_startup(tmp_path, bench):
    # data -> (train a 10 s, train b 4 s, in a directory output) -> eval ; fig independent of train
    jobs = [
        dict(name="data", rule="p_data", input="", output="r/data.parquet", start=0, end=2, wall=2.0, cpu=1.0,
             startup=(1.0, 0.5), cpu_logged=1.5),
        dict(name="ta", rule="p_train", input="r/data.parquet", output="r/models/a", start=2, end=12, wall=10.0,
             cpu=9.0, startup=(1.0, 0.5), cpu_logged=8.0, wc=", seed=0"),
        dict(name="tb", rule="p_train", input="r/data.parquet", output="r/models/b", start=2, end=6, wall=4.0,
             cpu=3.0, startup=(1.0, 0.5), cpu_logged=3.0, wc=", seed=1"),
        dict(name="fig", rule="p_fig", input="r/data.parquet", output="r/fig.png", start=6, end=9, wall=3.0,
             cpu=2.0, startup=None, cpu_logged=0.0),
        dict(name="eval", rule="p_eval", input="r/models/a/weights.pt, r/models/b", output="r/metrics.json",
             start=12, end=15, wall=3.0, cpu=2.0, startup=(1.5, 1.0), cpu_logged=2.5),
    ]
    a = bench.analyse(make_run(tmp_path, jobs))
    assert a["cores"] == 2 and a["jobs"] == 5
    assert a["wall_s"] == pytest.approx(15.0)
    assert a["critical_path_s"] == pytest.approx(2 + 10 + 3)  # data -> train a -> eval, not b, not fig
    assert [c["job"] for c in a["critical_path"]] == ["p_data", "p_train[0]", "p_eval"]
    assert [c["started_at_s"] for c in a["critical_path"]] == [0, 2, 12]
    cpu = 1.5 + 9.0 + 3.0 + 2.0 + 2.5  # the larger of sampled and logged CPU per job
    assert a["sum_job_cpu_s"] == pytest.approx(cpu)
    assert a["cpu_use"] == pytest.approx(cpu / (2 * 15))
    assert a["startup_jobs_logged"] == 4
    assert a["startup_share"] == pytest.approx((1 + 1 + 1 + 1.5) / (2 + 10 + 4 + 3))
    assert [s["job"] for s in a["slowest"]][:2] == ["p_train[0]", "p_train[1]"]
    assert "critical path" in bench.format_report(a)


def test_rerun_replaces_earlier_entry(tmp_path, bench):
    """A job run again in a later Snakemake invocation counts once, with its latest times."""
    one = [dict(name="data", rule="p_data", input="", output="r/data.parquet", start=0, end=5, wall=5.0, cpu=1.0,
                startup=None, cpu_logged=0.0)]
    run = make_run(tmp_path, one)
    later = (run / ".snakemake/log/2026-12-03T100000.000000.snakemake.log").read_text().replace(
        "10:00:00", "10:00:20").replace("10:00:05", "10:00:27")
    (run / ".snakemake/log/2026-12-03T110000.000000.snakemake.log").write_text(later)
    a = bench.analyse(run)
    assert a["jobs"] == 1
    assert a["critical_path"][0]["started_at_s"] == 0  # relative to the first start of what is kept


def test_snakemake_timeouts_scale_with_the_papers_run(tmp_path):
    """The suite's Snakemake calls get time per paper they run, so 19 papers fit, yet inside CI's 90 min."""
    from tests.conftest import papers_run, snakemake_timeout

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("papers: [a, b, c]\n")
    assert papers_run(tmp_path, ("--cores", "2")) == 3
    assert papers_run(tmp_path, ("--config", "scale=smoke", "papers=[lec]")) == 1
    assert papers_run(tmp_path, ("--config", "papers=[lec,timesx]")) == 2
    # on a machine of the README's speed (slowness 1; a loaded machine gets proportionally more, tested in
    # test_conftest.py): the budget's arithmetic, not today's load
    one, three = snakemake_timeout(tmp_path, ("papers=[lec]",), 1.0), snakemake_timeout(tmp_path, (), 1.0)
    assert three > one
    (tmp_path / "config" / "config.yaml").write_text("papers: [" + ", ".join(f"p{i}" for i in range(19)) + "]\n")
    nineteen = snakemake_timeout(tmp_path, (), 1.0)
    assert 4 * 10 * 60 < nineteen < 90 * 60  # 4x the 10-min smoke target (loaded CI), below CI's limit


def test_run_measured_separates_the_parent_own_cpu_from_its_children(tmp_path, bench):
    """A parent that burns ~0.3 s itself and waits for a child burning ~0.6 s: its own CPU excludes the child's,
    the children's usage includes both, and a chatty stderr does not stall it (a file, not a pipe)."""
    script = ("import subprocess, sys, time\n"
              "def burn(s):\n"
              "    t = time.process_time()\n"
              "    while time.process_time() - t < s: pass\n"
              "sys.stderr.write('x' * 200000)\n"
              "burn(0.3)\n"
              "subprocess.run([sys.executable, '-c', 'import time\\nt = time.process_time()\\n"
              "while time.process_time() - t < 0.6: pass'])\n"
              "burn(0.3)\n")
    m = bench.run_measured([sys.executable, "-c", script], tmp_path, poll_s=0.05)
    assert m["returncode"] == 0 and len(m["stderr"]) == 200000
    assert 0.25 <= m["snakemake_own_cpu_s"] <= 1.0
    assert m["all_processes_cpu_s"] >= m["snakemake_own_cpu_s"] + 0.5


def test_paper_costs_sum_logged_cpu_and_divide_by_the_seeds_of_metrics(tmp_path, bench):
    """Per paper: nested benchmark files count, the stage's logged CPU wins over Snakemake's sampled (lower)
    cpu_time, seeds are the replicates of metrics.json, and a substrate without metrics has no per-seed cost."""
    import json

    def job(paper, rel, sampled, logged=None):
        tsv = tmp_path / "results/default" / paper / "benchmarks" / f"{rel}.tsv"
        tsv.parent.mkdir(parents=True, exist_ok=True)
        tsv.write_text(f"s\th:m:s\tcpu_time\n9.0\t0:00:09\t{sampled}\n")
        if logged is not None:
            log = tmp_path / "results/default" / paper / "logs" / f"{rel}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"x icmlrepro INFO stage p.train: {logged:.2f} s CPU in all (...)\n")

    job("p", "p_data", 1.0)
    job("p", "p_train/seed0", 5.0, logged=20.0)
    job("p", "p_train/seed1", 30.0, logged=20.0)
    (tmp_path / "results/default/p/metrics.json").write_text(json.dumps({"replicates": [0, 1]}))
    job("lm", "lm_train", 7.0)
    rows = {r["paper"]: r for r in bench.paper_costs(tmp_path, "default")}
    assert rows["p"]["jobs"] == 3 and rows["p"]["cpu_s"] == pytest.approx(1 + 20 + 30)
    assert rows["p"]["seeds"] == 2 and rows["p"]["cpu_per_seed_s"] == pytest.approx(25.5)
    assert rows["lm"]["seeds"] is None and rows["lm"]["cpu_per_seed_s"] is None
    text = bench.format_costs(list(rows.values()), cores=2, cpu_use=0.85)
    assert text.splitlines()[-1].split()[:3] == ["all", "4", "58"]
