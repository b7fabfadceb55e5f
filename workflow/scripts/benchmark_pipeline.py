"""Time the pipeline: DAG build per scale, the smoke chain of each paper, optionally its default chain.

    .venv/bin/python workflow/scripts/benchmark_pipeline.py [--default]

Runs in a scratch copy of the workflow (your results/ are untouched) and prints one table.
Speed targets live here, not in timed tests.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from icmlrepro.core.paths import copy_workflow

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t0


def scratch() -> Path:
    return copy_workflow(Path(tempfile.mkdtemp(prefix="icmlrepro-bench-")), ROOT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--default", action="store_true", help="also run each paper's default-scale chain")
    args = ap.parse_args()
    papers = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["papers"]
    rows = []
    work = scratch()
    for scale in ("smoke", "default", "paper"):
        rows.append((f"DAG build (snakemake -n), all papers, {scale}",
                     timed([SNAKEMAKE, "-n", "--config", f"scale={scale}"], work)))
    for scale in ("smoke",) + (("default",) if args.default else ()):
        for paper in papers:
            w = scratch()
            rows.append((f"{paper} chain + report, {scale}, 2 cores",
                         timed([SNAKEMAKE, "--cores", "2", "--config", f"scale={scale}", f"papers=[{paper}]"], w)))
            shutil.rmtree(w)
    shutil.rmtree(work)
    width = max(len(r[0]) for r in rows)
    for name, sec in rows:
        print(f"{name:<{width}}  {sec:8.1f} s")


if __name__ == "__main__":
    main()
