"""Invertible Bloom lookup table: a linear sketch of a multiset of records, and its peeling.

Each record (its bytes as ``W`` uint64 lanes of ``L`` bytes) is added to one cell in each of
three disjoint sub-tables; a cell holds the number of records, the sum of their keyed
checksums and the sum of each lane.  Everything is uint64 arithmetic mod 2^64, so the sketch
is linear: the ring secure sum of the parties' sketches is the sketch of the union.

Peeling runs in vectorised rounds: every cell whose count ``c > 0`` divides every word sum,
whose words ``w = sum / c`` are valid lanes, whose index is where ``w`` hashes to and whose
checksum sum is ``c * checksum(w)`` is *pure*: it holds exactly ``c`` copies of ``w``
(identical records share their cells, so ``c`` is the multiplicity).  The round's pure
records are de-duplicated, subtracted from all their cells (``np.subtract.at``), and the
cells they touched are examined in the next round.  A record is output only if it passed
these checks and the table is exactly zero at the end, so a tampered vector yields an error,
never a wrong record.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from fedanon.arrays import IntArray, U8Array, U64Array
from fedanon.errors import FedanonError, ProtocolError
from fedanon.union.keyed import RecordHash, cell_of
from fedanon.union.layout import Layout, Table
from fedanon.union.records import RecordSet

__all__ = [
    "CorruptSketch",
    "PeelingFailed",
    "add_cells",
    "by_table",
    "cell_values",
    "peel_table",
    "sketch",
    "vector_of",
]

CHUNK_BYTES = 8 << 20
"""Record bytes sketched per step (bounds the party's working memory)."""


class PeelingFailed(FedanonError):
    """The summed sketch did not peel to zero: retry with a fresh key and a bigger table."""


class CorruptSketch(ProtocolError):
    """The summed sketch is inconsistent with any multiset of records: a party sent a
    malformed or tampered vector, or vectors of different layouts were added."""


def to_cells(rows: U8Array, table: Table) -> U64Array:
    """Byte rows (n, W * L) -> cell rows (n, W + 2): a zero count and checksum, then the W
    lanes, each L little-endian bytes of the row."""
    n = rows.shape[0]
    out = np.zeros((n, table.lanes), dtype="<u8")
    wide = out.view(np.uint8).reshape(n, table.lanes, 8)
    wide[:, 2:, : table.lane_bytes] = rows.reshape(n, table.width, table.lane_bytes)
    return out.astype(np.uint64, copy=False)


def to_rows(words: U64Array, table: Table) -> U8Array:
    """Lanes (n, W) (below 2^(8 L)) -> byte rows (n, W * L)."""
    n = words.shape[0]
    raw = np.ascontiguousarray(words, dtype="<u8").view(np.uint8).reshape(n, table.width, 8)
    return np.ascontiguousarray(raw[:, :, : table.lane_bytes]).reshape(n, table.row_bytes)


def _cells(index: U64Array, table: Table) -> IntArray:
    """Cell numbers (3, n) in the table from the hash's three index words."""
    m = table.cells
    out = np.empty(index.shape, dtype=np.int64)
    for s in range(3):
        out[s] = cell_of(index[s], m).astype(np.int64) + s * m
    return out


def _scatter(op: np.ufunc, block: U64Array, rows: IntArray, values: U64Array) -> None:
    """``op.at`` of value rows into block rows (repeated rows accumulate): one 1-D ufunc.at
    on flat indexes, numpy's fast path (about 2x a 2-D ``op.at``)."""
    lanes = block.shape[1]
    flat = (rows[:, None] * lanes + np.arange(lanes)).ravel()
    op.at(block.reshape(-1), flat, values.ravel())


def by_table(records: RecordSet, layout: Layout) -> list[tuple[IntArray, U64Array]]:
    """Per table of ``layout``: (one index per distinct record of its length class, the
    record's multiplicity); :class:`ProtocolError` when a record has no room."""
    if records.n_fields != layout.n_fields:
        raise ProtocolError(
            f"the layout is for {layout.n_fields} released fields, the records have "
            f"{records.n_fields}"
        )
    table_of = {t.size_class: i for i, t in enumerate(layout.tables)}
    hist = records.histogram()
    for k in np.flatnonzero(hist):
        t = table_of.get(int(k))
        if t is None or int(hist[k]) > layout.tables[t].records:
            raise ProtocolError(f"the union layout has no room for records of length class {k}")
    # identical records share their cells: sketch each distinct record once, times its count
    first, mult = records.distinct()
    size_class = records.size_class[first]
    order = np.argsort(size_class, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(size_class, minlength=hist.size))))
    out = []
    for table in layout.tables:
        k = table.size_class
        pick = order[bounds[k] : bounds[k + 1]]
        out.append((first[pick], mult[pick].astype(np.uint64)))
    return out


def cell_values(
    records: RecordSet, which: IntArray, count: U64Array, table: Table, hasher: RecordHash
) -> Iterator[tuple[U64Array, U64Array, U64Array]]:
    """Records ``which``, each ``count`` times, as cell rows to add (count, checksum sum,
    word sums), with their three index words and their spare hash word
    (:meth:`RecordHash.with_spare`), in steps of :data:`CHUNK_BYTES`."""
    step = max(1, CHUNK_BYTES // table.row_bytes)
    for start in range(0, which.size, step):
        chunk, c = which[start : start + step], count[start : start + step]
        values = to_cells(records.rows(chunk, table.row_bytes), table)
        checksum, index, spare = hasher.with_spare(values[:, 2:])
        values[:, 2:] *= c[:, None]  # mod 2^64, as adding the record c times
        values[:, 0] = c
        values[:, 1] = checksum * c
        yield values, index, spare


def add_cells(block: U64Array, table: Table, values: U64Array, index: U64Array) -> None:
    """Add cell rows ``values`` to the table ``block`` at the cells of ``index``."""
    for cells in _cells(index, table):
        _scatter(np.add, block, cells, values)


def sketch(records: RecordSet, layout: Layout, key: bytes) -> U64Array:
    """The party's sketch of its records: a uint64 vector of ``layout.size`` elements."""
    hasher = RecordHash(key)
    out = np.zeros(layout.size, dtype=np.uint64)
    tables = zip(layout.tables, layout.offsets(), by_table(records, layout), strict=True)
    for table, offset, (which, count) in tables:
        block = out[offset : offset + table.size].reshape(3 * table.cells, table.lanes)
        for values, index, _ in cell_values(records, which, count, table, hasher):
            add_cells(block, table, values, index)
    return out


def vector_of(layout: Layout, vector: npt.NDArray[np.uint64] | npt.NDArray[np.int64]) -> U64Array:
    """Check and view a summed vector (uint64, or int64 as :func:`unmask` returns it)."""
    if vector.dtype not in (np.uint64, np.int64) or vector.shape != (layout.size,):
        raise CorruptSketch(
            f"a union vector must be {layout.size} 64-bit integers, not {vector.shape} "
            f"{vector.dtype}"
        )
    return vector.view(np.uint64)


def _candidates(
    block: U64Array, frontier: IntArray, table: Table
) -> tuple[IntArray, U64Array, U64Array, U64Array]:
    """The frontier cells that may be pure: (cells, counts, checksum sums, words (k, W))
    with ``words = sums / count`` exact."""
    c = block[frontier, 0]
    if c.size and int(c.max()) > table.records:  # a negative count is a huge uint64
        raise CorruptSketch("a cell's count is impossible")
    # cheap first test on the count and the first word (one cache line): most cells with
    # several different records fail it, and only the rest are gathered whole
    maybe = c == 1
    multi = np.flatnonzero(c > 1)
    if multi.size:
        maybe[multi] = block[frontier[multi], 2] % c[multi] == 0
    frontier = frontier[maybe]
    rows = np.take(block, frontier, axis=0)
    multi = np.flatnonzero(rows[:, 0] > 1)
    if multi.size:  # words = sums / count, exactly (else the cell is not pure)
        part = rows[multi, 2:]
        cnt = rows[multi, :1]
        q = part // cnt
        rows[multi, 2:] = q
        inexact = multi[(q * cnt != part).any(axis=1)]
        if inexact.size:
            keep = np.ones(frontier.size, dtype=bool)
            keep[inexact] = False
            frontier, rows = frontier[keep], rows[keep]
    return frontier, rows[:, 0], rows[:, 1], rows[:, 2:]


class _Peeler:
    """State of one table's peeling: the block, per-cell scratch arrays, what was found."""

    def __init__(self, table: Table, block: U64Array, hasher: RecordHash) -> None:
        self.table, self.block, self.hasher = table, block, hasher
        self.owner = np.full(3 * table.cells, -1, dtype=np.int64)  # candidate at a pure cell
        self.touched = np.zeros(3 * table.cells, dtype=bool)
        self.rows: list[U8Array] = []
        self.counts: list[U64Array] = []

    def step(self, frontier: IntArray) -> bool:
        """Peel every pure cell among ``frontier`` (ascending); True if any was found."""
        table, block, m = self.table, self.block, self.table.cells
        home, cnt, sums, words = _candidates(block, frontier, table)
        checksum, index = self.hasher(words)
        cells = _cells(index, table)
        k = home.size
        pure = (cells[home // m, np.arange(k)] == home) & (checksum * cnt == sums)
        if not pure.any():
            return False
        if not pure.all():
            home, cnt, words = home[pure], cnt[pure], words[pure]
            checksum, cells = checksum[pure], cells[:, pure]
        idx = np.arange(home.size)
        sub = home // m
        # the frontier is ascending, so are the pure cells: sub-table j's records are the
        # run bounds[j]:bounds[j + 1]
        bounds = [0, *np.searchsorted(sub, (1, 2)).tolist(), home.size]
        # a record pure in several cells at once: keep the copy of its lowest sub-table
        self.owner[home] = idx
        rep = idx.copy()
        for j in (1, 0):
            lo = bounds[j + 1]
            other = self.owner[cells[j, lo:]]
            sel = np.flatnonzero(other >= 0)
            rep[lo + sel] = other[sel]
        dup = np.flatnonzero(rep != idx)
        if dup.size and not (
            (rep[rep[dup]] == rep[dup]).all()
            and (words[dup] == words[rep[dup]]).all()
            and (cnt[dup] == cnt[rep[dup]]).all()
        ):
            raise CorruptSketch("two different records claim the same pure cell")
        block[home] = 0
        kept = np.flatnonzero(rep == idx)
        if dup.size:
            cnt, checksum, words, cells = cnt[kept], checksum[kept], words[kept], cells[:, kept]
        if int(words.max(initial=0)) >> (8 * table.lane_bytes):
            raise CorruptSketch("a peeled record has a lane out of range")
        values = np.empty((kept.size, table.lanes), dtype=np.uint64)
        values[:, 0] = 1
        values[:, 1] = checksum
        values[:, 2:] = words
        if not (cnt == 1).all():
            values *= cnt[:, None]
        for j in range(3):
            target = cells[j]
            if dup.size:
                o = self.owner[target]
                rest = np.flatnonzero((o < 0) | (rep[np.maximum(o, 0)] != kept))
                self._subtract(target[rest], values[rest])
                continue
            # every cell of another sub-table than the record's pure one
            self._subtract(target[: bounds[j]], values[: bounds[j]])
            self._subtract(target[bounds[j + 1] :], values[bounds[j + 1] :])
        self.owner[home] = -1
        self.rows.append(to_rows(words, table))
        self.counts.append(cnt)
        return True

    def _subtract(self, at: IntArray, values: U64Array) -> None:
        if at.size:
            _scatter(np.subtract, self.block, at, values)
            self.touched[at] = True


def peel_table(
    table: Table, block: U64Array, hasher: RecordHash, exact: bool = True
) -> tuple[U8Array, U64Array]:
    """Peel one table (cell rows, shape (3 m, W + 2)) in place; returns (byte rows
    (k, W * L), multiplicities (k,)) of its distinct records, in discovery order.  Raises
    :class:`PeelingFailed` or :class:`CorruptSketch`.  ``exact``: the table holds
    ``table.records`` records (else at most that many: one part of a split union).

    Exactness: a pure cell equals ``count * (1, checksum, words)`` (checked), so zeroing
    it *is* subtracting its record; every other cell of a peeled record gets an exact
    ``np.subtract.at``.  Hence at every step ``block == sketch(input) - sketch(found)``
    and the final all-zero check proves ``found == input`` as multisets (up to a forged
    keyed checksum)."""
    m = table.cells
    counts = block[:, 0]
    first = np.ascontiguousarray(counts)
    held = [int(first[s * m : (s + 1) * m].sum(dtype=np.uint64)) for s in range(3)]
    if held != [held[0]] * 3 or held[0] > table.records or (exact and held[0] != table.records):
        raise CorruptSketch("a sub-table's counts disagree with the length histogram")
    peeler = _Peeler(table, block, hasher)
    frontier = np.flatnonzero(first)
    del first
    step = max(1024, CHUNK_BYTES // (8 * table.lanes))
    while frontier.size:
        progress = False
        for start in range(0, frontier.size, step):
            progress |= peeler.step(frontier[start : start + step])
        if not progress:
            break
        frontier = np.flatnonzero(peeler.touched)
        peeler.touched[frontier] = False
        frontier = frontier[counts[frontier] != 0]
    if block.any():
        if (counts.view(np.int64) < 0).any() or block[counts == 0].any():
            raise CorruptSketch("the sketch does not peel to zero and holds impossible cells")
        left = int(np.count_nonzero(counts))
        raise PeelingFailed(f"{left} of {3 * m} cells could not be peeled")
    if not peeler.rows:
        return np.zeros((0, table.row_bytes), dtype=np.uint8), np.zeros(0, dtype=np.uint64)
    return np.concatenate(peeler.rows), np.concatenate(peeler.counts)
