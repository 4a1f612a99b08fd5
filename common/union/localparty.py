"""A party of a record release in this process: the engine's party
(:class:`fedanon.tds.party.EngineParty`: rows, TIPS, replica, SPLIT and COUNTS statistics)
composed with :class:`RecordRelease` -- the union's statistics (UNION:
:mod:`fedanon.union.count_union`; UNION_LENGTHS / UNION_SKETCH: :mod:`fedanon.union.sketch_union`)
-- and the released rows themselves (:meth:`LocalParty.released_columns`).  The centralized
run is one of these in a :class:`fedanon.tds.engine.LocalFederation`; a party daemon holds one
per run.
"""

from __future__ import annotations

import numpy as np

from fedanon.arrays import IntArray
from fedanon.errors import ProtocolError
from fedanon.io.columns import Column, smallest_uint
from fedanon.io.spill import converted
from fedanon.io.table import EncodedTable, Schema
from fedanon.tds.party import EngineParty
from fedanon.tds.ports import make_model
from fedanon.tds.state import CountLayout, Phase, SharedState, Update
from fedanon.tds.stats import count_stats
from fedanon.tds.tips import Tips
from fedanon.union.count_union import count_domain, local_counts
from fedanon.union.params import SketchParams
from fedanon.union.sketch_union import SketchShare, encode_released


def record_counts(
    state: SharedState, tips: Tips, table: EncodedTable, layout: CountLayout
) -> IntArray:
    """The COUNTS vector of a deterministic run: per new partition its totals by sensitive
    slot and child blocks, then the class blocks (:func:`fedanon.tds.stats.count_stats`)."""
    return count_stats(state, tips, table.cls, table.sens, layout)


class RecordRelease:
    """The party's side of a record release (:class:`fedanon.tds.party.PartyRelease`): the
    statistics of the record union, after the loop."""

    phases = frozenset({Phase.UNION, Phase.UNION_LENGTHS, Phase.UNION_SKETCH})

    def __init__(self) -> None:
        self.union = SketchShare()  # the sketch union, after the last round

    def stats(
        self, party: EngineParty, phase: Phase, round_: int, size: int, digest: bytes
    ) -> IntArray:
        st, spec = party.state, party.schema.spec
        if phase in (Phase.UNION_LENGTHS, Phase.UNION_SKETCH):
            return self.union.stats(
                phase,
                round_,
                size,
                digest,
                st,
                lambda: encode_released(spec, st, party.tips, party.table),
            )
        if round_ != st.round:
            raise ProtocolError(f"statistics asked for round {round_}, party is at {st.round}")
        domain = count_domain(spec, st)
        if domain is None or (domain.size, domain.digest) != (size, digest):
            raise ProtocolError("union layout differs between leader and party")
        return local_counts(domain, st, party.tips, party.table)

    def admit(self, party: EngineParty, update: Update) -> None:
        return None  # the decisions are the privacy model's, checked on the leader

    def keep(self, party: EngineParty, update: Update) -> None:
        if not isinstance(update.union, SketchParams):
            raise ProtocolError("union parameters of an unknown kind")
        self.union.keep(update.round, update.union)


class LocalParty(EngineParty):
    """A party's rows, its TIPS and its replica of the shared state, releasing records."""

    def __init__(self, schema: Schema, table: EncodedTable) -> None:
        n_class = len(table.class_labels)
        width = make_model(schema.spec).width  # counts per record: 1 + sensitive slots
        state = SharedState(schema.new_trees(), n_class, width - 1, schema.spec.score)
        tips = Tips(table.qid_leaves, table.n_rows, table.spill)
        self.records = RecordRelease()
        super().__init__(schema, table, state, tips, self.records, record_counts)

    @property
    def union(self) -> SketchShare:
        return self.records.union

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
