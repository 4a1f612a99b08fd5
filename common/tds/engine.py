"""The round loop: statistics -> sum -> decide -> apply, with the sum injected.

Centralized anonymization is this loop with one party (:class:`fedanon.union.localparty.
LocalParty`) and a plain sum; the federation runs the same loop with a secure sum and the
parties in other processes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from fedanon.arrays import IntArray
from fedanon.tds.decide import Decider, Specialization
from fedanon.tds.state import Phase, SharedState, Update

log = logging.getLogger(__name__)


class Federation(Protocol):
    """What the leader needs from the parties."""

    def sum(self, phase: Phase, round_: int, size: int, digest: bytes) -> IntArray: ...

    def broadcast(self, update: Update, *, chained: bool = False) -> None:
        """``chained``: another specialization of the same round follows; the next COUNTS
        vector begins with the statistics of the state right after this update."""
        ...


class Party(Protocol):
    """What an in-process federation needs from a party (:class:`fedanon.union.localparty.
    LocalParty`: a party's rows, its TIPS and its replica of the shared state)."""

    def stats(self, phase: Phase, round_: int, size: int, digest: bytes) -> IntArray: ...

    def apply(self, update: Update) -> None: ...

    def keep_segment(self) -> None: ...


class LocalFederation:
    """Plain sum over in-process parties (one party = the centralized algorithm)."""

    def __init__(self, parties: Sequence[Party]) -> None:
        self.parties = list(parties)

    def sum(self, phase: Phase, round_: int, size: int, digest: bytes) -> IntArray:
        total = np.zeros(size, dtype=np.int64)
        for p in self.parties:
            total += p.stats(phase, round_, size, digest)
        return total

    def broadcast(self, update: Update, *, chained: bool = False) -> None:
        for p in self.parties:
            p.apply(update)
            if chained:
                p.keep_segment()


@dataclass(frozen=True)
class RunResult:
    decider: Decider
    specializations: tuple[Specialization, ...]
    rounds: int  # specializations applied (the shared state's round counter)
    seconds: float
    count_sums: int = 0  # COUNTS rounds (fewer than ``rounds`` when some decided several)


Progress = Callable[[int, Specialization | None], None]


def run(decider: Decider, fed: Federation, progress: Progress | None = None) -> RunResult:
    """Top-down specialization until no candidate is valid (Algorithm 1 / 2)."""
    t0 = time.perf_counter()
    st: SharedState = decider.state
    sums = 0
    while True:
        if st.pending_splits():
            layout = st.split_layout()
            vec = fed.sum(Phase.SPLIT, st.round, layout.size, layout.digest)
            upd = decider.on_split(vec)
            fed.broadcast(upd)
            decider.apply(upd)
        size, digest = decider.count_key()
        vec = fed.sum(Phase.COUNTS, st.round, size, digest)
        sums += 1
        upds = decider.decide(vec)
        done = len(decider.history) - sum(u.best is not None for u in upds)
        for i, upd in enumerate(upds):
            chained = i + 1 < len(upds)  # every party counts this state before the next
            if chained:
                fed.broadcast(upd, chained=True)
            else:  # a Federation of one specialization per round needs no keyword
                fed.broadcast(upd)
            decider.apply(upd)
            if chained:
                decider.keep_segment()
            if progress is not None:
                progress(st.round, decider.history[done + i] if upd.best is not None else None)
        if upds[-1].end:
            break
    return RunResult(decider, tuple(decider.history), st.round, time.perf_counter() - t0, sums)
