"""Atomic writes leave no partial file; a corrupt intermediate fails with the file's name."""

import pandas as pd
import pytest

from icmlrepro.core.io import CorruptIntermediateError, atomic_path, read_json, read_parquet, write_parquet


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


def test_garbled_json_names_the_file(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text('{"contract": 1, "pap')
    with pytest.raises(CorruptIntermediateError, match="metrics.json"):
        read_json(path)
