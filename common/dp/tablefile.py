"""The DP release as a file in the format its name says: CSV, gzip CSV (``.gz``) or Parquet
(``.parquet`` / ``.pq``) -- the formats and the writers of an LKC release
(:mod:`fedanon.io.tablewrite`).

The columns are coded once per group x class value (labels + small integer codes, never a
Python string per row), so ``--expand`` costs a few bytes per written row.  CSV: the bytes
the csv module writes; a run with a fixed seed starts with its ``# NOT PRIVATE`` comment
line.  Parquet: predictors and class dictionary-encoded strings, ``count`` int64; the
``# NOT PRIVATE`` text is the file's key-value metadata ``fedanon.warning`` instead.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fedanon.arrays import IntArray
from fedanon.io.columns import Column, smallest_uint, use_system_allocator
from fedanon.io.fsutil import Pending
from fedanon.io.tablewrite import ROW_GROUP_ROWS, is_parquet_name, write_csv

if TYPE_CHECKING:
    from pathlib import Path

    from fedanon.dp.run import DPRun

WARNING_KEY = b"fedanon.warning"


def coded_columns(
    result: DPRun, cols: Sequence[str], count: str | None, expand: bool
) -> dict[str, Column]:
    """The released columns named in ``cols`` (``count`` among them unless expanded), one
    row per group x class value, or with ``expand`` one row per counted record."""
    spec, dec = result.spec, result.decider
    counts = result.counts.counts
    n_groups, n_class = counts.shape
    flat = counts.reshape(-1)
    out: dict[str, Column] = {}
    for a, tree in enumerate(dec.state.trees):
        if tree.name in cols:
            nodes = np.asarray(result.counts.nodes[:, a], dtype=np.int64)
            labels, codes = _compact(nodes, len(tree))
            values = [tree.labels[i] for i in labels.tolist()]
            out[tree.name] = Column(values, np.repeat(codes, n_class))
    cls = np.arange(n_class).astype(smallest_uint(n_class))
    out[spec.class_name] = Column(spec.class_values, np.tile(cls, n_groups))
    if expand:
        return {c: Column(out[c].values, np.repeat(out[c].codes, flat)) for c in cols}
    if count is not None:
        out[count] = _count_column(flat)
    return {c: out[c] for c in cols}


def _compact(ids: IntArray, size: int) -> tuple[IntArray, Any]:
    """(the distinct ids, ascending; each id's index among them, smallest dtype)."""
    present = np.flatnonzero(np.bincount(ids, minlength=size))
    remap = np.zeros(size, dtype=np.int64)
    remap[present] = np.arange(present.size)
    return present, remap[ids].astype(smallest_uint(max(present.size - 1, 0)))


def _count_column(flat: IntArray) -> Column:
    if flat.size and int(flat.max()) <= 4 * flat.size:  # the usual case: no sort
        values, codes = _compact(flat, int(flat.max()) + 1)
    else:
        values, inverse = np.unique(flat, return_inverse=True)
        codes = inverse.reshape(-1).astype(smallest_uint(max(values.size - 1, 0)))
    return Column([str(v) for v in values.tolist()], codes)


def release_pending(
    path: Path, cols: list[str], coded: dict[str, Column], count: str, note: str | None
) -> Pending:
    """The table as a pending atomic write (see :func:`fedanon.io.fsutil.atomic_write_all`);
    ``note``: the warning of a run that is not private."""
    columns = [coded[c] for c in cols]
    if is_parquet_name(path):
        return Pending(path, lambda fh: _parquet(fh, cols, columns, count, note), binary=True)
    head = b"" if note is None else f"# {note}\n".encode()

    def plain(fh: Any) -> None:
        fh.write(head)
        write_csv(fh, cols, columns)

    if not path.name.lower().endswith(".gz"):
        return Pending(path, plain, binary=True)

    def gz(fh: Any) -> None:
        with gzip.GzipFile(filename="", fileobj=fh, mode="wb", mtime=0, compresslevel=6) as z:
            plain(z)

    return Pending(path, gz, binary=True)


def _parquet(fh: Any, cols: list[str], coded: list[Column], count: str, note: str | None) -> None:
    """Like :func:`fedanon.io.tablewrite.write_parquet` (zstd, one row group at a time), with
    an integer count column and the warning as metadata."""
    use_system_allocator()
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(coded[0]) if coded else 0
    values = [
        np.array([int(x) for x in c.values], dtype=np.int64) if name == count else c.arrow_values()
        for name, c in zip(cols, coded, strict=True)
    ]

    def rows(lo: int, hi: int) -> Any:
        arrays = []
        for name, c, v in zip(cols, coded, values, strict=True):
            if name == count:
                arrays.append(pa.array(v[c.codes[lo:hi]]))
            else:
                arrays.append(pa.DictionaryArray.from_arrays(pa.array(c.codes[lo:hi]), v))
        table = pa.table(dict(zip(cols, arrays, strict=True)))
        if note is not None:
            table = table.replace_schema_metadata({WARNING_KEY: note.encode()})
        return table

    first = rows(0, min(n, ROW_GROUP_ROWS))
    with pq.ParquetWriter(fh, first.schema, compression="zstd") as w:
        w.write_table(first)
        for lo in range(ROW_GROUP_ROWS, n, ROW_GROUP_ROWS):
            w.write_table(rows(lo, min(n, lo + ROW_GROUP_ROWS)))
