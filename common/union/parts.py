"""A large sketch union summed in parts: the leader peels one part while the next is summed.

A union of many distinct records is split by a keyed hash of each record into ``parts``
sketches, each a sum of its own (:class:`~fedanon.union.params.Split`): the leader peels
and decodes part ``j`` while the parties sketch and stream part ``j + 1``, instead of
every party idling while the leader peels one big table.

* The part of a record is the fourth word of its keyed hash (:meth:`RecordHash.with_spare
  <fedanon.union.keyed.RecordHash.with_spare>`) under the split's key -- a function of the
  record's bytes only, so every copy of a record, at every party, falls in the same part,
  and the parts are as balanced as a uniform hash makes them.  The first attempt of every
  part sketches with the split key itself: a party hashes its records once
  (:class:`PartSketcher`) and each part is a scatter of its share.  A part that does not
  peel is summed again alone with a fresh key and a grown table.
* Each part's tables keep the whole class's record count as their ``records`` (a bound:
  a party's records of the class always fit) and are sized for the distinct records a
  part gets (:func:`part_distinct`: the mean plus a binomial margin).  The leader checks
  the parts' records per class add up to the length histogram.
* What the leader learns is unchanged: every part's sum is the sketch of the union's
  records in that part, a function of the union's multiset and the split key; the parts
  together peel to the same multiset.  The split's key, part and number of parts are in
  the parameters' digest, so parties given different splits never have their masks or
  vectors added up (as for a layout or a key).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from fedanon.arrays import IntArray, U64Array
from fedanon.union.iblt import add_cells, by_table, cell_values
from fedanon.union.keyed import RecordHash
from fedanon.union.layout import DEFAULT_FACTOR, Layout, Table, cells_for
from fedanon.union.params import MAX_PARTS, SketchParams, Split
from fedanon.union.records import RecordSet

__all__ = [
    "PART_RECORDS",
    "PartSketcher",
    "part_distinct",
    "part_of",
    "parts_for",
    "split_layout",
]

PART_RECORDS = 1 << 18
"""Distinct records per part the leader aims at; a union of fewer than two parts' worth is
summed in one sketch."""


def parts_for(distinct: int) -> int:
    """Parts to sum a union of at most ``distinct`` distinct records in (1: no split)."""
    if distinct < 2 * PART_RECORDS:
        return 1
    return min(MAX_PARTS, -(-distinct // PART_RECORDS))


def part_distinct(distinct: int, parts: int) -> int:
    """Distinct records to size one part's tables for: the mean share of ``distinct`` plus
    five binomial standard deviations (a larger part fails to peel and is summed again)."""
    mean = distinct / parts
    return math.ceil(mean + 5 * math.sqrt(mean * (1 - 1 / parts))) + 1


def part_of(spare: U64Array, parts: int) -> IntArray:
    """The part of every record from its spare 32-bit hash word (multiply-shift)."""
    return ((spare * np.uint64(parts)) >> np.uint64(32)).astype(np.int64)


@dataclass(frozen=True, eq=False)
class _Hashed:
    """One table's distinct records hashed under the split key, sorted by part: part ``j``
    is rows ``bounds[j]:bounds[j + 1]``."""

    which: IntArray  # record indexes
    count: U64Array  # multiplicities
    values: U64Array  # cell rows to add (count, checksum sum, word sums)
    index: U64Array  # (3, k) index words
    bounds: IntArray


class PartSketcher:
    """A party's sketches of the parts of a split union: its records hashed once per split
    key and table shape, every part a scatter of its share (a retry with another key hashes
    that part's records again)."""

    def __init__(self, records: RecordSet) -> None:
        self.records = records
        self._lock = threading.Lock()
        self._split_key = b""
        self._hashed: dict[tuple[int, int, int, int], _Hashed] = {}

    def sketch(self, params: SketchParams) -> U64Array:
        """This party's sketch of part ``params.split.part``: ``params.layout.size`` uint64."""
        split = params.split
        if split is None:
            raise ValueError("not the parameters of a split union")
        layout = params.layout
        out = np.zeros(layout.size, dtype=np.uint64)
        shares = by_table(self.records, layout)
        again = None if params.key == split.key else RecordHash(params.key)
        for table, offset, share in zip(layout.tables, layout.offsets(), shares, strict=True):
            block = out[offset : offset + table.size].reshape(3 * table.cells, table.lanes)
            hashed = self._hashed_table(table, split, share)
            lo, hi = int(hashed.bounds[split.part]), int(hashed.bounds[split.part + 1])
            if again is None:
                add_cells(block, table, hashed.values[lo:hi], hashed.index[:, lo:hi])
                continue
            which, count = hashed.which[lo:hi], hashed.count[lo:hi]
            for values, index, _ in cell_values(self.records, which, count, table, again):
                add_cells(block, table, values, index)
        return out

    def _hashed_table(
        self, table: Table, split: Split, share: tuple[IntArray, U64Array]
    ) -> _Hashed:
        name = (split.parts, table.size_class, table.lane_bytes, table.width)
        with self._lock:
            if split.key != self._split_key:  # a new split: the old one's hashes go
                self._split_key, self._hashed = split.key, {}
            got = self._hashed.get(name)
            if got is None:
                got = self._hashed[name] = _hash_share(self.records, table, split, share)
            return got


def _hash_share(
    records: RecordSet, table: Table, split: Split, share: tuple[IntArray, U64Array]
) -> _Hashed:
    which, count = share
    hasher = RecordHash(split.key)
    chunks = list(cell_values(records, which, count, table, hasher))
    if chunks:
        values = np.concatenate([c[0] for c in chunks])
        index = np.concatenate([c[1] for c in chunks], axis=1)
        spare = np.concatenate([c[2] for c in chunks])
    else:
        values = np.zeros((0, table.lanes), dtype=np.uint64)
        index = np.zeros((3, 0), dtype=np.uint64)
        spare = np.zeros(0, dtype=np.uint64)
    part = part_of(spare, split.parts)
    order = np.argsort(part, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(part, minlength=split.parts))))
    return _Hashed(which[order], count[order], values[order], index[:, order], bounds)


def split_layout(layout: Layout, distinct: int, parts: int) -> Layout:
    """``layout`` (planned for every record) with every table's cells for one part's share
    of its distinct records (at most the class's records and ``distinct``; see
    :func:`part_distinct`); the record counts stay the class's."""
    tables = []
    for t in layout.tables:
        most = min(t.records, distinct)
        cells = cells_for(min(most, part_distinct(most, parts)), DEFAULT_FACTOR)
        tables.append(
            Table(
                t.size_class,
                t.records,
                t.lane_bytes,
                t.width,
                min(t.cells, cells),
                t.multiplicity,
            )
        )
    return Layout(layout.n_fields, tuple(tables))
