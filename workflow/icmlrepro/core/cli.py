"""Command-line entry of the pipeline: every Snakemake rule calls ``icmlrepro stage ...``.

``icmlrepro stage <paper>.<stage> --spec JSON`` imports ``icmlrepro.papers.<paper>.<stage>``
and calls its ``run(job)``. The spec carries the rule's named inputs, outputs, wildcards and
threads; the settings carry the paper's config block at the job's scale, so the stage never
reads the config file itself: what Snakemake tracks as params is exactly what the stage sees.
Before the stage runs, threads are limited, hub libraries are set offline, outbound network is
refused, the package is checked to come from the checkout being run (``ICMLREPRO_ROOT``, set by
the rules), and temporary leftovers of an earlier, killed attempt at its outputs are deleted.

``icmlrepro check-config FILE`` checks a config file as ``snakemake --configfile FILE`` would use
it and names the file, line and column of the first problem.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .device import GPU_ENV, scheduler_facts
from .io import remove_partials
from .offline import install_network_guard, network_barrier
from .paths import repo_root
from .seeding import set_threads

log = logging.getLogger("icmlrepro")
SHARED_PACKAGES = ("core", "lm")  # stages that belong to no single paper


class Named(dict):
    """A dict whose keys read as attributes (``job.output.metrics``), like Snakemake's namedlists."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"no entry named {key!r} (have: {', '.join(self)})") from None


@dataclass
class Job:
    rule: str
    input: Named = field(default_factory=Named)
    output: Named = field(default_factory=Named)
    params: Named = field(default_factory=Named)
    wildcards: Named = field(default_factory=Named)
    threads: int = 1

    @classmethod
    def from_spec(cls, spec: dict) -> "Job":
        return cls(spec.get("rule", "?"), *(Named(spec.get(k) or {}) for k in
                                            ("input", "output", "params", "wildcards")),
                   int(spec.get("threads", 1)))


def _fault_injection(stage: str) -> None:
    """Test hook: ``ICMLREPRO_FAULT_SLEEP=<paper.stage>:<seconds>`` stalls that stage after it wrote
    its outputs and before it exits, the worst moment for a kill (outputs on disk, job unfinished).

    Used by the tests that kill a running pipeline; it has no effect unless the variable is set.
    """
    spec = os.environ.get("ICMLREPRO_FAULT_SLEEP", "")
    if spec.partition(":")[0] == stage:
        time.sleep(float(spec.partition(":")[2] or 60))


def _fail_once(stage: str, job: Job) -> None:
    """Test hook: ``ICMLREPRO_FAIL_ONCE=<paper.stage>:<file>`` makes the first attempt of that stage fail.

    Each attempt of that stage appends a line (scheduler job id, wildcards) to the file; the
    very first one then raises. Used by the SLURM test that proves retries with escalated
    resources; inert unless set.
    """
    spec = os.environ.get("ICMLREPRO_FAIL_ONCE", "")
    target, _, path = spec.partition(":")
    if target != stage or not path:
        return
    marker = Path(path)
    first = not marker.exists()
    with marker.open("a") as fh:
        wildcards = ",".join(f"{k}={v}" for k, v in sorted(job.wildcards.items()))
        fh.write(f"{os.environ.get('SLURM_JOB_ID', '-')} {wildcards}\n")
    if first:
        raise RuntimeError(f"injected failure of {stage} (ICMLREPRO_FAIL_ONCE), first attempt")


def stage_module(stage: str):
    """``lec.train`` -> icmlrepro.papers.lec.train; shared parts (``core.device``, ``lm.fit``) by their package."""
    group, _, name = stage.partition(".")
    if group in SHARED_PACKAGES:
        return importlib.import_module(f"icmlrepro.{group}.{name}")
    return importlib.import_module(f"icmlrepro.papers.{group}.{name}")


class WrongCheckoutError(RuntimeError):
    """The job imported icmlrepro from another checkout than the workflow it belongs to."""


def check_checkout() -> Path:
    """The checkout the package was imported from; it must be the one the rules named.

    Two checkouts may share one virtual environment, whose editable install points to only one
    of them; the rules put their own ``workflow/`` first on PYTHONPATH and name their checkout in
    ``ICMLREPRO_ROOT``, and a job that still imported the other checkout's code stops here.
    """
    package = Path(__file__).resolve().parents[1]
    expected = os.environ.get("ICMLREPRO_ROOT")
    if expected and Path(expected).resolve() / "workflow" / "icmlrepro" != package:
        raise WrongCheckoutError(
            f"this job runs icmlrepro from {package}, but the workflow being run is {expected}; "
            f"start Snakemake from {expected} (its rules set PYTHONPATH={expected}/workflow)")
    return package


def startup_cost() -> tuple[float, float]:
    """Wall and CPU seconds from this process's start to now: what a job pays before its work begins.

    Logged by every stage, so that ``workflow/scripts/benchmark_pipeline.py --analyse`` can report the
    start-up share of each job from the logs of any finished run.
    """
    import psutil

    return max(0.0, time.time() - psutil.Process().create_time()), time.process_time()


def cpu_so_far() -> float:
    """CPU seconds of this process and its finished children (exact, unlike the benchmark's sampling)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def run_stage(stage: str, spec: dict) -> None:
    package = check_checkout()
    module = stage_module(stage)
    job = Job.from_spec(spec)
    os.environ[GPU_ENV] = str(int(spec.get("gpu") or 0))  # what torch_device() reads
    set_threads(job.threads)
    install_network_guard()
    log.info("stage %s: network guard on, %d thread(s)", stage, job.threads)
    log.info("stage %s: network barrier: %s", stage, network_barrier())
    log.info("stage %s: code from %s (checkout %s)", stage, package, repo_root())
    for path in job.output.values():
        for stale in remove_partials(path):
            log.info("stage %s: removed %s, left by an interrupted attempt", stage, stale)
    scheduler = scheduler_facts()
    if scheduler:
        log.info("stage %s: scheduler %s", stage, " ".join(f"{k}={v}" for k, v in sorted(scheduler.items())))
    _fail_once(stage, job)
    wall, cpu = startup_cost()
    log.info("stage %s: start-up %.2f s wall, %.2f s CPU (interpreter, imports, set-up)", stage, wall, cpu)
    t0 = time.perf_counter()
    module.run(job)
    _fault_injection(stage)
    log.info("stage %s done in %.2f s", stage, time.perf_counter() - t0)
    log.info("stage %s: %.2f s CPU in all (start-up and child processes included)", stage, cpu_so_far())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="icmlrepro", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("stage", help="run one pipeline stage (what a Snakemake rule calls)")
    st.add_argument("stage", help="<paper>.<stage>, e.g. lec.train")
    st.add_argument("--spec", required=True, help="JSON: named input, output, wildcards, threads")
    st.add_argument("--settings", required=True, help="JSON: the paper's settings at this scale")
    rp = sub.add_parser("report", help="render the HTML report")
    rp.add_argument("--spec", required=True)
    rp.add_argument("--settings", required=True)
    cc = sub.add_parser("check-config", help="check config files (as --configfile uses them); "
                                             "names file, line and column of a problem")
    cc.add_argument("files", nargs="+", metavar="FILE")
    cc.add_argument("--base", help="the workflow config the files override (default: config/config.yaml)")
    vd = sub.add_parser("verdicts", help="print every paper's gates and verdicts from results/<scale>/*/metrics.json")
    vd.add_argument("--scale", default="default")
    vd.add_argument("--results", help="results directory (default: results/<scale>)")
    vd.add_argument("--claims", help="claims directory (default: resources/claims)")
    args = parser.parse_args(argv)
    if args.command == "check-config":
        return check_config(args.files, args.base)
    if args.command == "verdicts":
        from .report import sections_from_results, text_summary

        results = Path(args.results) if args.results else repo_root() / "results" / args.scale
        errors: list[str] = []
        print(text_summary(sections_from_results(args.scale, results, errors=errors,
                                                 claims_dir=Path(args.claims) if args.claims else None)))
        for error in errors:  # judged without these papers; the report rule stops on them instead
            print(f"left out: {error}", file=sys.stderr)
        return 1 if errors else 0
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    spec = {**json.loads(args.spec), "params": json.loads(args.settings)}
    if args.command == "stage":
        run_stage(args.stage, spec)
    else:
        from .report import run as run_report

        package = check_checkout()
        job = Job.from_spec(spec)
        install_network_guard()
        log.info("report: code from %s (checkout %s)", package, repo_root())
        log.info("report: network barrier: %s", network_barrier())
        run_report(job)
    return 0


def check_config(files: list[str], base: str | None = None) -> int:
    """``check-config``: one line per file, ``FILE: valid`` or ``FILE:LINE:COLUMN: problem``; exit 1 on a problem."""
    from .config import ConfigError, check_config_file

    failed = 0
    for f in files:
        try:
            check_config_file(f, base)
        except ConfigError as exc:
            failed += 1
            print(f"invalid configuration: {exc}", file=sys.stderr)
        else:
            print(f"{f}: valid")
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
