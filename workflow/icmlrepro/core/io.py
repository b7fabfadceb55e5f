"""Reading and writing intermediates so that a half-written file is never taken as done.

Every writer goes through :func:`atomic_path`: the data lands in a temporary file in the
same directory (``.<name>.<random>.part``) and is renamed into place only once complete, so a
killed job leaves no file under the final name; the next write of that file, and the next run of
the job, delete such leftovers. Every reader names the file it failed on and prints the one
command that rebuilds it (:func:`rebuild_command`), so a corrupt intermediate is traced to the
rule that wrote it and fixed the same way everywhere.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pandas as pd


SNAKEMAKE = ".venv/bin/snakemake"


class CorruptIntermediateError(RuntimeError):
    """An intermediate file exists but cannot be read; the message says how to rebuild it."""


def rebuild_command(path: str | os.PathLike) -> str:
    """The exact command, run from the checkout, that rebuilds ``path`` and nothing else.

    Every recovery hint of the pipeline prints this command, so the advice is the same wherever
    a file turns out missing or corrupt. The file's path carries its scale and paper, so no
    ``--config`` is needed; the user's own command, run again afterwards, then redoes the failed
    job and whatever else reads the rebuilt file (it is newer than their outputs).
    """
    path = Path(path)
    if path.is_absolute():
        with contextlib.suppress(ValueError):
            path = path.relative_to(Path.cwd())
    return f"{SNAKEMAKE} --cores 2 --force {shlex.quote(str(path))}"


def rebuild_hint(path: str | os.PathLike) -> str:
    return f"rebuild it with `{rebuild_command(path)}`, then rerun your command"


def _partials(path: Path) -> list[Path]:
    """Temporary files/directories that a writer of ``path`` left behind (named by ``mkstemp``)."""
    pattern = re.compile(re.escape(f".{path.name}.") + r"[a-z0-9_]{8}\.part")
    try:
        return [p for p in path.parent.iterdir() if pattern.fullmatch(p.name)]
    except FileNotFoundError:
        return []


def remove_partials(path: str | os.PathLike) -> list[Path]:
    """Delete the temporary leftovers of a killed writer of ``path``; return what was deleted.

    Only one job writes a given output (Snakemake's lock and DAG guarantee it), so a leftover
    next to it can only come from an earlier, interrupted attempt.
    """
    stale = _partials(Path(path))
    for p in stale:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    return stale


def _fault_write(path: Path) -> None:
    """Test hook: ``ICMLREPRO_FAULT_WRITE=<file name>:<seconds>`` stalls the write of that file after the
    data is in the temporary file and before the rename, the moment a kill leaves a partial file.

    Used by the test that kills a stage mid-write; inert unless set.
    """
    name, _, seconds = os.environ.get("ICMLREPRO_FAULT_WRITE", "").partition(":")
    if name and name == path.name:
        time.sleep(float(seconds or 60))


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success only."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_partials(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        _fault_write(path)
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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_partials(path)
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
            f"{path}: cannot be read as JSON ({exc}); {rebuild_hint(path)}"
        ) from exc


def write_parquet(path: str | os.PathLike, df: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def _read(path: str | os.PathLike, kind: str, load):
    """``load(path)``, naming the file and its rebuild command when it is missing or cannot be read as
    ``kind`` (readers of truncated files raise many exception types: zipfile, pickle, pyarrow, EOF)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing intermediate; {rebuild_hint(path)}")
    try:
        return load(path)
    except Exception as exc:
        raise CorruptIntermediateError(
            f"{path}: cannot be read as {kind} ({type(exc).__name__}: {exc}); "
            f"the file is corrupt or truncated; {rebuild_hint(path)}"
        ) from exc


def read_parquet(path: str | os.PathLike, columns: list[str] | None = None) -> pd.DataFrame:
    """The table, or only ``columns`` of it (a column store reads nothing else: the big event tables)."""
    return _read(path, "parquet", lambda p: pd.read_parquet(p, columns=columns))


def write_npz(path: str | os.PathLike, arrays: dict, compress: bool = True) -> None:
    """Named numpy arrays as one ``.npz``, written atomically."""
    import numpy as np

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            (np.savez_compressed if compress else np.savez)(fh, **arrays)


def read_npz(path: str | os.PathLike) -> dict:
    """Every array of an ``.npz`` (loaded, so the file is closed); a corrupt file names its rebuild command."""
    import numpy as np

    def load(p: Path) -> dict:
        with np.load(p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    return _read(path, "npz", load)


def write_torch(path: str | os.PathLike, obj: Any) -> None:
    """A checkpoint (state dicts, tensors, plain data) with ``torch.save``, written atomically."""
    import torch

    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def read_torch(path: str | os.PathLike, weights_only: bool = False) -> Any:
    """A checkpoint written by :func:`write_torch` (only this pipeline's own files, hence ``weights_only``
    False by default: they hold plain Python data beside tensors); a corrupt file names its rebuild command."""
    import torch

    return _read(path, "a torch checkpoint", lambda p: torch.load(p, weights_only=weights_only))


def write_pickle(path: str | os.PathLike, obj: Any) -> None:
    """Plain Python objects (fitted encoders beside state dicts) with ``pickle``, written atomically."""
    import pickle

    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        pickle.dump(obj, fh)


def read_pickle(path: str | os.PathLike) -> Any:
    """A file written by :func:`write_pickle` (only this pipeline's own files); a corrupt file names its
    rebuild command."""
    import pickle

    def load(p: Path) -> Any:
        with open(p, "rb") as fh:
            return pickle.load(fh)

    return _read(path, "pickle", load)


def read_png(path: str | os.PathLike):
    """A PNG figure as an RGB(A) array, for checks that read figures back."""
    from PIL import Image
    import numpy as np

    def load(p: Path):
        with Image.open(p) as im:
            im.load()
            return np.asarray(im)

    return _read(path, "PNG", load)


def write_npy(path: str | os.PathLike, array) -> None:
    """One numpy array as ``.npy``, written atomically."""
    import numpy as np

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, array)


def read_npy(path: str | os.PathLike):
    import numpy as np

    return _read(path, "npy", lambda p: np.load(p, allow_pickle=False))


def write_tokenizer(path: str | os.PathLike, tokenizer) -> None:
    """A ``tokenizers.Tokenizer`` as its JSON file, written atomically."""
    with atomic_path(path) as tmp:
        tokenizer.save(str(tmp))


def read_tokenizer(path: str | os.PathLike):
    from tokenizers import Tokenizer

    return _read(path, "a tokenizer", lambda p: Tokenizer.from_file(str(p)))


class YamlFileError(ValueError):
    """A YAML file (config, claims) that cannot be parsed, with its ``FILE:LINE:COLUMN``."""


def _unique_key_loader():
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        """SafeLoader that refuses a key given twice in one mapping (YAML keeps the last one silently)."""

        def construct_mapping(self, node, deep=False):
            self.flatten_mapping(node)
            seen: dict = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (first given on line {seen[key]})", key_node.start_mark)
                seen[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


def parse_yaml(text: str, source: str) -> Any:
    """YAML text as data; a syntax error or a duplicate key names ``source:LINE:COLUMN``."""
    import yaml

    try:
        return yaml.load(text, Loader=_unique_key_loader())  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        context = f" ({exc.context})" if exc.context else ""
        raise YamlFileError(f"{where}: not valid YAML: {exc.problem}{context}") from None
    except yaml.YAMLError as exc:
        raise YamlFileError(f"{source}: not valid YAML: {exc}") from None


def read_yaml(path: str | os.PathLike) -> Any:
    return parse_yaml(Path(path).read_text(), str(path))
