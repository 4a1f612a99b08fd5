"""The default releaser of the engine: records (each party publishes its generalized rows).

A record release has no empty group: a specialization creates only the child partitions that
hold a record in the union of all tables (read from the leader's count blocks), and a value
that holds no record can never be specialized usefully.  The party's side -- the released
rows and the union of them -- is :class:`fedanon.union.localparty.LocalParty`'s.
"""

from __future__ import annotations

import numpy as np

from fedanon.tds.blocks import BlockStore
from fedanon.tds.counts import CountsView
from fedanon.tds.ports import Candidate
from fedanon.tds.state import SharedState


class RecordsReleaser:
    """The :class:`~fedanon.tds.ports.Releaser` of a deterministic run (it reads the
    per-partition blocks a privacy model makes the parties count)."""

    def useless(self, view: CountsView) -> list[Candidate]:
        st = view.state
        totals = view.totals()
        newv = view.new_vals
        return [
            (a, x)
            for a, x in st.new_values
            if st.is_candidate(a, x) and totals[newv[:, a] == x].sum() == 0
        ]

    def children_mask(self, state: SharedState, store: BlockStore, b: int, x: int) -> bytes:
        w = state.width
        ids = state.alive_ids()
        link = ids[state.pvals[ids, b] == x]
        nk = int(state.trees[b].nchild[x])
        counts = store.block(link, b, nk * w)
        child_tot = counts.reshape(link.size, nk, w).sum(axis=2)
        mask: bytes = (child_tot > 0).astype(np.uint8).tobytes()
        return mask
