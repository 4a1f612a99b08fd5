"""The leader's side: peel the summed sketch and decode the released records.

The result is the multiset of released records as distinct records with multiplicities, in
a canonical order that depends only on the multiset (:mod:`fedanon.union.canon`): group id
ascending, then the length class and the bytes of the records' text encoding.  Which party
held a record cannot be seen in it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fedanon.arrays import IntArray
from fedanon.io.columns import smallest_uint
from fedanon.union.canon import lex_order, text_classes
from fedanon.union.decode import Coded, MalformedRecord, RawField, field_values, read_rows
from fedanon.union.iblt import CorruptSketch, peel_table, vector_of
from fedanon.union.keyed import RecordHash
from fedanon.union.layout import Layout

__all__ = ["PeeledRecords", "Recovery", "peel"]
FIELD_THREADS = 2  # fields decoded at once by Recovery.result


@dataclass(frozen=True, eq=False)
class PeeledRecords:
    """Distinct released records: ``group[i]``, ``columns[f].values[columns[f].codes[i]]``,
    seen ``count[i]`` times."""

    group: IntArray
    columns: tuple[Coded, ...]
    count: IntArray

    def __post_init__(self) -> None:
        n = self.group.shape[0]
        if self.count.shape != (n,) or any(c.codes.shape != (n,) for c in self.columns):
            raise ValueError("peeled record arrays disagree in length")

    @property
    def n_distinct(self) -> int:
        return int(self.group.shape[0])

    @property
    def n_records(self) -> int:
        return int(self.count.sum())

    def expand(self) -> tuple[IntArray, list[list[str]]]:
        """Every record repeated by its multiplicity: (group ids, columns), canonical order."""
        take = np.repeat(np.arange(self.n_distinct), self.count)
        cols = [Coded(c.values, c.codes[take]).strings() for c in self.columns]
        return self.group[take], cols


def peel(
    layout: Layout,
    key: bytes,
    vector: npt.NDArray[np.uint64] | npt.NDArray[np.int64],
    *,
    in_place: bool = False,
    known: Sequence[Sequence[str]] | None = None,
) -> PeeledRecords:
    """Recover the released records from the unmasked sum of all parties' sketches.

    Raises :class:`~fedanon.union.iblt.PeelingFailed` (retry: fresh key, ``layout.grown()``)
    or :class:`~fedanon.union.iblt.CorruptSketch` (abort: the sum is not a sketch of any
    multiset of valid records).  The vector is left unchanged unless ``in_place`` (saves
    a copy of the whole vector; it is then garbage, e.g. the temporary from ``unmask``).
    ``known``: every field's declared values, as the parties encoded with."""
    rec = Recovery(layout.n_fields, known)
    rec.add(layout, key, vector, in_place=in_place)
    return rec.result()


class Recovery:
    """The records of one or more peeled sums (every part of a split union), decoded part
    by part as they come (:meth:`add`) and merged in the canonical order (:meth:`result`)."""

    def __init__(self, n_fields: int, known: Sequence[Sequence[str]] | None = None) -> None:
        self.n_fields = n_fields
        self.known = known
        self.per_class: dict[int, int] = {}  # records peeled per length class
        self._groups: list[IntArray] = []
        self._counts: list[IntArray] = []
        self._read: list[list[RawField]] = []
        self._lock = threading.Lock()  # parts may be added from several threads at once

    def add(
        self,
        layout: Layout,
        key: bytes,
        vector: npt.NDArray[np.uint64] | npt.NDArray[np.int64],
        *,
        in_place: bool = False,
        part: bool = False,
    ) -> None:
        """Peel and read one summed sketch; ``part``: of a split union (its tables hold at
        most their ``records``; :meth:`check_classes` checks the parts' total).  Nothing is
        kept if it raises.  Thread-safe: parts may be peeled at once (the order they are
        added in does not change :meth:`result`)."""
        flat = vector_of(layout, vector)
        hasher = RecordHash(key)
        got: list[tuple[int, IntArray, IntArray, list[RawField]]] = []
        for table, offset in zip(layout.tables, layout.offsets(), strict=True):
            block = flat[offset : offset + table.size].reshape(3 * table.cells, table.lanes)
            if not in_place:
                block = block.copy()
            rows, mult = peel_table(table, block, hasher, exact=not part)
            del block
            if not part and int(mult.sum()) != table.records:
                raise CorruptSketch("a table peeled to the wrong number of records")
            try:
                gid, fields = read_rows(rows, layout.n_fields)
            except MalformedRecord as exc:
                raise CorruptSketch(f"a peeled record is malformed: {exc}") from None
            got.append((table.size_class, gid, mult.astype(np.int64), fields))
        with self._lock:
            self._keep(got)

    def _keep(self, got: list[tuple[int, IntArray, IntArray, list[RawField]]]) -> None:
        for size_class, gid, count, fields in got:
            self.per_class[size_class] = self.per_class.get(size_class, 0) + int(count.sum())
            self._groups.append(gid)
            self._counts.append(count)
            self._read.append(fields)

    def check_classes(self, layout: Layout) -> None:
        """The parts peeled so far hold every table's ``records`` (its class's count)."""
        for t in layout.tables:
            if self.per_class.get(t.size_class, 0) != t.records:
                raise CorruptSketch("the parts peeled to the wrong number of records")

    def result(self) -> PeeledRecords:
        """Every record added, distinct, in the canonical order."""
        if not self._groups:
            empty = tuple(Coded((), np.zeros(0, dtype=np.int64)) for _ in range(self.n_fields))
            return PeeledRecords(np.zeros(0, dtype=np.int64), empty, np.zeros(0, dtype=np.int64))
        group = np.concatenate(self._groups)

        def field(f: int) -> tuple[Coded, IntArray]:
            declared = tuple(self.known[f]) if self.known is not None else ()
            try:
                col, size = field_values([fields[f] for fields in self._read], declared)
            except MalformedRecord as exc:
                raise CorruptSketch(f"a peeled record is malformed: {exc}") from None
            return col, size[col.codes]

        # the fields one per thread (numpy and Arrow release the GIL for most of the work)
        with ThreadPoolExecutor(max_workers=FIELD_THREADS) as pool:
            decoded = list(pool.map(field, range(self.n_fields)))
        columns = [col for col, _ in decoded]
        sizes = [size for _, size in decoded]
        order, new = lex_order([group, text_classes(group, sizes), *(c.codes for c in columns)])
        count = np.concatenate(self._counts)[order]
        if not new.all():  # a record peeled twice (never for honest sums)
            start = np.flatnonzero(new)
            order, count = order[start], np.add.reduceat(count, start)
        merged = tuple(Coded(c.values, np.take(_narrow(c), order)) for c in columns)
        return PeeledRecords(group[order], merged, count)


def _narrow(column: Coded) -> IntArray:
    """The column's codes in the smallest unsigned type (as the release keeps them)."""
    small = smallest_uint(max(len(column.values) - 1, 0))
    narrow: IntArray = column.codes.astype(small, copy=False)
    return narrow
