"""Taxonomy Indexed PartitionS (Sec. 4.2) over a party's own rows.

Rows are kept in one permutation array in which every partition owns a contiguous slice
``order[start[p]:end[p]]``; specializing a partition reorders its slice so that each child
partition owns a sub-slice.  Only the rows of the partitions on Link_best are touched.  Row
indices are int32 (int64 beyond 2^31 rows); leaf codes stay in the table's small type.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from fedanon.arrays import Codes, IntArray, grown
from fedanon.errors import ProtocolError
from fedanon.io.spill import Spill
from fedanon.tds import threads
from fedanon.tds.blocks import BlockStore, gather
from fedanon.tds.state import Applied, SharedState


def row_dtype(n_rows: int) -> type[np.int32] | type[np.int64]:
    return np.int32 if n_rows < 1 << 31 else np.int64


def stable_order(key: IntArray, n_keys: int) -> IntArray:
    """argsort(key, stable); a radix sort when the keys fit in 16 bits."""
    if n_keys <= 1 << 16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    return np.argsort(key, kind="stable")


@dataclass(frozen=True)
class Derivation:
    """How the partitions of the last specialization relate to their parents: the locally
    largest child of each parent is ``derived`` -- its counts for attributes other than the
    specialized one are the parent's minus its siblings' (no row is read for it)."""

    new_ids: IntArray
    link: IntArray
    parent_pos: IntArray  # index into link of each new partition's parent
    derived: npt.NDArray[np.bool_]
    attr: int


class Tips:
    """``spill``: the table is out of core -- the row order lives in a memory-mapped file and
    passes over rows go :attr:`chunk` rows at a time (:meth:`pieces`)."""

    def __init__(self, leaves: Codes, n_rows: int, spill: Spill | None = None) -> None:
        self.leaves = leaves  # (n_qids, n_rows) leaf codes
        self.spill = spill
        self.chunk = spill.chunk_rows if spill is not None else None
        dtype = row_dtype(n_rows)
        if spill is None:
            self.order = np.arange(n_rows, dtype=dtype)
        else:
            self.order = spill.array((n_rows,), dtype)
            for lo in range(0, n_rows, spill.chunk_rows):
                hi = min(n_rows, lo + spill.chunk_rows)
                self.order[lo:hi] = np.arange(lo, hi, dtype=dtype)
        self._scratch: npt.NDArray[Any] | None = None  # the chunked regroup's second buffer
        self.start = np.zeros(16, dtype=np.int64)
        self.end = np.zeros(16, dtype=np.int64)
        self.end[0] = n_rows
        self.blocks = BlockStore(int(leaves.shape[0]))  # this party's last counts per partition
        self.derivation: Derivation | None = None
        self._retired = np.zeros(0, dtype=np.int64)  # parents whose blocks await one more use

    def retire(self) -> None:
        """The parents' stored counts have served the round after their specialization."""
        self.blocks.drop(self._retired)
        self._retired = np.zeros(0, dtype=np.int64)

    def rows_of(self, parts: IntArray, small: bool = False) -> tuple[Codes, Codes]:
        """Row ids of the given partitions and, per row, the index into ``parts`` (int64;
        int32 with ``small``, for the hot paths that know to widen before multiplying)."""
        pos, which = gather(self.start[parts], self.end[parts], small)
        return self.order[pos], which

    def pieces(self, parts: IntArray, small: bool = False) -> Iterator[tuple[Codes, Codes]]:
        """:meth:`rows_of` in pieces of at most :attr:`chunk` rows (one piece in memory)."""
        if self.chunk is None:
            yield self.rows_of(parts, small)
            return
        for pos, which in chunked(self.start[parts], self.end[parts], self.chunk, small):
            yield self.order[pos], which

    def sizes(self, parts: IntArray) -> IntArray:
        """Number of this party's rows in each partition."""
        return np.asarray(self.end[parts] - self.start[parts], dtype=np.int64)

    def apply(self, applied: Applied, state: SharedState) -> None:
        link = applied.link
        b = applied.attr
        tree = state.trees[b]
        x = int(state.pvals[link[0], b])  # every partition on Link_best holds value x on b
        k = int(tree.nchild[x])
        leaf_slot = child_slot_by_leaf(state, b, x).astype(np.int16 if k < 1 << 15 else np.int64)
        lens = self.end[link] - self.start[link]
        if self.chunk is not None and int(lens.sum()) > self.chunk:
            counts = self._regroup_chunked(link, leaf_slot, b, k)
        else:
            counts = self._regroup_all(link, lens, leaf_slot, b, k)
        self._place(applied, counts, k)

    def _regroup_all(
        self, link: IntArray, lens: IntArray, leaf_slot: Codes, b: int, k: int
    ) -> IntArray:
        """Regroup the rows of every partition on the link at once (in memory)."""
        pos, which = gather(self.start[link], self.end[link], small=True)
        cut = 0
        if link.size > 1 and pos.size >= 2 * threads.PARALLEL_ROWS and threads.workers() > 1:
            cut = int(np.searchsorted(np.cumsum(lens), pos.size // 2)) + 1
            cut = min(max(cut, 1), link.size - 1)  # two halves of whole parent slices
        if cut:
            at = int(lens[:cut].sum())
            jobs = [(0, at, 0, cut), (at, pos.size, cut, link.size)]
            parts = list(
                threads.pool().map(lambda j: self._regroup(pos, which, leaf_slot, b, k, *j), jobs)
            )
            counts = np.concatenate(parts)
        else:
            counts = self._regroup(pos, which, leaf_slot, b, k, 0, pos.size, 0, link.size)
        return counts

    def _regroup_chunked(self, link: IntArray, leaf_slot: Codes, b: int, k: int) -> IntArray:
        """The same reordering as :meth:`_regroup_all`, :attr:`chunk` rows at a time: a
        stable counting sort by (parent, child slot).  One pass counts the keys; a second
        writes each chunk's rows, in their order, after those of earlier chunks with the
        same key into a second buffer; a third copies the link's positions back."""
        assert self.chunk is not None and self.spill is not None
        starts, ends = self.start[link], self.end[link]
        n_keys = link.size * k
        counts = np.zeros(n_keys, dtype=np.int64)
        for pos, which in chunked(starts, ends, self.chunk, True):
            key = self._keys(self.order[pos], which, leaf_slot, b, k)
            counts += np.bincount(key, minlength=n_keys)
        grid = counts.reshape(link.size, k)
        fill = (starts[:, None] + np.cumsum(grid, axis=1) - grid).reshape(-1)
        if self._scratch is None:
            self._scratch = self.spill.array(self.order.shape, self.order.dtype)
        scratch = self._scratch
        for pos, which in chunked(starts, ends, self.chunk, True):
            rows = self.order[pos]
            key = self._keys(rows, which, leaf_slot, b, k)
            srt = stable_order(key, n_keys)
            ks = key[srt]
            cnt = np.bincount(key, minlength=n_keys)
            rank = np.arange(ks.size, dtype=np.int64) - (np.cumsum(cnt) - cnt)[ks]
            scratch[fill[ks] + rank] = rows[srt]
            fill += cnt
        for pos, _ in chunked(starts, ends, self.chunk, True):
            self.order[pos] = scratch[pos]
        return counts

    def _keys(self, rows: Codes, which: Codes, leaf_slot: Codes, b: int, k: int) -> IntArray:
        slot = np.take(leaf_slot, np.take(self.leaves[b], rows))
        if slot.size and int(slot.min()) < 0:
            raise ProtocolError("a local row is not under the specialized value")
        key: IntArray = which.astype(np.int64) * k + slot
        return key

    def _place(self, applied: Applied, counts: IntArray, k: int) -> None:
        """The new partitions' slices from the (parent, slot) counts."""
        link = applied.link
        # every locally non-empty child must exist globally
        new_key = applied.new_parent_pos * k + applied.new_slot
        covered = np.zeros(link.size * k, dtype=bool)
        covered[new_key] = True
        if np.any((counts > 0) & ~covered):
            raise ProtocolError("local rows fall into a child partition that is empty globally")
        # child sub-slices: within each parent slice, children in slot order
        parent_start = self.start[link]
        grid = counts.reshape(link.size, k)
        within = np.cumsum(grid, axis=1) - grid
        starts = (
            parent_start[applied.new_parent_pos] + within[applied.new_parent_pos, applied.new_slot]
        )
        n_total = int(applied.new_ids[-1]) + 1 if applied.new_ids.size else 0
        self._reserve(n_total)
        self.start[applied.new_ids] = starts
        self.end[applied.new_ids] = starts + counts[new_key]
        self._plan(applied, counts[new_key])

    def _regroup(
        self,
        pos: Codes,
        which: Codes,
        leaf_slot: Codes,
        b: int,
        k: int,
        lo: int,
        hi: int,
        p_lo: int,
        p_hi: int,
    ) -> IntArray:
        """Reorder positions ``pos[lo:hi]`` (the slices of parents p_lo..p_hi-1) so that each
        parent's rows are grouped by child slot; returns their (parent, slot) counts.
        Different parents' slices are disjoint, so halves may run in parallel threads."""
        p = pos[lo:hi]
        rows = self.order[p]
        # np.take: a plain gather, about twice as fast as fancy indexing on these sizes
        slot = np.take(leaf_slot, np.take(self.leaves[b], rows))
        if slot.size and int(slot.min()) < 0:
            raise ProtocolError("a local row is not under the specialized value")
        key = which[lo:hi] - p_lo if p_lo else which[lo:hi]
        key = key * k + slot
        n_keys = (p_hi - p_lo) * k
        self.order[p] = np.take(rows, stable_order(key, n_keys))
        return np.bincount(key, minlength=n_keys)

    def _plan(self, applied: Applied, sizes: IntArray) -> None:
        """Mark the locally largest non-empty child of every parent on the link."""
        self.retire()
        self._retired = applied.link.copy()
        n_link = applied.link.size
        best = np.full(n_link, -1, dtype=np.int64)
        order = np.lexsort((-sizes, applied.new_parent_pos))  # per parent, largest first
        first = np.ones(order.size, dtype=bool)
        first[1:] = applied.new_parent_pos[order[1:]] != applied.new_parent_pos[order[:-1]]
        heads = order[first]
        heads = heads[sizes[heads] > 0]
        best[applied.new_parent_pos[heads]] = heads
        derived = np.zeros(applied.new_ids.size, dtype=bool)
        derived[best[best >= 0]] = True
        self.derivation = Derivation(
            applied.new_ids.copy(), applied.link, applied.new_parent_pos, derived, applied.attr
        )

    def _reserve(self, n: int) -> None:
        self.start, self.end = grown(self.start, n), grown(self.end, n)

    def partition_of_rows(self, state: SharedState, small: bool = False) -> Codes:
        """Partition id of every row (for writing the released table).  The alive
        partitions' slices tile ``order`` (apply splits a slice into sub-slices that cover it),
        so one repeat in slice order labels every position."""
        ids = state.alive_ids()
        srt = np.argsort(self.start[ids], kind="stable")
        ids = ids[srt]
        sizes = self.sizes(ids)
        if int(sizes.sum()) != self.order.size:
            raise ProtocolError("the alive partitions do not cover this party's rows")
        dtype = np.int32 if small and state.n_parts < 1 << 31 else np.int64  # small: int32
        if self.spill is None:
            out = np.empty(self.order.size, dtype=dtype)
            out[self.order] = np.repeat(ids.astype(dtype), sizes)
            return out
        out = self.spill.array(self.order.shape, dtype)
        ids = ids.astype(dtype)
        for rows, which in self.pieces(ids, small=True):
            out[rows] = ids[which]
        return out


def chunked(
    starts: IntArray, ends: IntArray, chunk: int, small: bool = False
) -> Iterator[tuple[npt.NDArray[Any], npt.NDArray[Any]]]:
    """:func:`gather` of the slices ``[starts[i], ends[i])`` in pieces of at most ``chunk``
    positions (a slice may be cut between pieces); ``which`` indexes ``starts``."""
    lens = (ends - starts).astype(np.int64)
    cum = np.concatenate(([0], np.cumsum(lens)))
    total = int(cum[-1])
    for lo in range(0, total, chunk):
        hi = min(total, lo + chunk)
        p0 = int(np.searchsorted(cum, lo, side="right")) - 1
        p1 = int(np.searchsorted(cum, hi, side="left"))
        s = starts[p0:p1].astype(np.int64)
        e = ends[p0:p1].astype(np.int64)
        s[0] += lo - int(cum[p0])
        e[-1] -= int(cum[p1]) - hi
        pos, which = gather(s, e, small)
        which += p0
        yield pos, which


def child_slot_by_leaf(state: SharedState, a: int, node: int) -> IntArray:
    """For every leaf code of attribute a: the slot of the child of ``node`` covering it, or
    -1 for leaves outside ``node``."""
    tree = state.trees[a]
    lo, hi = tree.leaf_lo[node], tree.leaf_hi[node]
    out = np.full(tree.n_leaves, -1, dtype=np.int64)
    leaves = np.arange(lo, hi, dtype=np.int64)
    child = tree.child_of(np.full(leaves.size, node, dtype=np.int64), leaves)
    out[lo:hi] = tree.slot[child]
    return out
