"""The CSV writer assembles chunks in threads (fedanon.io.tablewrite.WRITER_THREADS): the bytes
are still exactly what the csv module writes, row for row and in order, for tables of one
chunk, several chunks and a partial last chunk."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from fedanon.io import tablewrite
from fedanon.io.columns import Column

VALUES = ("plain", "with,comma", 'a "quote"', "", "line\nbreak", "ünï")


@pytest.mark.parametrize("rows", [0, 1, tablewrite.CHUNK_ROWS, 3 * tablewrite.CHUNK_ROWS + 17])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threaded_csv_is_the_csv_modules_bytes(
    rows: int, threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tablewrite, "WRITER_THREADS", threads)
    rng = np.random.default_rng(rows + threads)
    names = ["a", "b", "c"]
    cols = [
        Column(VALUES, rng.integers(0, len(VALUES), rows).astype(np.uint8)),
        Column(tuple(str(i) for i in range(1000)), rng.integers(0, 1000, rows).astype(np.int32)),
        Column(("x", "y"), np.arange(rows, dtype=np.int64) % 2),
    ]
    got = io.BytesIO()
    tablewrite.write_csv(got, names, cols)
    want = io.StringIO()
    w = csv.writer(want, lineterminator="\n")
    w.writerow(names)
    w.writerows(zip(*(c.tolist() for c in cols), strict=True))
    assert got.getvalue() == want.getvalue().encode("utf-8")
