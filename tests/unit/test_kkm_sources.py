"""(k,k^m) reads its RT-dataset through fedanon.io like every method: CSV, gzip CSV, Parquet
(list column or delimited text) give the same table and the same release; errors in Parquet
name the row, the column and the code."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedanon.errors import DataError
from fedanon.kkm.artuc import build_problem, run_artuc
from fedanon.kkm.io import RTTable, read_rows, read_rt, read_text_columns
from fedanon.kkm.release import render
from fedanon.kkm.schema import KkmSchema, build_kkm_schema
from fedanon.kkm.spec import load_kkm_spec

FIG1 = Path(__file__).resolve().parent / "kkm_fig1"


@pytest.fixture(scope="module")
def schema() -> KkmSchema:
    spec, reader = load_kkm_spec(FIG1 / "run.toml")
    return build_kkm_schema(spec, reader)


def _columns() -> dict[str, list[str]]:
    with (FIG1 / "figure1a.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    return {h: [r[i] for r in rows[1:]] for i, h in enumerate(rows[0])}


def _parquet(path: Path, as_list: bool, typed_age: bool) -> Path:
    cols: dict[str, Any] = dict(_columns())
    if as_list:
        cols["Disease"] = pa.array([c.split("|") for c in cols["Disease"]], pa.list_(pa.string()))
    if typed_age:
        cols["Age"] = pa.array([int(a) for a in cols["Age"]], pa.int32())
    pq.write_table(pa.table(cols), path)
    return path


def _same(a: RTTable, b: RTTable) -> None:
    assert a.header == b.header and a.num_range == b.num_range and a.n == b.n
    for x, y in zip(a.qid, b.qid, strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.codes, b.codes)
    assert a.codes.dtype == np.int32 and a.repeated_codes == b.repeated_codes
    assert {k: v.tolist() for k, v in a.kept.items()} == {k: v.tolist() for k, v in b.kept.items()}


def test_every_source_gives_the_same_table_and_release(schema: KkmSchema, tmp_path: Path) -> None:
    base = read_rt(schema, FIG1 / "figure1a.csv")
    gz = tmp_path / "fig.csv.gz"
    gz.write_bytes(gzip.compress((FIG1 / "figure1a.csv").read_bytes()))
    sources = [
        gz,
        _parquet(tmp_path / "list.parquet", as_list=True, typed_age=True),
        _parquet(tmp_path / "text.parquet", as_list=False, typed_age=False),
    ]
    want = render(run_artuc(build_problem(schema, base)))
    for src in sources:
        table = read_rt(schema, src)
        _same(base, table)
        rel = render(run_artuc(build_problem(schema, table)))
        assert (rel.columns, rel.data, rel.rows) == (want.columns, want.data, want.rows)


def test_parquet_errors_name_row_column_code(schema: KkmSchema, tmp_path: Path) -> None:
    cols: dict[str, Any] = dict(_columns())
    dx = [c.split("|") for c in cols["Disease"]]
    dx[2] = ["494.1", "493"]  # an inner node of the hierarchy
    cols["Disease"] = pa.array(dx)
    p = tmp_path / "bad.parquet"
    pq.write_table(pa.table(cols), p)
    with pytest.raises(DataError, match="not a leaf") as e:
        read_rt(schema, p)
    assert "row 3" in e.value.message and (e.value.column, e.value.value) == ("Disease", "493")
    cols["Disease"] = pa.array([c.split("|") for c in _columns()["Disease"]])
    cols["Age"] = pa.array([19.0, None] + [20.0] * (len(dx) - 2))
    pq.write_table(pa.table(cols), p)
    with pytest.raises(DataError, match="NULL") as e:
        read_rt(schema, p)
    assert "row 2" in e.value.message and e.value.column == "Age"


def test_release_readers_keep_cells_and_lines(tmp_path: Path) -> None:
    p = tmp_path / "rel.csv"
    p.write_text('a,b\n1, x \n\n"2\n2",y\n3,z\n', encoding="utf-8")
    header, rows, lines = read_rows(p)
    assert header == ["a", "b"] and rows == [["1", "x"], ["2\n2", "y"], ["3", "z"]]
    assert lines == [2, 4, 6]
    assert read_text_columns(p) == (["a", "b"], {"a": ["1", "2\n2", "3"], "b": ["x", "y", "z"]})
