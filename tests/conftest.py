"""Shared fixtures: the repository root, a scratch copy of the workflow, and a Snakemake runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from icmlrepro.core.paths import copy_workflow as _copy_workflow

ROOT = Path(__file__).resolve().parents[1]


def copy_workflow(dest: Path) -> Path:
    """A scratch copy of the workflow, so tests never touch the user's results."""
    return _copy_workflow(dest, ROOT)


# Time allowed to a Snakemake call, sized to its work: a fixed part (DAG build, report, LM substrate)
# plus a part per paper it runs. A smoke chain takes <= 45 s on a quiet 2-core machine (the project's
# bar); CI machines are loaded (4x slower seen), so 180 s per paper: the 8-paper smoke DAG gets 34 min,
# 19 papers 67 min, inside CI's 90. The limit then stretches with the machine's measured speed at the time
# of the call (:func:`machine_slowness`: a loaded or slow machine gets proportionally more), and
# ICMLREPRO_TEST_TIMEOUT_FACTOR stretches it further by hand.
TIMEOUT_FIXED_S = 600
TIMEOUT_PER_PAPER_S = 180
# Seconds the calibration loop of machine_slowness takes on the README's quiet 2-core machine (median of 3).
REFERENCE_LOOP_S = 0.095


def _calibration_loop() -> float:
    import time

    t0 = time.perf_counter()
    total = 0
    for i in range(2_000_000):
        total += i * i % 7
    return time.perf_counter() - t0


def machine_slowness() -> float:
    """How many times slower than the README's quiet machine this one runs a fixed pure-Python loop right
    now (at least 1): other work on the cores, a slower CPU or throttling all show up in it, so a slow
    machine gets more time instead of turning its slowness into test errors."""
    return max(1.0, sorted(_calibration_loop() for _ in range(3))[1] / REFERENCE_LOOP_S)


def papers_run(workdir: Path, args: tuple[str, ...]) -> int:
    """How many papers a Snakemake call runs: its ``papers=[...]`` override, else the workdir's config."""
    import yaml

    for arg in args:
        if arg.startswith("papers="):
            return len([p for p in arg[len("papers="):].strip("[]").split(",") if p.strip()])
    config = Path(workdir) / "config" / "config.yaml"
    try:
        return len(yaml.safe_load(config.read_text())["papers"])
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return 19  # all papers of the project: the largest honest budget


def snakemake_timeout(workdir: Path, args: tuple[str, ...], slowness: float | None = None) -> float:
    factor = float(os.environ.get("ICMLREPRO_TEST_TIMEOUT_FACTOR", "1"))
    slowness = machine_slowness() if slowness is None else slowness
    return factor * slowness * (TIMEOUT_FIXED_S + TIMEOUT_PER_PAPER_S * papers_run(workdir, args))


def unfinished_jobs(workdir: Path) -> list[str]:
    """The jobs of the latest Snakemake log in ``workdir`` that started and never finished, each with its
    wildcards and start time: what a timed-out call was waiting for."""
    import re

    logs = sorted((Path(workdir) / ".snakemake" / "log").glob("*.snakemake.log"))
    if not logs:
        return []
    text = logs[-1].read_text(errors="replace")
    started = {}
    for m in re.finditer(r"^\[(?P<when>[^\]]+)\]\n(?:local)?rule (?P<rule>\w+):\n(?P<body>(?:    .*\n)+)", text,
                         flags=re.M):
        job = re.search(r"jobid: (\d+)", m.group("body"))
        wild = re.search(r"wildcards: (.*)", m.group("body"))
        if job:
            started[job.group(1)] = (f"{m.group('rule')}[{wild.group(1) if wild else ''}] started "
                                     f"{m.group('when')}")
    finished = set(re.findall(r"Finished job(?:id)?:? (\d+)", text))
    return [desc for jobid, desc in started.items() if jobid not in finished]


def snakemake(workdir: Path, *args: str, check: bool = True, env: dict | None = None,
              timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run the Snakemake of this environment in ``workdir``; output captured as text. Without a
    ``timeout`` the call gets one sized to the papers it runs and the machine's speed
    (:func:`snakemake_timeout`); when it runs out, the error names the jobs still running."""
    import signal

    slowness = machine_slowness()
    timeout = timeout or snakemake_timeout(workdir, args, slowness)
    exe = Path(sys.executable).with_name("snakemake")
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.Popen([str(exe), *args], cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=full_env, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        running = unfinished_jobs(workdir)
        os.killpg(proc.pid, signal.SIGTERM)  # Snakemake and every job it started
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        raise AssertionError(
            f"snakemake {' '.join(args)} ran past its {timeout:.0f} s limit (machine {slowness:.1f}x slower than "
            f"the reference at the start); still running: {'; '.join(running) or 'no job (Snakemake itself)'}\n"
            f"{stderr[-3000:]}") from None
    proc = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def non_timing(path: Path) -> str:
    """metrics.json without its timing metrics: what two identical runs must give byte for byte."""
    import json
    raw = json.loads(path.read_text())
    raw["metrics"] = {k: v for k, v in raw["metrics"].items() if not v["timing"]}
    return json.dumps(raw, sort_keys=True)


def check_smoke_paper(run: Path, paper: str, figures, is_timing=None):
    """A paper's smoke outputs in a run directory: its figures are written, its timing flags are what
    ``is_timing(name)`` says (when given), and every claim got a verdict. Returns its metrics."""
    from icmlrepro.core import verdicts as V
    from icmlrepro.core.claims import load_claims
    from icmlrepro.core.metrics import load_metrics

    out = run / "results" / "smoke" / paper
    for fig in figures:
        assert (out / "figures" / fig).stat().st_size > 1000, fig
    metrics = load_metrics(out / "metrics.json")
    if is_timing is not None:
        for name, m in metrics.metrics.items():
            assert m.timing == is_timing(name), name
    results = V.judge_paper(load_claims(paper), metrics)
    assert results and all(r.verdict != V.NOT_RUN for r in results)
    return metrics


def figure_files(work: Path) -> dict[str, list[Path]]:
    """The smoke figures of every configured paper in a run directory (what its report must embed)."""
    import yaml
    papers = yaml.safe_load((work / "config" / "config.yaml").read_text())["papers"]
    return {p: sorted((work / "results" / "smoke" / p / "figures").glob("*.png")) for p in papers}


def run_interpreted(module: str) -> list:
    """``python -m module`` with TRITON_INTERPRET=1 in a fresh process (Triton reads the variable when it
    is imported); the module prints a JSON list of kernel-vs-reference comparisons."""
    import json
    proc = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """One complete smoke run of the whole DAG, shared by the integration and browser tests."""
    work = copy_workflow(tmp_path_factory.mktemp("smoke"))
    snakemake(work, "--cores", "2", "--config", "scale=smoke")
    return work


def _planted_metrics(paper: str, scale: str, means: dict[str, float], n: int, step: float):
    """Each metric ``mean + step * k`` on replicate k of ``n`` (a small spread, so a CI exists)."""
    from icmlrepro.core.metrics import MetricsFile

    mf = MetricsFile(paper, scale, replicates=list(range(n)))
    for name, mean in means.items():
        mf.add(name, [mean + step * k for k in range(n)])
    return mf


def planted_verdict(paper: str, claim_id: str, means: dict[str, float], n: int = 5, step: float = 0.005) -> str:
    """The verdict of ``paper``'s claim ``claim_id`` on planted metrics (:func:`_planted_metrics`), judged by the
    registry's own predicate."""
    from icmlrepro.core import verdicts as V
    from icmlrepro.core.claims import load_claims

    claim = {c.id: c for c in load_claims(paper).claims}[claim_id]
    return V.judge_claim(claim, _planted_metrics(paper, "default", means, n, step)).verdict


def planted_gate(paper: str, gate_id: str, means: dict[str, float], n: int = 5, step: float = 0.005,
                 scale: str = "default") -> str:
    """The state of ``paper``'s gate ``gate_id`` ("holds", "fails", "undecided") on planted metrics, planted as
    in :func:`planted_verdict`."""
    from icmlrepro.core import verdicts as V
    from icmlrepro.core.claims import load_claims

    gate = {g.id: g for g in load_claims(paper).gates}[gate_id]
    assert gate.applies(scale), f"gate {gate_id} is not judged at {scale}"
    return V.judge_gate(gate, _planted_metrics(paper, scale, means, n, step)).state
