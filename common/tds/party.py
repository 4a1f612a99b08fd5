"""A party's side of the round loop in this process: its rows, its TIPS, its replica of the
shared state and the statistics of the loop's phases (SPLIT, COUNTS: :mod:`fedanon.tds.stats`).

What the run publishes is the party's :class:`PartyRelease` (a port, like the leader's
:class:`fedanon.tds.ports.Releaser`): the statistics of the phases after the loop, and the
checks it makes on the leader's updates.  Records (:class:`fedanon.union.localparty.
LocalParty`: generalized rows and their union) or noisy counts (:class:`fedanon.dp.party.
DPParty`: the count of every final group).  The centralized run is one of these in a
:class:`fedanon.tds.engine.LocalFederation`; a party daemon holds one per run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from fedanon.arrays import IntArray
from fedanon.errors import ProtocolError
from fedanon.io.table import EncodedTable, Schema
from fedanon.tds.decide import combined_key
from fedanon.tds.state import CountLayout, Phase, SharedState, Update
from fedanon.tds.stats import split_stats
from fedanon.tds.tips import Tips

# this party's COUNTS vector of a layout of the state (what the state's layout asks for)
Counter = Callable[[SharedState, Tips, EncodedTable, CountLayout], IntArray]


class PartyRelease(Protocol):
    """A party's side of what its run publishes."""

    phases: frozenset[Phase]  # the statistics phases after the loop it answers

    def stats(
        self, party: EngineParty, phase: Phase, round_: int, size: int, digest: bytes
    ) -> IntArray:
        """This party's statistics of a release phase (it checks round and layout)."""
        ...

    def admit(self, party: EngineParty, update: Update) -> None:
        """Refuse (ProtocolError, InputError) a decision this release cannot follow, before
        it changes the state."""
        ...

    def keep(self, party: EngineParty, update: Update) -> None:
        """An update that carries parameters of a release phase (``update.union``)."""
        ...


class EngineParty:
    """A party's rows, its TIPS and its replica of the shared state, composed with what its
    run publishes (``release``) and how it counts the state's COUNTS layout (``counter``)."""

    def __init__(
        self,
        schema: Schema,
        table: EncodedTable,
        state: SharedState,
        tips: Tips,
        release: PartyRelease,
        counter: Counter,
    ) -> None:
        self.schema = schema
        self.table = table
        self.state = state
        self.tips = tips
        self.release = release
        self.counter = counter
        # statistics counted right after chained updates: the next COUNTS vector's first
        # segments (see fedanon.tds.decide)
        self._chain: list[tuple[CountLayout, IntArray]] = []
        self._chain_open = False

    def counts_key(self) -> tuple[int, bytes]:
        """(size, digest) of this party's next COUNTS vector."""
        return combined_key([*(lay for lay, _ in self._chain), self.state.count_layout()])

    def stats(self, phase: Phase, round_: int, size: int, digest: bytes) -> IntArray:
        st = self.state
        if phase in self.release.phases:
            return self.release.stats(self, phase, round_, size, digest)
        if round_ != st.round:
            raise ProtocolError(f"statistics asked for round {round_}, party is at {st.round}")
        if phase == Phase.SPLIT:
            layout = st.split_layout()
            check = (layout.size, layout.digest)
            vec = (
                None
                if check != (size, digest)
                else split_stats(st, self.tips, self.table.cls, layout)
            )
        elif phase == Phase.COUNTS:
            clayout = st.count_layout()
            check = self.counts_key()
            vec = (
                None
                if check != (size, digest)
                else self.counter(st, self.tips, self.table, clayout)
            )
            if vec is not None and self._chain:
                vec = np.concatenate([*(seg for _, seg in self._chain), vec])
        else:
            raise ProtocolError(f"statistics phase {phase.name} is not part of this run")
        if vec is None:
            raise ProtocolError("statistics layout differs between leader and party")
        return vec

    def apply(self, update: Update) -> None:
        if update.union is not None:  # parameters of a release phase, no decision
            self.release.keep(self, update)
            return
        self.release.admit(self, update)
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
        self._chain.append((lay, self.counter(st, self.tips, self.table, lay)))
        self._chain_open = True
