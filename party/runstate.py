"""The state of one run at a party daemon (:class:`RunState`), its waits and its end.

The behaviour is layered on it by concept, each in its own module, up to
:class:`fedanon.party.run.PartyRun`: the statistics computed ahead of a vector
(:mod:`fedanon.party.ahead`), the ring sum (:mod:`fedanon.party.ringsum`), the union of the
released records through the mixnet (:mod:`fedanon.party.unionrun`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives.asymmetric import x25519

from fedanon.arrays import IntArray, U64Array
from fedanon.dp.spec import DPParams
from fedanon.errors import ProtocolError
from fedanon.model.spec import RunSpec
from fedanon.party.faults import Failure, TimedOut, UnknownRun
from fedanon.party.relay import RelayWorker
from fedanon.security.keyagree import CHAIN_START
from fedanon.tds.party import EngineParty
from fedanon.tds.state import Phase

if TYPE_CHECKING:
    from collections.abc import Callable

    from fedanon.ledger.transcript import Transcript
    from fedanon.party.mpcrun import MpcRun
    from fedanon.party.pairstate import PairState

WAIT_SLICE_S = 0.5  # waits re-check cancellation at least this often
MAX_WAIT_S = 600.0  # a wait ends this long after it began at the latest ([party] max_wait_seconds)


@dataclass(frozen=True)
class Peer:
    name: str
    address: str


@dataclass(frozen=True)
class RunStatus:
    instructions: int
    received: int
    done: int
    failure: Failure | None


@dataclass
class RunState:
    """What a party keeps of one run; the behaviour is in the subclasses up to
    :class:`fedanon.party.run.PartyRun`."""

    run_id: bytes
    name: str
    spec: RunSpec
    party: EngineParty  # LocalParty (records) or a DP party (counts only)
    ring: tuple[Peer, ...]
    position: int
    leader: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    results: OrderedDict[tuple[int, Phase], tuple[bytes, U64Array]] = field(
        default_factory=OrderedDict
    )
    mix_key: x25519.X25519PrivateKey | None = None
    mix_public: bytes = b""
    pad_size: int = 0
    last_used: float = field(default_factory=time.monotonic)  # the last call (any)
    # the last progress: an instruction applied, statistics computed, a check asked; only
    # this refreshes the idle clock (a re-sent old Instruct or a repeated call does not)
    progressed: float = field(default_factory=time.monotonic)
    opened: float = field(default_factory=time.monotonic)  # accepted (the run's age)
    max_wait_s: float = MAX_WAIT_S  # the daemon's maximum wait (set when the run is added)
    own_layers: list[frozenset[bytes]] = field(default_factory=list)
    stats_bytes_sent: int = 0  # statistics vectors this party sent (relay + collect)
    busy: int = 0  # RPCs working on this run right now (never reaped while busy)
    instructions: int = 0  # leader Instructions applied
    received: dict[tuple[int, Phase], tuple[bytes, int]] = field(default_factory=dict)
    done: int = 0  # vectors processed (statistics added, forwarded)
    failure: Failure | None = None  # recorded by the relay worker
    closed: bool = False
    worker: RelayWorker | None = None
    dp: DPParams | None = None  # a DiffGen run: noisy counts only, no record leaves the party
    # the next round's count statistics, computed as soon as the instruction before them is
    # applied (see :meth:`speculate`): (round, size, layout digest) and the result
    ahead: tuple[tuple[int, int, bytes], Future[IntArray]] | None = None
    ahead_used: int = 0  # vectors that took their statistics from ``ahead``
    pair: PairState | None = None  # a pairwise run (fedanon.party.pairsum): no Relay, no Collect
    # a non-DP run's instructions and sends, for the ledger (fedanon.ledger.transcript)
    transcript: Transcript | None = None
    mpc: MpcRun | None = None  # [privacy] m > 0: this hospital's MPC worker (party.mpcrun)
    # the instructions applied so far (fedanon.security.keyagree.chain_applied): the state
    # reached; binds the pairwise masks, and no state's statistics are computed twice
    chain: bytes = CHAIN_START
    stats_sent: set[bytes] = field(default_factory=set)  # (chain, phase, size, layout) hashes

    def __post_init__(self) -> None:
        self.cond: threading.Condition = threading.Condition(self.lock)

    @property
    def predecessor(self) -> tuple[str, str]:
        """(name, role) of the only identity that may Relay to this party."""
        if self.pair is not None:
            raise ProtocolError("this run sums pairwise: hospitals never relay to each other")
        if self.position == 0:
            return self.leader, "leader"
        return self.ring[self.position - 1].name, "party"

    @property
    def successor(self) -> Peer | None:
        return self.ring[self.position + 1] if self.position + 1 < len(self.ring) else None

    @property
    def downstream(self) -> frozenset[str]:
        """The parties after this one: the only ones a successor's report may name."""
        return frozenset(p.name for p in self.ring[self.position + 1 :])

    def progress(self) -> None:
        """The leader moved the run on: its idle clock starts again."""
        self.progressed = time.monotonic()

    # waiting ----------------------------------------------------------------------------
    def wait(self, ready: Callable[[], bool], deadline: float, what: str) -> None:
        """Wait (holding ``cond``) until ``ready()``; raise if the run is closed, a failure
        was recorded, or ``deadline`` (time.monotonic) passes -- at most the daemon's
        maximum wait from now, whatever deadline the caller gave."""
        deadline = min(deadline, time.monotonic() + self.max_wait_s)
        while not ready():
            if self.closed:
                raise UnknownRun(f"run {self.run_id.hex()[:8]} was dropped")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimedOut(f"{what} did not come within the deadline")
            self.cond.wait(min(left, WAIT_SLICE_S))

    def record(self, failure: Failure) -> None:
        with self.cond:
            if self.failure is None:
                self.failure = failure
            self.cond.notify_all()

    def status(self) -> RunStatus:  # no lock: a busy worker may hold it for seconds
        return RunStatus(self.instructions, len(self.received), self.done, self.failure)

    def close(self, finished: bool = False) -> None:
        """The run is dropped: every wait ends, the worker stops.  ``finished``: the leader
        ended it (its MPC worker passes MPyC's shutdown with the others'; else it is
        killed at once, as the others' may never come)."""
        with self.cond:
            self.closed = True
            worker, self.worker = self.worker, None
            mpc, self.mpc = self.mpc, None
            self.cond.notify_all()
        if worker is not None:
            worker.stop()
        if mpc is not None:  # the run's MPC worker ends with the run
            mpc.close(finished)
