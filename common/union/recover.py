"""The leader's side: peel the summed sketch and decode the released records.

The result is the multiset of released records as distinct records with multiplicities, in
a canonical order that depends only on the multiset: group id ascending, then length class,
then encoded bytes.  Which party held a record cannot be seen in it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fedanon.arrays import IntArray
from fedanon.union.decode import Coded, MalformedRecord, decode_rows
from fedanon.union.iblt import CorruptSketch, peel_table, vector_of
from fedanon.union.keyed import RecordHash
from fedanon.union.layout import Layout

__all__ = ["PeeledRecords", "peel"]


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
) -> PeeledRecords:
    """Recover the released records from the unmasked sum of all parties' sketches.

    Raises :class:`~fedanon.union.iblt.PeelingFailed` (retry: fresh key, ``layout.grown()``)
    or :class:`~fedanon.union.iblt.CorruptSketch` (abort: the sum is not a sketch of any
    multiset of valid records).  The vector is left unchanged unless ``in_place`` (saves
    a copy of the whole vector; it is then garbage, e.g. the temporary from ``unmask``)."""
    flat = vector_of(layout, vector)
    hasher = RecordHash(key)
    groups: list[IntArray] = []
    columns: list[list[Coded]] = []
    counts: list[IntArray] = []
    for table, offset in zip(layout.tables, layout.offsets(), strict=True):
        block = flat[offset : offset + table.size].reshape(3 * table.cells, table.lanes)
        if not in_place:
            block = block.copy()
        rows, mult = peel_table(table, block, hasher)
        del block
        text = rows.view(f"S{table.row_bytes}").ravel()
        order = np.argsort(text, kind="stable")
        rows = np.take(rows, order, axis=0)  # one gather: the sorted text is a view of it
        text = rows.view(f"S{table.row_bytes}").ravel()
        mult_i: IntArray = mult[order].astype(np.int64)
        if (text[1:] == text[:-1]).any():  # a record peeled twice (never for honest sums)
            start = np.flatnonzero(np.concatenate(([True], text[1:] != text[:-1])))
            rows, mult_i = rows[start], np.add.reduceat(mult_i, start)
        if int(mult_i.sum()) != table.records:
            raise CorruptSketch("a table peeled to the wrong number of records")
        try:
            gid, cols = decode_rows(rows, layout.n_fields)
        except MalformedRecord as exc:
            raise CorruptSketch(f"a peeled record is malformed: {exc}") from None
        groups.append(gid)
        columns.append(cols)
        counts.append(mult_i)
    if not groups:
        empty = tuple(Coded((), np.zeros(0, dtype=np.int64)) for _ in range(layout.n_fields))
        return PeeledRecords(np.zeros(0, dtype=np.int64), empty, np.zeros(0, dtype=np.int64))
    group = np.concatenate(groups)
    order = np.argsort(group, kind="stable")
    merged = []
    for f in range(layout.n_fields):
        values: list[str] = []
        codes = []
        for cols in columns:
            codes.append(cols[f].codes + len(values))
            values.extend(cols[f].values)
        merged.append(Coded(tuple(values), np.concatenate(codes)[order]))
    return PeeledRecords(group[order], tuple(merged), np.concatenate(counts)[order])
