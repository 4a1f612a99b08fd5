"""A round's summed COUNTS vector read through its layout: what privacy models and utility
scores see on the leader (only these sums and the shared state, never a record)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from fedanon.arrays import IntArray
from fedanon.model.tree import AttrTree
from fedanon.tds.state import ClassEntry, CountLayout, SharedState


def child_blocks(
    tree: AttrTree, nodes: IntArray, offsets: IntArray, vec: IntArray, width: int
) -> tuple[IntArray, IntArray, IntArray]:
    """Expand count blocks into one row per (block, child): the block index, the child slot
    and the (n_rows, width) counts.  ``nodes[i]`` is the split value of block i, whose
    n_child x width counts start at ``offsets[i]`` in ``vec``."""
    nk = tree.nchild[nodes]
    block = np.repeat(np.arange(nodes.size, dtype=np.int64), nk)
    kk = np.arange(int(nk.sum()), dtype=np.int64) - np.repeat(np.cumsum(nk) - nk, nk)
    base = np.repeat(offsets, nk) + kk * width
    if base.size == 0:
        return block, kk, np.zeros((0, width), dtype=vec.dtype)
    return block, kk, sliding_window_view(vec, width)[base]  # one index per row, not per cell


@dataclass(frozen=True)
class CountsView:
    """The global COUNTS vector of one round.  Per new partition i (``state.new_parts[i]``):
    ``width`` totals (records, then whatever the privacy model counts per record, e.g. one
    cell per sensitive value), and for every candidate attribute a (``off[i, a] >= 0``) the
    same ``width`` cells per child of its value; then, if the score asks for them, a children
    x classes block per new candidate value (``layout.classes``)."""

    state: SharedState
    layout: CountLayout
    vec: IntArray

    @property
    def width(self) -> int:
        return self.layout.width

    @cached_property
    def new_vals(self) -> npt.NDArray[Any]:
        """(n_new, m) generalized value (node id) of every new partition."""
        return self.state.pvals[self.state.new_parts]

    def totals(self) -> IntArray:
        """(n_new, width) totals of the new partitions."""
        return self.vec[self.layout.base[:, None] + np.arange(self.width)]

    def child_counts(self, a: int) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """For the new partitions where attribute a is a candidate (``sel``, positions in
        new_parts): one row per (partition, child) -- its position in ``sel`` (runs), the
        child slot and the (rows, width) counts."""
        sel = np.flatnonzero(self.layout.off[:, a] >= 0)
        nodes = self.new_vals[sel, a]
        block, kk, counts = child_blocks(
            self.state.trees[a], nodes, self.layout.off[sel, a], self.vec, self.width
        )
        return sel, block, kk, counts

    def class_counts(self, entry: ClassEntry) -> IntArray:
        """(children, classes) counts of T[v] for a new candidate value v."""
        n_class = self.state.n_class
        chunk = self.vec[entry.offset : entry.offset + entry.n_child * n_class]
        return chunk.reshape(entry.n_child, n_class)
