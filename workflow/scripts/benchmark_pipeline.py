"""Time the pipeline: the whole DAG of all configured papers, its critical path, CPU use and start-up cost.

    .venv/bin/python workflow/scripts/benchmark_pipeline.py                 # smoke DAG of every paper
    .venv/bin/python workflow/scripts/benchmark_pipeline.py --default       # ... and the default DAG
    .venv/bin/python workflow/scripts/benchmark_pipeline.py --per-paper     # ... and each paper's chain alone
    .venv/bin/python workflow/scripts/benchmark_pipeline.py --analyse RUN_DIR [--scale default]
    .venv/bin/python workflow/scripts/benchmark_pipeline.py --imports       # start-up cost of every stage
    .venv/bin/python workflow/scripts/benchmark_pipeline.py --costs default # per-paper cost of results/default

A run happens in a scratch copy of the workflow (your results/ are untouched), with ``--cores``
cores (2), and is then analysed. ``--analyse`` only reads a finished run directory (a checkout or
a scratch copy): the Snakemake logs under ``.snakemake/log`` give each job's start and end, its
inputs and outputs (hence the job graph) and its benchmark file; the benchmark files give job wall
and CPU time; the stage logs give each job's start-up cost (``icmlrepro.core.cli`` logs it before
the work starts). Reported:

- whole-DAG wall time (first job start to last job end, or the measured run when this script ran it);
- critical path: the longest chain of dependent jobs, summing benchmark wall times, with the time
  each of its jobs actually started (a late start on the chain is time lost to the scheduler order);
- sum of job CPU and CPU use = sum(job CPU) / (cores x wall);
- start-up share: sum of per-job start-up (interpreter + imports + set-up) over sum of job wall;
- the five slowest jobs;
- per paper: job CPU, seeds (the replicates of its metrics.json) and CPU per seed (also ``--costs SCALE``
  on this checkout's results/, whatever runs produced them).

Speed targets live here, not in timed tests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import yaml

from icmlrepro.core.paths import copy_workflow

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
RUN_RECORD = "benchmark-run.json"  # written into a run directory by this script: command, cores, wall
STARTUP_RE = re.compile(r"stage \S+: start-up ([\d.]+) s wall, ([\d.]+) s CPU")
CPU_RE = re.compile(r"stage \S+: ([\d.]+) s CPU in all")
HEAVY = ("torch", "torch_geometric", "transformers", "matplotlib", "sklearn", "scipy", "statsmodels", "triton")


@dataclass
class Job:
    jobid: int
    rule: str
    wildcards: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    log: str = ""
    benchmark: str = ""
    start: float | None = None  # epoch seconds, from the Snakemake log
    end: float | None = None
    wall: float = 0.0  # benchmark s (else end - start)
    cpu: float = 0.0  # the larger of the benchmark's sampled cpu_time and the CPU the stage logged
    startup_wall: float | None = None
    startup_cpu: float | None = None

    @property
    def name(self) -> str:
        return f"{self.rule}[{self.wildcards}]" if self.wildcards else self.rule


# ---------------------------------------------------------------- reading a finished run

def _stamp(line: str) -> float | None:
    m = re.match(r"\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$", line.strip())
    return datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y").timestamp() if m else None


def parse_snakemake_logs(run: Path) -> tuple[dict[str, Job], int | None]:
    """Jobs (keyed by their first output) from every Snakemake log of the run, oldest first, so a
    rerun's entry replaces the earlier one; and the cores of the last log."""
    jobs: dict[str, Job] = {}
    cores = None
    for path in sorted((run / ".snakemake" / "log").glob("*.snakemake.log")):
        by_id: dict[int, Job] = {}
        stamp, cur = None, None
        for line in path.read_text(errors="replace").splitlines():
            t = _stamp(line)
            if t is not None:
                stamp, cur = t, None
                continue
            m = re.match(r"Provided cores: (\d+)", line)
            if m:
                cores = int(m.group(1))
            m = re.match(r"(?:local)?rule (\w+):$", line.strip())
            if m:
                cur = Job(-1, m.group(1), start=stamp)
                continue
            m = re.match(r"Finished jobid: (\d+)", line.strip())
            if m and int(m.group(1)) in by_id:
                by_id[int(m.group(1))].end = stamp
                continue
            if cur is None:
                continue
            key, _, value = line.strip().partition(": ")
            if key == "input":
                cur.inputs = [v.strip() for v in value.split(",")]
            elif key == "output":
                cur.outputs = [v.strip() for v in value.split(",")]
            elif key == "log":
                cur.log = value.split(",")[0].strip()
            elif key == "benchmark":
                cur.benchmark = value.strip()
            elif key == "wildcards":
                cur.wildcards = ",".join(v.split("=", 1)[1] for v in value.split(", ") if v.split("=")[0] != "scale")
            elif key == "jobid":
                cur.jobid = int(value)
                by_id[cur.jobid] = cur
        for job in by_id.values():
            if job.end is not None and job.outputs:
                jobs[job.outputs[0]] = job
    return jobs, cores


def read_benchmark(path: Path) -> tuple[float, float] | None:
    """(wall s, cpu_time) of a Snakemake benchmark file (its last repeat)."""
    if not path.exists():
        return None
    lines = path.read_text().strip().splitlines()
    if len(lines) < 2:
        return None
    row = dict(zip(lines[0].split("\t"), lines[-1].split("\t")))
    try:
        return float(row["s"]), float(row.get("cpu_time", "nan"))
    except ValueError:
        return None


def job_cpu(sampled: float, log_text: str) -> float:
    """A job's CPU seconds: Snakemake samples cpu_time (a lower bound, NaN when it missed the job); the CPU
    the stage logged itself (start-up and child processes included) is exact, so the larger wins."""
    m = CPU_RE.search(log_text)
    cpu = sampled if sampled == sampled else 0.0
    return max(cpu, float(m.group(1))) if m else cpu


def fill_measurements(run: Path, jobs: dict[str, Job]) -> None:
    for job in jobs.values():
        bench = read_benchmark(run / job.benchmark) if job.benchmark else None
        if bench:
            job.wall, job.cpu = bench[0], job_cpu(bench[1], "")
        elif job.start is not None and job.end is not None:
            job.wall = job.end - job.start
        log = run / job.log if job.log else None
        if log and log.is_file():
            text = log.read_text(errors="replace")
            m = STARTUP_RE.search(text)
            if m:
                job.startup_wall, job.startup_cpu = float(m.group(1)), float(m.group(2))
            job.cpu = job_cpu(job.cpu, text)


def dependencies(jobs: dict[str, Job]) -> dict[str, list[str]]:
    """For each job, the jobs whose outputs (files or directories) it reads."""
    producer = {out.rstrip("/"): key for key, job in jobs.items() for out in job.outputs}
    deps: dict[str, list[str]] = {}
    for key, job in jobs.items():
        found = []
        for inp in job.inputs:
            path = inp.rstrip("/")
            while path and path not in producer:  # an input inside a directory output
                path = path.rpartition("/")[0]
            if path and producer[path] != key:
                found.append(producer[path])
        deps[key] = sorted(set(found))
    return deps


def critical_path(jobs: dict[str, Job], deps: dict[str, list[str]]) -> tuple[float, list[str]]:
    """Longest chain by job wall time (the DAG's lower bound on wall time with unlimited cores)."""
    memo: dict[str, tuple[float, list[str]]] = {}

    def longest(key: str) -> tuple[float, list[str]]:
        if key not in memo:
            best = max((longest(d) for d in deps[key]), default=(0.0, []), key=lambda x: x[0])
            memo[key] = (best[0] + jobs[key].wall, best[1] + [key])
        return memo[key]

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    return max((longest(k) for k in jobs), default=(0.0, []), key=lambda x: x[0])


def analyse(run: Path, cores: int | None = None, wall: float | None = None) -> dict:
    """The figures this script reports, from a finished run directory only."""
    jobs, log_cores = parse_snakemake_logs(run)
    if not jobs:
        sys.exit(f"{run}: no finished jobs in .snakemake/log/*.snakemake.log")
    record = json.loads((run / RUN_RECORD).read_text()) if (run / RUN_RECORD).exists() else {}
    cores = cores or record.get("cores") or log_cores or os.cpu_count()
    fill_measurements(run, jobs)
    real = {k: j for k, j in jobs.items() if j.benchmark}  # `all` and other local targets do no work
    t0 = min(j.start for j in jobs.values() if j.start is not None)
    t1 = max(j.end for j in jobs.values() if j.end is not None)
    wall = wall or record.get("wall_s") or (t1 - t0)
    deps = dependencies(real)
    cp_len, cp = critical_path(real, deps)
    cpu = sum(j.cpu for j in real.values())
    logged = [j for j in real.values() if j.startup_wall is not None]
    per_rule: dict[str, list[tuple[float, float]]] = {}
    for j in logged:
        per_rule.setdefault(j.rule, []).append((j.startup_wall, j.startup_cpu))
    return {
        "run": str(run), "cores": cores, "jobs": len(real), "wall_s": wall,
        "returncode": record.get("returncode"), "load_1min_before_after": record.get("load_1min_before_after"),
        "critical_path_s": cp_len,
        "critical_path": [{"job": real[k].name, "wall_s": real[k].wall,
                           "started_at_s": (real[k].start - t0) if real[k].start else None} for k in cp],
        "sum_job_wall_s": sum(j.wall for j in real.values()),
        "sum_job_cpu_s": cpu, "cpu_use": cpu / (cores * wall) if wall else float("nan"),
        "lower_bound_s": max(cp_len, cpu / cores),
        "startup_jobs_logged": len(logged),
        "sum_startup_wall_s": sum(j.startup_wall for j in logged),
        "sum_startup_cpu_s": sum(j.startup_cpu for j in logged),
        "startup_share": (sum(j.startup_wall for j in logged) / sum(j.wall for j in logged)) if logged else None,
        "startup_cpu_share": (sum(j.startup_cpu for j in logged) / sum(j.cpu for j in logged)) if logged else None,
        "startup_by_rule_mean_s": {r: [sum(x[0] for x in v) / len(v), sum(x[1] for x in v) / len(v), len(v)]
                                   for r, v in sorted(per_rule.items())},
        "snakemake_own_cpu_s": record.get("snakemake_own_cpu_s"),
        "all_processes_cpu_s": record.get("all_processes_cpu_s"),
        "slowest": [{"job": j.name, "wall_s": j.wall, "cpu_s": j.cpu, "startup_s": j.startup_wall}
                    for j in sorted(real.values(), key=lambda j: -j.wall)[:5]],
    }


def format_report(a: dict) -> str:
    out = [f"run directory          {a['run']}",
           f"jobs                   {a['jobs']} on {a['cores']} cores",
           f"whole-DAG wall         {a['wall_s']:8.1f} s"
           + (f"  (run by this script: exit {a['returncode']}, 1-min load before/after "
              f"{a['load_1min_before_after'][0]:.1f}/{a['load_1min_before_after'][1]:.1f})"
              if a.get("load_1min_before_after") else ""),
           f"critical path          {a['critical_path_s']:8.1f} s  (lower bound max(path, CPU/cores) "
           f"{a['lower_bound_s']:.1f} s)",
           f"sum of job wall        {a['sum_job_wall_s']:8.1f} s",
           f"sum of job CPU         {a['sum_job_cpu_s']:8.1f} s",
           f"CPU use                {a['cpu_use']:8.2f}   (sum job CPU / (cores x wall))"]
    if a["startup_share"] is not None:
        out += [f"start-up, {a['startup_jobs_logged']} jobs logged {a['sum_startup_wall_s']:6.1f} s wall, "
                f"{a['sum_startup_cpu_s']:.1f} s CPU = {100 * a['startup_share']:.0f}% of their job wall, "
                f"{100 * a['startup_cpu_share']:.0f}% of their job CPU"]
        out += ["start-up mean per job, by rule (wall, CPU, jobs):"]
        out += [f"  {r:<32} {w:6.2f} s {c:6.2f} s {n:3d}" for r, (w, c, n) in a["startup_by_rule_mean_s"].items()]
    else:
        out += ["start-up               not logged by this run's stages (older code)"]
    if a.get("snakemake_own_cpu_s") is not None:
        own, total = a["snakemake_own_cpu_s"], a["all_processes_cpu_s"]
        out += [f"Snakemake's own CPU    {own:8.1f} s  = {100 * own / a['wall_s']:.1f}% of one core over the wall, "
                f"{100 * own / (own + total):.1f}% of all CPU ({own + total:.1f} s: its own + every process it "
                f"waited for; jobs' sampled CPU {a['sum_job_cpu_s']:.1f} s)"]
    out += ["critical path (job, wall, started at):"]
    out += [f"  {c['job']:<48} {c['wall_s']:7.1f} s   +{c['started_at_s'] or 0:7.1f} s" for c in a["critical_path"]]
    out += ["five slowest jobs (wall, CPU, start-up):"]
    out += [f"  {s['job']:<48} {s['wall_s']:7.1f} s {s['cpu_s']:7.1f} s "
            f"{'' if s['startup_s'] is None else format(s['startup_s'], '6.1f') + ' s'}" for s in a["slowest"]]
    return "\n".join(out)


def paper_costs(run: Path, scale: str) -> list[dict]:
    """Per paper (a folder of results/<scale> with benchmark files): jobs, summed job CPU (``job_cpu``, as for
    the whole DAG), seeds (replicates in its
    metrics.json; none for shared substrates such as the LM) and CPU per seed. In a checkout, benchmark files
    left by rules or arms since removed count too: the figures of a scratch whole-DAG run have none."""
    rows = []
    for folder in sorted((run / "results" / scale).glob("*/benchmarks")):
        paper, cpu, jobs = folder.parent.name, 0.0, 0
        for tsv in sorted(folder.rglob("*.tsv")):
            bench = read_benchmark(tsv)
            if bench is None:
                continue
            jobs += 1
            log = (folder.parent / "logs" / tsv.relative_to(folder)).with_suffix(".log")
            cpu += job_cpu(bench[1], log.read_text(errors="replace") if log.is_file() else "")
        metrics = folder.parent / "metrics.json"
        seeds = len(json.loads(metrics.read_text()).get("replicates", [])) if metrics.exists() else None
        rows.append({"paper": paper, "jobs": jobs, "cpu_s": cpu, "seeds": seeds,
                     "cpu_per_seed_s": cpu / seeds if seeds else None})
    return rows


def format_costs(rows: list[dict], cores: int = 2, cpu_use: float = 0.85) -> str:
    out = [f"{'paper':<18} {'jobs':>4} {'CPU s':>8} {'seeds':>5} {'CPU s/seed':>10}"]
    out += [f"{r['paper']:<18} {r['jobs']:4d} {r['cpu_s']:8.0f} {r['seeds'] or '-':>5} "
            f"{'-' if r['cpu_per_seed_s'] is None else format(r['cpu_per_seed_s'], '.1f'):>10}" for r in rows]
    total = sum(r["cpu_s"] for r in rows)
    out += [f"{'all':<18} {sum(r['jobs'] for r in rows):4d} {total:8.0f}   "
            f"(at CPU use {cpu_use} on {cores} cores: {total / (cores * cpu_use) / 60:.0f} min wall)"]
    return "\n".join(out)


# ---------------------------------------------------------------- running

def timed(cmd: list[str], cwd: Path) -> float:
    """Wall seconds of a command; NaN (with its error on stderr) when it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}", file=sys.stderr)
        return float("nan")
    return time.perf_counter() - t0


def scratch() -> Path:
    return copy_workflow(Path(tempfile.mkdtemp(prefix="icmlrepro-bench-")), ROOT)


def run_measured(cmd: list[str], cwd: Path, poll_s: float = 0.5) -> dict:
    """Run Snakemake and measure what it costs itself: its own process's CPU (scheduler, DAG updates, file
    checks, benchmark sampling threads; children excluded), sampled until it exits, and the CPU of every
    process it waited for (jobs and anything else it started), from the children's resource usage."""
    import resource

    import psutil

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    own = 0.0
    with tempfile.TemporaryFile("w+") as err:  # a file, not a pipe: an unread pipe would stall Snakemake
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, text=True)
        try:
            watched = psutil.Process(proc.pid)  # `nice` execs Snakemake: the same process
            while proc.poll() is None:
                try:
                    t = watched.cpu_times()
                    own = t.user + t.system
                except psutil.Error:
                    break
                time.sleep(poll_s)
        finally:
            proc.wait()
        err.seek(0)
        stderr = err.read()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    waited = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"returncode": proc.returncode, "wall_s": wall, "stderr": stderr,
            "snakemake_own_cpu_s": own, "all_processes_cpu_s": waited}


def whole_dag(scale: str, cores: int, nice: int, scheduler: str | None = None, papers: list[str] | None = None,
              keep_going: bool = False) -> Path:
    """Run every configured paper (or ``papers``) at ``scale`` in a scratch copy; record the measured wall time and
    Snakemake's own CPU there. ``keep_going``: a failed job stops only what depends on it (Snakemake runs the DAG
    breadth-first, so without it one late failure leaves almost no paper complete)."""
    work = scratch()
    print(f"running the whole {scale} DAG in {work}", flush=True)
    cmd = ["nice", "-n", str(nice), SNAKEMAKE, "--cores", str(cores), "--config", f"scale={scale}"]
    if papers:
        cmd.append(f"papers=[{','.join(papers)}]")
    if scheduler:
        cmd += ["--scheduler", scheduler]
    if keep_going:
        cmd.append("--keep-going")
    load = os.getloadavg()[0]
    m = run_measured(cmd, work)
    (work / RUN_RECORD).write_text(json.dumps({"command": cmd, "cores": cores, "scale": scale, "wall_s": m["wall_s"],
                                               "returncode": m["returncode"],
                                               "snakemake_own_cpu_s": m["snakemake_own_cpu_s"],
                                               "all_processes_cpu_s": m["all_processes_cpu_s"],
                                               "load_1min_before_after": [load, os.getloadavg()[0]]}, indent=1))
    if m["returncode"] != 0:  # analyse what finished all the same; the run directory is kept
        print(f"the {scale} run failed ({m['returncode']}); kept in {work}\n{m['stderr'][-3000:]}", flush=True)
    return work


def stage_names() -> list[str]:
    """Every ``stage="..."`` named by a rule."""
    text = "\n".join(p.read_text() for p in sorted((ROOT / "workflow" / "rules").glob("*.smk")))
    return sorted(set(re.findall(r'stage="([\w.]+)"', text)))


IMPORT_PROBE = """
import sys, time
from icmlrepro.core.cli import stage_module, startup_cost
from icmlrepro.core.offline import install_network_guard
from icmlrepro.core.seeding import set_threads
stage_module(sys.argv[1]); set_threads(1); install_network_guard()
wall, cpu = startup_cost()
print(wall, cpu, ",".join(h for h in sys.argv[2].split(",") if h in sys.modules))
"""


def import_costs(stages: list[str]) -> list[tuple[str, float, float, str]]:
    """Per stage, in a fresh interpreter: the wall and CPU seconds from process start to the moment
    its ``run`` would begin (what ``icmlrepro stage`` imports and sets up), and which heavy libraries
    that loaded."""
    rows = []
    for stage in stages:
        proc = subprocess.run([sys.executable, "-c", IMPORT_PROBE, stage, ",".join(HEAVY)], cwd=ROOT / "workflow",
                              capture_output=True, text=True)
        if proc.returncode != 0:
            rows.append((stage, float("nan"), float("nan"), "failed: " + proc.stderr.strip().splitlines()[-1]))
            continue
        wall, cpu, heavy = (proc.stdout.strip().split(" ") + [""])[:3]
        rows.append((stage, float(wall), float(cpu), heavy))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--analyse", metavar="RUN_DIR", type=Path, help="only read this finished run and report")
    ap.add_argument("--default", action="store_true", help="also run the whole default-scale DAG")
    ap.add_argument("--no-smoke", action="store_true", help="with --default: skip the whole smoke DAG")
    ap.add_argument("--keep-going", action="store_true", help="whole-DAG runs go on past a failed job")
    ap.add_argument("--per-paper", action="store_true", help="also time each paper's smoke chain alone")
    ap.add_argument("--imports", action="store_true", help="only measure each stage's start-up (imports)")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--nice", type=int, default=10, help="niceness of the runs (shared machines)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch run directories")
    ap.add_argument("--scheduler", choices=("ilp", "greedy"), help="Snakemake's job scheduler for the whole-DAG runs "
                    "(default: the workflow profile's)")
    ap.add_argument("--papers", help="comma-separated papers for the whole-DAG runs (default: every configured one)")
    ap.add_argument("--no-build", action="store_true", help="skip the dry-run DAG build timings")
    ap.add_argument("--json", type=Path, help="also write the analysis as JSON here")
    ap.add_argument("--costs", metavar="SCALE", help="only print the per-paper cost of this checkout's results/SCALE")
    args = ap.parse_args()
    if args.costs:
        print(format_costs(paper_costs(ROOT, args.costs), args.cores))
        return
    if args.analyse:
        a = analyse(args.analyse.resolve(), cores=None)
        print(format_report(a))
        if args.json:
            args.json.write_text(json.dumps(a, indent=1))
        return
    if args.imports:
        print(f"{'stage':<30} {'wall':>7} {'CPU':>7}  heavy libraries loaded before run()")
        for stage, wall, cpu, heavy in import_costs(stage_names()):
            print(f"{stage:<30} {wall:6.2f}s {cpu:6.2f}s  {heavy}")
        return
    papers = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["papers"]
    rows, analyses = [], []
    if not args.no_build:
        work = scratch()
        for scale in ("smoke", "default", "paper"):
            rows.append((f"DAG build (snakemake -n), all papers, {scale}",
                         timed([SNAKEMAKE, "-n", "--config", f"scale={scale}"], work)))
        shutil.rmtree(work)
    chosen = args.papers.split(",") if args.papers else None
    scales = (() if args.no_smoke and args.default else ("smoke",)) + (("default",) if args.default else ())
    for scale in scales:
        run = whole_dag(scale, args.cores, args.nice, args.scheduler, chosen, args.keep_going)
        a = analyse(run)
        analyses.append(a)
        rows.append((f"whole DAG, {len(chosen or papers)} papers, {scale}, {args.cores} cores"
                     + (f", {args.scheduler} scheduler" if args.scheduler else ""), a["wall_s"]))
        print(f"== {scale}\n{format_report(a)}\n{format_costs(paper_costs(run, scale), args.cores)}\n", flush=True)
        if not args.keep and json.loads((run / RUN_RECORD).read_text())["returncode"] == 0:
            shutil.rmtree(run)
    if args.per_paper:
        for paper in papers:
            w = scratch()
            rows.append((f"{paper} chain + report, smoke, {args.cores} cores",
                         timed(["nice", "-n", str(args.nice), SNAKEMAKE, "--cores", str(args.cores),
                                "--config", "scale=smoke", f"papers=[{paper}]"], w)))
            shutil.rmtree(w)
    width = max(len(r[0]) for r in rows)
    for name, sec in rows:
        print(f"{name:<{width}}  {sec:8.1f} s")
    if args.json:
        args.json.write_text(json.dumps(analyses, indent=1))


if __name__ == "__main__":
    main()
