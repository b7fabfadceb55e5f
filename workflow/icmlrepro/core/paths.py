"""Where things live in the repository, found from the package location or the working directory."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The repository root: ``$ICMLREPRO_ROOT`` if set, else the checkout this package sits in."""
    env = os.environ.get("ICMLREPRO_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "Snakefile").exists() and (parent / "resources").is_dir():
            return parent
    return Path.cwd()


WORKFLOW_PARTS = ("Snakefile", "workflow", "config", "resources", "report", "profiles", "envs", "slurm")


def copy_workflow(dest: Path, root: Path | None = None) -> Path:
    """Copy the workflow's tracked parts (no results, no rendered reports) into ``dest``.

    Tests and benchmarks run in such a scratch copy, so they never touch the user's results and
    always start from an empty DAG.
    """
    import shutil

    root = root or repo_root()
    dest = Path(dest)
    for part in WORKFLOW_PARTS:
        src = root / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=shutil.ignore_patterns("__pycache__", "*.html"))
        elif src.exists():
            shutil.copy2(src, dest / part)
    return dest


def claims_dir() -> Path:
    return repo_root() / "resources" / "claims"


def schema_dir() -> Path:
    return repo_root() / "config" / "schema"
