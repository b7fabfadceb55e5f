"""Reading and writing intermediates so that a half-written file is never taken as done.

Every writer goes through :func:`atomic_path`: the data lands in a temporary file in the
same directory and is renamed into place only once complete, so a killed job leaves no file
under the final name. Every reader names the file it failed on, so a corrupt intermediate is
traced to the rule that wrote it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pandas as pd


class CorruptIntermediateError(RuntimeError):
    """An intermediate file exists but cannot be read; rerun the rule that writes it."""


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success only."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary directory next to ``path``; it replaces ``path`` only on success."""
    import shutil

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _nan_to_none(obj: Any) -> Any:
    """JSON has no NaN; store it as null so that every JSON reader can load the file."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: _nan_to_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_nan_to_none(v) for v in obj]
    return obj


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write canonical JSON (sorted keys, fixed indentation) atomically: identical data, identical bytes."""
    text = json.dumps(_nan_to_none(json.loads(json.dumps(obj, default=_json_default))),
                      sort_keys=True, indent=1, allow_nan=False)
    with atomic_path(path) as tmp:
        tmp.write_text(text + "\n")


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise CorruptIntermediateError(
            f"{path}: cannot be read as JSON ({exc}); delete it and rerun the rule that writes it"
        ) from exc


def write_parquet(path: str | os.PathLike, df: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def read_parquet(path: str | os.PathLike) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing intermediate")
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for truncated/garbled files
        raise CorruptIntermediateError(
            f"{path}: cannot be read as parquet ({type(exc).__name__}: {exc}); "
            "the file is corrupt or truncated: rerun the rule that writes it "
            "(snakemake --forcerun <rule>)"
        ) from exc
