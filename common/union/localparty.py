"""A party's side of a run in this process: its rows, its TIPS, its replica of the shared
state, and the statistics of every phase -- the engine's (SPLIT, COUNTS: :mod:`fedanon.tds.stats`)
and the union's (UNION: :mod:`fedanon.union.count_union`; UNION_LENGTHS / UNION_SKETCH:
:mod:`fedanon.union.sketch_union`).  The centralized run is one of these in a
:class:`fedanon.tds.engine.LocalFederation`; a party daemon holds one per run.
"""

from __future__ import annotations

import numpy as np

from fedanon.arrays import IntArray
from fedanon.errors import ProtocolError
from fedanon.io.columns import Column, smallest_uint
from fedanon.io.spill import converted
from fedanon.io.table import EncodedTable, Schema
from fedanon.tds.decide import combined_key
from fedanon.tds.ports import make_model
from fedanon.tds.state import CountLayout, Phase, SharedState, Update
from fedanon.tds.stats import count_stats, split_stats
from fedanon.tds.tips import Tips
from fedanon.union.count_union import count_domain, local_counts
from fedanon.union.params import SketchParams
from fedanon.union.sketch_union import SketchShare, encode_released


class LocalParty:
    """A party's rows, its TIPS and its replica of the shared state."""

    def __init__(self, schema: Schema, table: EncodedTable) -> None:
        self.schema = schema
        self.table = table
        n_class = len(table.class_labels)
        width = make_model(schema.spec).width  # counts per record: 1 + sensitive slots
        self.state = SharedState(schema.new_trees(), n_class, width - 1, schema.spec.score)
        self.tips = Tips(table.qid_leaves, table.n_rows, table.spill)
        self.union = SketchShare()  # the sketch union, after the last round
        # statistics counted right after chained updates: the next COUNTS vector's first
        # segments (see fedanon.tds.decide)
        self._chain: list[tuple[CountLayout, IntArray]] = []
        self._chain_open = False

    def counts_key(self) -> tuple[int, bytes]:
        """(size, digest) of this party's next COUNTS vector."""
        return combined_key([*(lay for lay, _ in self._chain), self.state.count_layout()])

    def stats(self, phase: Phase, round_: int, size: int, digest: bytes) -> IntArray:
        st = self.state
        if phase in (Phase.UNION_LENGTHS, Phase.UNION_SKETCH):
            return self.union.stats(
                phase,
                round_,
                size,
                digest,
                st,
                lambda: encode_released(self.schema.spec, st, self.tips, self.table),
            )
        if round_ != st.round:
            raise ProtocolError(f"statistics asked for round {round_}, party is at {st.round}")
        if phase == Phase.UNION:
            domain = count_domain(self.schema.spec, st)
            if domain is None or (domain.size, domain.digest) != (size, digest):
                raise ProtocolError("union layout differs between leader and party")
            return local_counts(domain, st, self.tips, self.table)
        if phase == Phase.SPLIT:
            layout = st.split_layout()
            check = (layout.size, layout.digest)
            vec = (
                None
                if check != (size, digest)
                else split_stats(st, self.tips, self.table.cls, layout)
            )
        else:
            clayout = st.count_layout()
            check = self.counts_key()
            vec = (
                None
                if check != (size, digest)
                else count_stats(st, self.tips, self.table.cls, self.table.sens, clayout)
            )
            if vec is not None and self._chain:
                vec = np.concatenate([*(seg for _, seg in self._chain), vec])
        if vec is None:
            raise ProtocolError("statistics layout differs between leader and party")
        return vec

    def apply(self, update: Update) -> None:
        if update.union is not None:  # the union sketch's layout and key, no decision
            if not isinstance(update.union, SketchParams):
                raise ProtocolError("union parameters of an unknown kind")
            self.union.keep(update.round, update.union)
            return
        if not self._chain_open:  # a new round: the last COUNTS vector used the segments
            self._chain = []
        self._chain_open = False
        applied = self.state.apply(update)
        if applied is not None:
            self.tips.apply(applied, self.state)

    def keep_segment(self) -> None:
        """The update just applied was chained: count the statistics of this state now (the
        next update changes it), as the first segment(s) of the next COUNTS vector."""
        st = self.state
        lay = st.count_layout()
        self._chain.append((lay, count_stats(st, self.tips, self.table.cls, self.table.sens, lay)))
        self._chain_open = True

    def released_columns(self) -> dict[str, list[str]]:
        """Generalized QID columns and unchanged kept columns, by name (identifiers dropped)."""
        part = self.tips.partition_of_rows(self.state)
        out: dict[str, list[str]] = {}
        for a, attr in enumerate(self.schema.spec.qids):
            tree = self.state.trees[a]
            labels = np.asarray(tree.labels, dtype=object)
            out[attr.name] = labels[self.state.pvals[part, a]].tolist()
        for name, col in self.table.kept.items():
            out[name] = col.tolist()
        return out

    def released_coded(self) -> dict[str, Column]:
        """The same columns as :meth:`released_columns`, dictionary-coded (labels + a small
        code per row): what the table writer takes, without a Python string per cell."""
        part = self.tips.partition_of_rows(self.state, small=True)
        out: dict[str, Column] = {}
        for a, attr in enumerate(self.schema.spec.qids):
            tree = self.state.trees[a]
            nodes = self.state.pvals[:, a].astype(smallest_uint(len(tree) - 1))
            out[attr.name] = Column(tree.labels, converted(self.table.spill, part, None, nodes))
        out.update(self.table.kept)
        return out
