"""The two CSV readers (csv module for small files, pandas for large ones) agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedanon.errors import DataError
from fedanon.io import csvread, table
from fedanon.model.spec import load_spec


@pytest.mark.parametrize("name", ["adult.csv.gz", "plain"])
def test_small_and_large_readers_agree(
    adult_dir: Path, adult_csv: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = adult_dir / name if name.endswith(".gz") else adult_csv
    spec, reader = load_spec(adult_dir / "run.toml")
    schema = table.build_schema(spec, reader)
    monkeypatch.setattr(csvread, "SMALL_INPUT_BYTES", 1 << 40)
    small = table.encode_table(schema, path)
    monkeypatch.setattr(csvread, "SMALL_INPUT_BYTES", 0)
    large = table.encode_table(schema, path)
    assert np.array_equal(small.qid_leaves, large.qid_leaves)
    assert np.array_equal(small.cls, large.cls) and np.array_equal(small.sens, large.sens)
    for k in small.kept:
        assert small.kept[k].tolist() == large.kept[k].tolist()


@pytest.mark.parametrize("threshold", [1 << 40, 0])
def test_ragged_rows_are_errors_in_both_readers(
    tmp_path: Path, threshold: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(csvread, "SMALL_INPUT_BYTES", threshold)
    f = tmp_path / "t.csv"
    f.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(DataError, match="field"):
        table.read_columns(f)
    f.write_text("a,b\n1,2\n3\n")
    with pytest.raises(DataError, match="field"):
        table.read_columns(f)
    f.write_text("a,b\n x , y\nx,y\n")
    header, cols = table.read_columns(f)
    assert header == ["a", "b"] and cols["a"].values == ("x",) and list(cols["a"].codes) == [0, 0]
