"""The shape of the union sketch: one IBLT table per non-empty record length class.

The leader fixes the layout from the summed length histogram (see
:meth:`~fedanon.union.records.RecordSet.histogram`) and sends it with a fresh key to every
party; :attr:`Layout.digest` names it in the messages so that only vectors of the same
layout are ever added.  A table for ``N`` records of a class whose records have at most
``B`` bytes has

* ``L`` bytes per 64-bit lane, the largest with ``M * 2^(8L) <= 2^64`` for ``M`` the most
  copies of one record the union can hold (7 for M <= 256, 6 for M <= 65,536, 5 for M <=
  16.7 M, 4 up to 2^32; ``M <= N``, and the leader bounds it by ``N - D + n`` from the
  parties' distinct counts), so a pure cell's sums are exactly ``count * word``.  Sums of
  cells holding several records may wrap: the sketch is exact mod 2^64 anyway, and peeling
  reads only pure cells;
* ``W = ceil(B / L)`` word lanes, plus a count lane and a checksum lane;
* three disjoint sub-tables of ``m`` cells, ``3 m`` about ``factor * N`` for large tables
  and relatively more for small ones (see :func:`cells_for`).

The flat vector is table after table, each cell after cell (``(3 m, W + 2)`` uint64,
row-major): a cell is its count, its checksum sum and its W word sums, so the random cell
accesses of sketching and peeling touch a few adjacent cache lines, not W + 2 of them.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from fedanon.arrays import IntArray
from fedanon.union.records import CLASS_BOUNDS

__all__ = ["DEFAULT_FACTOR", "Layout", "Table", "cells_for", "lane_bytes", "plan"]

DEFAULT_FACTOR = 1.23
"""Cells per record (3 m / N) of a large table; k = 3 peeling needs > 1.222 as N grows."""
MAX_RECORDS = 1 << 32


def lane_bytes(n_records: int) -> int:
    """Record bytes per 64-bit lane so that the sum of ``n_records`` lanes never wraps."""
    for size in (7, 6, 5, 4):
        if n_records <= 1 << (64 - 8 * size):
            return size
    raise ValueError(f"{n_records} records is more than a union sketch holds (2^32)")


def cells_for(n_records: int, factor: float) -> int:
    """Cells per sub-table for ``n_records`` distinct records or fewer.

    ``(factor * N + 3 sqrt(N)) / 3`` keeps large tables above the k = 3 peeling threshold
    (1.222 N cells) with a finite-size margin; ``8 N^(2/3)`` bounds the chance that two
    records share all three cells (about N^2 / 2 m^3, the main failure of small tables).
    Failure rate of one table about 0.1-0.3 % for every N (bench_iblt.py --simulate)."""
    if n_records <= 0:
        return 0
    large = (factor * n_records + 3 * math.sqrt(n_records)) / 3
    small = 8 * math.pow(n_records, 2 / 3)
    return math.ceil(max(large, small)) + 2


@dataclass(frozen=True)
class Table:
    """One IBLT table: ``records`` records of length class ``size_class``."""

    size_class: int
    records: int
    lane_bytes: int
    width: int  # word lanes W
    cells: int  # cells per sub-table m
    multiplicity: int = 0  # copies of one record the table can hold at most (0: records)

    def __post_init__(self) -> None:
        if self.multiplicity == 0:
            object.__setattr__(self, "multiplicity", self.records)
        if not 0 <= self.size_class < CLASS_BOUNDS.size:
            raise ValueError(f"no length class {self.size_class}")
        if not 0 < self.records <= MAX_RECORDS or not 4 <= self.lane_bytes <= 7:
            raise ValueError("a table needs 1..2^32 records and 4..7 bytes per lane")
        if not 0 < self.multiplicity <= self.records:
            raise ValueError("a record's multiplicity is 1..records")
        if self.multiplicity > 1 << (64 - 8 * self.lane_bytes):
            raise ValueError("a pure cell of this table could wrap")
        if self.width * self.lane_bytes < int(CLASS_BOUNDS[self.size_class]):
            raise ValueError("the table is too narrow for its length class")
        if not 0 < self.cells < 1 << 32:
            raise ValueError(f"a sub-table needs 1..2^32 - 1 cells, not {self.cells}")

    @property
    def row_bytes(self) -> int:
        return self.width * self.lane_bytes

    @property
    def lanes(self) -> int:
        return self.width + 2

    @property
    def size(self) -> int:
        """uint64 elements of this table in the vector."""
        return self.lanes * 3 * self.cells


@dataclass(frozen=True)
class Layout:
    """Every table of one union sketch, and the number of released fields per record."""

    n_fields: int
    tables: tuple[Table, ...]

    def __post_init__(self) -> None:
        if self.n_fields < 0:
            raise ValueError("negative field count")
        classes = [t.size_class for t in self.tables]
        if classes != sorted(set(classes)):
            raise ValueError("tables must have distinct, ascending length classes")

    @property
    def n_records(self) -> int:
        return sum(t.records for t in self.tables)

    @property
    def size(self) -> int:
        """Length of the uint64 vector."""
        return sum(t.size for t in self.tables)

    @property
    def nbytes(self) -> int:
        return 8 * self.size

    def offsets(self) -> list[int]:
        out, pos = [], 0
        for t in self.tables:
            out.append(pos)
            pos += t.size
        return out

    @property
    def digest(self) -> bytes:
        """SHA-256 naming this layout (the key is not part of it)."""
        h = hashlib.sha256(b"fedanon-iblt-layout-v3\0")
        h.update(f"{self.n_fields}".encode())
        for t in self.tables:
            h.update(f";{t.size_class},{t.records},{t.lane_bytes},{t.width},{t.cells}".encode())
            h.update(f",{t.multiplicity}".encode())
        return h.digest()

    def grown(self, by: float = 1.25) -> Layout:
        """The same tables with ``by`` times the cells: the layout for a retry."""
        if by < 1:
            raise ValueError("a retry layout must not shrink")
        tables = tuple(
            Table(
                t.size_class,
                t.records,
                t.lane_bytes,
                t.width,
                math.ceil(t.cells * by),
                t.multiplicity,
            )
            for t in self.tables
        )
        return Layout(self.n_fields, tables)


def plan(
    histogram: IntArray,
    n_fields: int,
    factor: float = DEFAULT_FACTOR,
    distinct: int | None = None,
    multiplicity: int | None = None,
) -> Layout:
    """The layout for the summed length histogram (records per class of every party).

    ``distinct``: size every table for at most that many *distinct* records (identical
    records share their cells) instead of all its records -- an upper bound from the
    parties' distinct counts, or a guess for a first, small attempt that fails to peel
    (and is retried larger) when the records are more varied than that.
    ``multiplicity``: no record occurs more often than this in the union (a bound, never a
    guess: a pure cell beyond it would wrap), so the lanes can be wider."""
    hist = np.asarray(histogram)
    if hist.shape != CLASS_BOUNDS.shape:
        raise ValueError(f"a length histogram has {CLASS_BOUNDS.size} classes, not {hist.shape}")
    if (hist < 0).any() or int(hist.sum()) > MAX_RECORDS:
        raise ValueError("the length histogram is not a valid count vector")
    if factor < 1:
        raise ValueError("the cell factor must be at least 1")
    if multiplicity is not None and multiplicity < 1:
        raise ValueError("a multiplicity bound is at least 1")
    tables = []
    for k in np.flatnonzero(hist):
        n = int(hist[k])
        most = n if multiplicity is None else min(n, multiplicity)
        size = lane_bytes(most)
        width = -(-int(CLASS_BOUNDS[k]) // size)
        cells = cells_for(n if distinct is None else min(n, max(distinct, 1)), factor)
        tables.append(Table(int(k), n, size, width, cells, most))
    return Layout(n_fields, tuple(tables))
