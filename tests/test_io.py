"""Atomic writes leave no partial file (and clean up after a killed writer); a corrupt intermediate
fails with the file's name and the one command that rebuilds it."""

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from icmlrepro.core.io import (CorruptIntermediateError, atomic_path, read_json, read_parquet,
                               rebuild_command, write_parquet)


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.parquet"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_truncated_parquet_names_the_file(tmp_path):
    path = tmp_path / "predictions.parquet"
    write_parquet(path, pd.DataFrame({"a": range(1000), "b": [0.5] * 1000}))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptIntermediateError, match="predictions.parquet") as exc:
        read_parquet(path)
    assert "rerun" in str(exc.value)


def test_parquet_column_subset_reads_only_those_columns_and_still_names_a_missing_column(tmp_path):
    path = tmp_path / "events.parquet"
    write_parquet(path, pd.DataFrame({"sample": [0, 0, 1], "x": [1, 2, 3], "t": [0.1, 0.2, 0.3]}))
    sub = read_parquet(path, columns=["x", "t"])
    assert list(sub.columns) == ["x", "t"] and sub["x"].tolist() == [1, 2, 3]
    with pytest.raises(CorruptIntermediateError, match="events.parquet"):
        read_parquet(path, columns=["y"])


@pytest.mark.parametrize("fmt", ["parquet", "json", "npz", "torch", "pickle", "png"])
def test_truncated_file_of_each_format_names_the_file_and_its_rebuild_command(tmp_path, fmt):
    """One reader per format (issue 43 item 2): a truncated file fails with its name and the command,
    never a bare ``zipfile.BadZipFile`` or pickle error."""
    import numpy as np
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from icmlrepro.core import io

    path = tmp_path / f"intermediate.{fmt}"
    write, read = {
        "parquet": (lambda p: io.write_parquet(p, pd.DataFrame({"a": range(2000)})), io.read_parquet),
        "json": (lambda p: io.write_json(p, {"a": list(range(200))}), io.read_json),
        "npz": (lambda p: io.write_npz(p, {"x": np.arange(5000.0)}), io.read_npz),
        "torch": (lambda p: io.write_torch(p, {"w": torch.arange(5000.0)}), io.read_torch),
        "pickle": (lambda p: io.write_pickle(p, {"w": list(range(5000))}), io.read_pickle),
        "png": (lambda p: (plt.plot([0, 1]), plt.savefig(p), plt.close()), io.read_png),
    }[fmt]
    write(path)
    read(path)  # whole: reads
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptIntermediateError) as exc:
        read(path)
    assert str(path) in str(exc.value) and rebuild_command(path) in str(exc.value)


def test_garbled_json_names_the_file(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text('{"contract": 1, "pap')
    with pytest.raises(CorruptIntermediateError, match="metrics.json"):
        read_json(path)


def test_every_recovery_hint_is_the_same_command(tmp_path, monkeypatch):
    """Missing, truncated and garbled intermediates all print the one command (it used to be three
    different pieces of advice), relative to the checkout the user runs from."""
    monkeypatch.chdir(tmp_path)
    rel = "results/smoke/lec/train/gnb/seed0/predictions.parquet"
    assert rebuild_command(tmp_path / rel) == f".venv/bin/snakemake --cores 2 --force {rel}"
    assert rebuild_command("a b.json").endswith("--force 'a b.json'")
    (tmp_path / "p.parquet").write_bytes(b"PAR1 garbage")
    (tmp_path / "m.json").write_text("{")
    for read, name in ((read_parquet, "missing.parquet"), (read_parquet, "p.parquet"), (read_json, "m.json")):
        with pytest.raises((CorruptIntermediateError, FileNotFoundError)) as exc:
            read(name)
        assert f"rebuild it with `{rebuild_command(name)}`" in str(exc.value)


WRITER = """
import sys
from icmlrepro.core.io import atomic_path
with atomic_path(sys.argv[1]) as tmp, open(tmp, "wb") as fh:
    chunk = b"x" * (1 << 20)
    for i in range(4096):  # 4 GiB: it is killed long before
        fh.write(chunk)
        fh.flush()
"""


def test_writer_killed_mid_write_leaves_only_a_temporary_file_that_the_next_write_removes(tmp_path):
    """A large write killed half-way: the target never appears, the partial temporary file is left
    behind (SIGKILL runs no clean-up), and the next write of the target deletes it."""
    target = tmp_path / "big.parquet"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)])
    try:
        deadline = time.time() + 60
        while not any(p.stat().st_size > (32 << 20) for p in tmp_path.glob(".big.parquet.*.part")):
            assert time.time() < deadline and proc.poll() is None, "the writer never got going"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    partial = list(tmp_path.glob(".big.parquet.*.part"))
    assert len(partial) == 1 and not target.exists()
    other = tmp_path / ".big.parquet.x.abcdefgh.part"  # another file's leftover is not touched
    other.write_text("")
    df = pd.DataFrame({"a": range(10)})
    write_parquet(target, df)
    pd.testing.assert_frame_equal(read_parquet(target), df)
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name, "big.parquet"]
