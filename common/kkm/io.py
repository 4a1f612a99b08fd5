"""Reading an RT-dataset (demographics + one set-valued column) and writing a release.

The table is read by :mod:`fedanon.io` like every other method's: a CSV (optionally gzip),
a Parquet file or a PostgreSQL query, batch by batch, only the declared non-identifier
columns decoded.  The set column goes through :mod:`fedanon.io.setvalued` (a delimited cell,
a Parquet list or a PostgreSQL ``text[]``): every code must be a leaf of the set attribute's
hierarchy; an unknown code, an internal node or an empty code between two separators is an
input error naming the file, the physical line (row for Parquet / PostgreSQL), the column and
the code.  A code listed twice in one record counts once (the number of such repeats is
reported).  An empty cell is a record without codes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from fedanon.arrays import Int32Array, IntArray
from fedanon.errors import DataError
from fedanon.io.batches import Batches, Location
from fedanon.io.columns import Column
from fedanon.io.encoders import (
    KeptEncoder,
    csv_number,
    is_number_type,
    text_of,
    typed_numbers,
)
from fedanon.io.setread import SetColumns
from fedanon.io.setvalued import SetColumnSpec
from fedanon.io.sources import DataSource, open_batches
from fedanon.io.spill import Sink
from fedanon.kkm.hierarchy import Tree
from fedanon.kkm.schema import KkmSchema
from fedanon.kkm.spec import KkmAttribute


@dataclass(frozen=True)
class RTTable:
    source: str
    header: tuple[str, ...]
    qid: tuple[npt.NDArray[Any], ...]  # numeric: float64 values; categorical: int64 leaf codes
    num_range: tuple[tuple[float, float], ...]  # per qid: (lo, hi) used by NCP (numeric only)
    indptr: IntArray  # record i's codes are codes[indptr[i]:indptr[i+1]], sorted, distinct
    codes: Int32Array  # leaf codes of the set hierarchy
    kept: dict[str, Column]  # class / other columns, unchanged (dictionary-encoded)
    locate: Callable[[int], Location]  # where record i is (physical line of a CSV, or row)
    repeated_codes: int

    @property
    def n(self) -> int:
        return int(self.indptr.size - 1)

    def record_of_code(self) -> IntArray:
        """For every entry of ``codes``: the record it belongs to."""
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.indptr))

    def error(self, record: int, message: str, expected: str | None = None) -> DataError:
        where = self.locate(record)
        text = f"{where.row}: {message}" if where.row else message
        return DataError(text, file=self.source, line=where.line, expected=expected)


def set_column_spec(attr: KkmAttribute, items: Tree) -> SetColumnSpec:
    """The set attribute as the shared reader's plain descriptor: the hierarchy's leaves are
    the codes (leaf code i = its i-th leaf); inner nodes are named as such in errors."""
    leaves = tuple(items.leaf_label(i) for i in range(items.n_leaves))
    return SetColumnSpec(
        attr.name,
        leaves,
        attr.separator,
        source=items.source,
        non_items=frozenset(items.node_index).difference(leaves),
        noun="code",
    )


def read_rt(schema: KkmSchema, source: DataSource) -> RTTable:
    spec = schema.spec
    include = [a.name for a in spec.attributes if a.role != "identifier"]
    b = open_batches(source, [a.name for a in spec.attributes], include)
    try:
        return _read(schema, b)
    finally:
        b.close()


def _read(schema: KkmSchema, b: Batches) -> RTTable:
    spec = schema.spec
    nums = {a.name: _Numeric(a) for a in spec.qids if a.type == "numeric"}
    cats = {a.name: _Categorical(a, schema.trees[a.name]) for a in spec.qids if a.type != "numeric"}
    sets = SetColumns([set_column_spec(spec.set_attr, schema.items)])
    kept_attrs = [a.name for a in spec.attributes if a.role in ("class", "other")]
    kept = {name: KeptEncoder(name) for name in kept_attrs}
    for batch in b.batches:
        cols = batch.columns
        for a in spec.qids:
            enc = nums.get(a.name) or cats[a.name]
            enc.add(b, batch.start, cols[a.name])
        sets.add(b, batch)
        for name, kenc in kept.items():
            kenc.add(b, batch.start, cols[name])
    if sets.rows == 0:
        raise DataError("the input has a header but no records", file=b.source)
    qid: list[npt.NDArray[Any]] = []
    ranges: list[tuple[float, float]] = []
    for a in spec.qids:
        if a.type == "numeric":
            vals = nums[a.name].values.finish()
            lo, hi = a.domain if a.domain is not None else (float(vals.min()), float(vals.max()))
            qid.append(vals)
            ranges.append((lo, hi))
        else:
            qid.append(cats[a.name].codes.finish())
            ranges.append((0.0, 0.0))
    codes = sets.finish()[spec.set_attr.name]
    return RTTable(
        b.source,
        tuple(b.header),
        tuple(qid),
        tuple(ranges),
        codes.indptr,
        codes.items.astype(np.int32),
        {name: enc.finish() for name, enc in kept.items()},
        b.locate,
        codes.repeats,
    )


class _Numeric:
    """A numeric QID: a finite number (inside the domain when one is declared)."""

    def __init__(self, a: KkmAttribute) -> None:
        self.a = a
        self.values = Sink(np.float64)

    def add(self, b: Batches, start: int, arr: Any) -> None:
        a = self.a
        if is_number_type(arr):
            from fedanon.io.encoders import check_nulls

            check_nulls(b, start, a.name, arr)
            vals = typed_numbers(arr)  # a float32 or decimal as the number its text says
            texts: list[str] | None = None
            idx = None
        else:
            distinct, idx = text_of(b, start, a.name, arr)
            texts = distinct.to_pylist()
            vals = np.fromiter((_float(t) for t in texts), dtype=np.float64, count=len(texts))
        bad = ~np.isfinite(vals)
        if a.domain is not None:
            bad |= (vals < a.domain[0]) | (vals > a.domain[1])
        if bad.any():
            row = int(np.flatnonzero(bad[idx] if idx is not None else bad)[0])
            v = int(idx[row]) if idx is not None else row
            where = f"a number in [{a.domain[0]:g}, {a.domain[1]:g}]" if a.domain else "a number"
            raise b.error(
                start + row,
                "not a number"
                if not np.isfinite(vals[v])
                else "number outside the declared domain",
                column=a.name,
                value=texts[v] if texts is not None else repr(float(vals[v])),
                expected=where,
            )
        self.values.add(vals[idx] if idx is not None else vals)


def _float(text: str) -> float:
    number = csv_number(text)  # a CSV's number syntax, as the other readers take it
    return float("nan") if number is None else number


class _Categorical:
    """A categorical QID: a leaf of its hierarchy -> int64 leaf code."""

    def __init__(self, a: KkmAttribute, tree: Tree) -> None:
        self.a, self.tree = a, tree
        self.codes = Sink(np.int64)

    def add(self, b: Batches, start: int, arr: Any) -> None:
        distinct, idx = text_of(b, start, self.a.name, arr)
        texts = distinct.to_pylist()
        index = self.tree.index
        codes = np.fromiter((index.get(t, -1) for t in texts), dtype=np.int64, count=len(texts))
        if (codes < 0).any():
            row = int(np.flatnonzero(codes[idx] < 0)[0])
            sample = ", ".join(list(index)[:5])
            raise b.error(
                start + row,
                "value is not a leaf of the attribute's hierarchy",
                column=self.a.name,
                value=texts[int(idx[row])],
                expected=f"a leaf of {self.tree.source} (e.g. {sample})",
            )
        self.codes.add(codes[idx])


def read_text_columns(source: DataSource) -> tuple[list[str], dict[str, list[str]]]:
    """A released table's header and columns as stripped strings (audit, evaluate)."""
    header, cols, _ = _text_columns(source)
    return header, cols


def read_rows(source: DataSource) -> tuple[list[str], list[list[str]], list[int]]:
    """Header, rows (stripped cells) and the physical start line of every row (0 where a
    source has rows, not lines).  Prefer :func:`read_text_columns` (no object per row)."""
    header, cols, locate = _text_columns(source)
    rows = [list(r) for r in zip(*(cols[h] for h in header), strict=True)]
    return header, rows, [locate(i).line or 0 for i in range(len(rows))]


def _text_columns(
    source: DataSource,
) -> tuple[list[str], dict[str, list[str]], Callable[[int], Location]]:
    b = open_batches(source, None, None)
    try:
        kept = {name: KeptEncoder(name) for name in b.header}
        for batch in b.batches:
            for name, enc in kept.items():
                enc.add(b, batch.start, batch.columns[name])
        cols = {name: enc.finish().tolist() for name, enc in kept.items()}
        return b.header, cols, b.locate
    finally:
        b.close()
