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


def claims_dir() -> Path:
    return repo_root() / "resources" / "claims"


def schema_dir() -> Path:
    return repo_root() / "config" / "schema"
