"""What a party computes in a DP run: the same kind of local count vectors as in an LKC run,
summed by the same federation (plain sum in-process, secure sum over gRPC).  The party is the
engine's (:class:`fedanon.tds.party.EngineParty`) with DiffGen's statistics layout
(:class:`DPState`) and its release (:class:`CountRelease`: counts, never a record).

* SPLIT (``SharedState.split_layout``): per pending numeric interval a bins x classes
  histogram, as in an LKC run with InfoGain;
* COUNTS (:meth:`DPState.count_layout`): for every value that just entered the cut, its
  children x classes counts -- the input of both DP utilities.  DiffGen checks no validity,
  so the LKC per-partition child blocks are left out (the leader learns less than in an LKC
  run); one cell holds the number of records in the new partitions;
* UNION (:func:`final_layout`): the count of every final group x class value, groups in
  ascending partition id.  Specializations create every child partition, empty or not
  (children mask all ones), so the groups are exactly the cross product of the cut values and
  the layout does not depend on the data.
"""

from __future__ import annotations

import hashlib

import numpy as np

from fedanon.arrays import IntArray
from fedanon.dp.bounds import MAX_TABLE_ROWS, check_selection
from fedanon.errors import ProtocolError
from fedanon.io.table import EncodedTable, Schema
from fedanon.tds.party import EngineParty
from fedanon.tds.state import ClassEntry, CountLayout, Phase, SharedState, Update
from fedanon.tds.tips import Tips


class DPState(SharedState):
    """The shared state of a DP run: the LKC state with DiffGen's statistics layout."""

    def count_layout(self) -> CountLayout:
        n_new = self.new_parts.size
        # every new partition counts into cell 0 and has no per-partition block: read-only
        # views of one number (n_new x m int64 arrays were the largest of a run's memory)
        base = np.broadcast_to(np.int64(0), (n_new,))
        off = np.broadcast_to(np.int64(-1), (n_new, self.m))
        size = self.width
        classes = []
        for a, x in self.new_values:
            if self.is_candidate(a, x):
                nc = int(self.trees[a].nchild[x])
                classes.append(ClassEntry(a, x, size, nc))
                size += nc * self.n_class
        h = hashlib.sha256(b"dp-counts%d" % self.round)
        h.update(self.new_parts.tobytes())
        for c in classes:
            h.update(np.array([c.attr, c.node, c.offset, c.n_child]).tobytes())
        return CountLayout(self.width, base, off, tuple(classes), size, h.digest())


def dp_count_stats(state: DPState, tips: Tips, cls: IntArray, layout: CountLayout) -> IntArray:
    """The COUNTS vector of :meth:`DPState.count_layout` (what ``fedanon.tds.stats.count_stats``
    computes for this layout), in one pass over the rows per attribute instead of one per
    new value."""
    out = np.zeros(layout.size, dtype=np.int64)
    rows, which = tips.rows_of(state.new_parts)
    out[0] = rows.size
    by_attr: dict[int, list[tuple[int, int]]] = {}
    for c in layout.classes:
        by_attr.setdefault(c.attr, []).append((c.node, c.offset))
    for a, entries in by_attr.items():
        tree = state.trees[a]
        offset = np.full(len(tree), -1, dtype=np.int64)
        for node, off in entries:
            offset[node] = off
        nodes = state.pvals[state.new_parts, a][which]
        sel = offset[nodes] >= 0
        r, nd = rows[sel], nodes[sel]
        child = tree.child_of(nd, tips.leaves[a, r])
        idx = offset[nd] + tree.slot[child] * state.n_class + cls[r]
        out += np.bincount(idx, minlength=layout.size)
    return out


def new_dp_state(schema: Schema, n_class: int) -> DPState:
    """A fresh replica (leader and parties build it from the same spec)."""
    return DPState(schema.new_trees(), n_class, 0, "infogain")


def final_layout(state: SharedState) -> tuple[int, bytes]:
    """(size, digest) of the final counts vector: alive partitions x classes."""
    ids = state.alive_ids()
    h = hashlib.sha256(b"dp-final%d" % state.round)
    h.update(ids.tobytes())
    h.update(np.array([state.n_class]).tobytes())
    return int(ids.size * state.n_class), h.digest()


def final_stats(
    state: SharedState, tips: Tips, cls: IntArray, size: int, digest: bytes
) -> IntArray:
    """This party's count of every final group x class value (zero for empty groups)."""
    if final_layout(state) != (size, digest):
        raise ProtocolError("final counts layout differs between leader and party")
    ids = state.alive_ids()
    rows, which = tips.rows_of(ids)
    return np.bincount(which * state.n_class + cls[rows], minlength=size).astype(np.int64)


def check_dp_update(update: Update, selections: int, limit: int | None) -> None:
    """What a party of a DP run accepts from the leader: no union sketch (a DP run integrates
    no records), every child of a selection created (DiffGen releases every group, empty or
    not), and at most ``limit`` (h) selections."""
    if update.union is not None:
        raise ProtocolError("a DP run has no record union (union sketch parameters refused)")
    if update.best is None:
        return
    if limit is not None and selections >= limit:
        raise ProtocolError(f"selection {selections + 1} of a DP run with h = {limit}")
    if any(b != 1 for b in update.children_mask):
        raise ProtocolError("a DP selection must create every child partition")


def dp_counts(state: SharedState, tips: Tips, table: EncodedTable, layout: CountLayout) -> IntArray:
    """The party's counter of the DP layout (:class:`fedanon.tds.party.EngineParty`)."""
    if not isinstance(state, DPState):
        raise ProtocolError("DiffGen's statistics need DiffGen's state")
    return dp_count_stats(state, tips, table.cls, layout)


class CountRelease:
    """The party's side of DiffGen's release (:class:`fedanon.tds.party.PartyRelease`): the
    count of every final group x class value (Phase.UNION), and the checks of
    :func:`check_dp_update` and :func:`fedanon.dp.bounds.check_selection` on every decision.
    It has no records to give: a DP party releases none."""

    phases = frozenset({Phase.UNION})

    def __init__(self, max_selections: int | None, max_table_rows: int) -> None:
        self.max_selections = max_selections
        self.max_table_rows = max_table_rows

    def stats(
        self, party: EngineParty, phase: Phase, round_: int, size: int, digest: bytes
    ) -> IntArray:
        st = party.state
        if round_ != st.round:
            raise ProtocolError(f"statistics asked for round {round_}, party is at {st.round}")
        return final_stats(st, party.tips, party.table.cls, size, digest)

    def admit(self, party: EngineParty, update: Update) -> None:
        # a DP state's round counts the selections applied (one per round, never chained)
        check_dp_update(update, party.state.round, self.max_selections)
        if update.best is not None:
            check_selection(party.state, *update.best, self.max_table_rows, "this party", None)

    def keep(self, party: EngineParty, update: Update) -> None:
        check_dp_update(update, party.state.round, self.max_selections)  # refuses it


class DPParty(EngineParty):
    """An in-process party of a DP run (centralized = one party).  ``max_selections``: the
    spec's h, enforced on the leader's updates (a party daemon sets it); ``max_table_rows``:
    the largest count table (groups x class values) it lets a selection make
    (:mod:`fedanon.dp.bounds`), refused before the partitions are allocated."""

    def __init__(
        self,
        schema: Schema,
        table: EncodedTable,
        max_selections: int | None = None,
        max_table_rows: int = MAX_TABLE_ROWS,
    ) -> None:
        state = new_dp_state(schema, len(table.class_labels))
        tips = Tips(table.qid_leaves, table.n_rows)
        release = CountRelease(max_selections, max_table_rows)
        super().__init__(schema, table, state, tips, release, dp_counts)
        self.max_selections = max_selections
        self.max_table_rows = max_table_rows

    @property
    def selections(self) -> int:
        """Selections applied so far."""
        return self.state.round
