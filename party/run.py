"""Per-run state of a party daemon: its rows, its replica, its ring neighbours, the union.

One :class:`PartyRun` per run id; nothing in here talks gRPC (:mod:`fedanon.party.service`
hands in the function that sends a vector to the successor); errors are :mod:`fedanon.errors`
types.  Ring sums run in the background (:mod:`fedanon.party.relay`): :meth:`PartyRun.receive`
stores a vector (Relay is acknowledged at once), :meth:`PartyRun.process` -- on the run's
worker thread -- waits for the leader's instructions the vector depends on, adds the
statistics and forwards; a failure is recorded (:attr:`PartyRun.failure`) for ``Status``.
Pairwise sums: :mod:`fedanon.party.pairsum`.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives.asymmetric import ec, x25519

from fedanon.arrays import IntArray, U64Array
from fedanon.dp.spec import DPParams
from fedanon.errors import DataError, FedanonError, ProtocolError
from fedanon.io.release import output_columns
from fedanon.model.spec import RunSpec
from fedanon.party.faults import Failure, PeerFailed, TimedOut, UnknownRun, classify
from fedanon.party.relay import Forward, RelayWorker, Vector
from fedanon.security import mixnet
from fedanon.security.securesum import add_share
from fedanon.tds.party import EngineParty
from fedanon.tds.state import Phase, Update
from fedanon.union.localparty import LocalParty

if TYPE_CHECKING:
    from fedanon.ledger.transcript import Transcript
    from fedanon.party.pairstate import PairState

log = logging.getLogger(__name__)
CACHE_ROUNDS = 4  # (round, phase) results kept for idempotent retries
WAIT_SLICE_S = 0.5  # waits re-check cancellation at least this often


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
class PartyRun:
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
    last_used: float = field(default_factory=time.monotonic)
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

    # waiting ----------------------------------------------------------------------------
    def wait(self, ready: Callable[[], bool], deadline: float, what: str) -> None:
        """Wait (holding ``cond``) until ``ready()``; raise if the run is closed, a failure
        was recorded, or ``deadline`` (time.monotonic) passes."""
        while not ready():
            if self.closed:
                raise UnknownRun(f"run {self.run_id.hex()[:8]} was dropped")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimedOut(f"{what} did not come within the deadline")
            self.cond.wait(min(left, WAIT_SLICE_S))

    # instructions -----------------------------------------------------------------------
    def instruct(
        self, seq: int, update: Update, deadline: float, chained: bool = False, ahead: bool = True
    ) -> bool:
        """Apply the leader's instruction number ``seq`` (0, 1, ...) in order; a repeat is a
        no-op (returns False).  ``chained``: another specialization of the same round
        follows; the statistics of the state right after this one are counted now (the
        first segment(s) of the next COUNTS vector).  ``ahead``: compute the next statistics
        in the background (not for a decision carried in a pairwise ``Contribute``)."""
        with self.cond:
            self.wait(lambda: self.instructions >= seq, deadline, f"instruction {seq - 1}")
            if seq < self.instructions:
                return False
            self._settle_ahead()  # the state must not change under a computation ahead
            if chained and (self.dp is not None or type(self.party) is not LocalParty):
                raise ProtocolError("a chained instruction in a run that has no such rounds")
            self.party.apply(update)
            if self.transcript is not None:  # the ledger's chain of what the leader decided
                self.transcript.applied(update, chained)
            if chained:
                self.party.keep_segment()
            self.instructions += 1
            if update.union is None and not chained and ahead:
                self.speculate()
            self.cond.notify_all()
        return True

    # statistics ahead of the vector --------------------------------------------------------
    def speculate(self) -> None:
        """Start computing the count statistics the leader will ask for next, in the
        background, so that a vector finds them ready instead of waiting for them (in the
        ring every party would otherwise compute in turn, one after the other).

        Only where the next sum is certainly a count sum of the current round: an LKC run,
        not ended, no split pending (the rule of :func:`fedanon.tds.engine.run`: counts follow
        every applied decision once no split is pending).  The computation is the one
        :meth:`relay` would make -- same state, same call, once -- and its result is used
        only by the vector of exactly that round, size and layout."""
        party = self.party
        st = party.state
        if self.dp is not None or type(party) is not LocalParty or st.ended:
            return
        if st.pending_splits():
            return
        size, digest = party.counts_key()
        key = (st.round, size, digest)
        fut: Future[IntArray] = Future()

        def compute() -> None:
            try:
                fut.set_result(party.stats(Phase.COUNTS, key[0], key[1], key[2]))
            except BaseException as exc:
                fut.set_exception(exc)

        self.ahead = (key, fut)
        threading.Thread(target=compute, name="stats-ahead", daemon=True).start()

    def _settle_ahead(self) -> None:
        """Wait for a computation ahead still running (its result stays usable)."""
        if self.ahead is not None:
            self.ahead[1].exception()  # waits; an error surfaces when the result is used

    def statistics(self, phase: Phase, round_: int, size: int, digest: bytes) -> IntArray:
        """This party's statistics for a sum: computed ahead if they were, else now.
        (Holding ``cond``.)  A free re-run whose state left the released runs' path
        reserves a new release first, or is refused (the ledger's transcript)."""
        if self.transcript is not None:
            self.transcript.sending(phase.name, round_, size, digest)
        ahead, self.ahead = self.ahead, None
        if ahead is not None:
            (a_round, a_size, a_digest), fut = ahead
            if phase == Phase.COUNTS and round_ == a_round:
                stats = fut.result()
                if (a_size, a_digest) != (size, digest):
                    raise ProtocolError("statistics layout differs between leader and party")
                self.ahead_used += 1
                return stats
            fut.exception()  # another sum than foreseen: never two computations at once
        return self.party.stats(phase, round_, size, digest)

    def wait_ended(self, deadline: float) -> None:  # until the final instruction is applied
        with self.cond:
            self.wait(lambda: self.party.state.ended, deadline, "the final instruction")

    # secure sum -------------------------------------------------------------------------
    def receive(self, vector: Vector, start: Callable[[], RelayWorker]) -> None:
        """Store a vector for the worker (started by ``start`` on first use).

        A repeat of a (round, phase) already received is acknowledged and dropped: it is
        never added to twice, and a different vector under the same header is refused.
        """
        key = (vector.round, vector.phase)
        with self.lock:
            if self.closed:
                raise UnknownRun(f"run {self.run_id.hex()[:8]} was dropped")
            if self.failure is not None:
                raise PeerFailed(self.failure)
            seen = self.received.get(key)
            if seen is not None:
                if seen != (vector.layout_hash, vector.data.size):
                    raise ProtocolError(f"repeat of {vector.label} does not match the first")
                log.info("run %s: repeat of %s", self.run_id.hex()[:8], vector.label)
                return
            self.received[key] = (vector.layout_hash, vector.data.size)
            if self.worker is None:
                self.worker = start()
            self.worker.submit(vector)

    def process(self, vector: Vector, forward: Forward) -> None:
        """The worker's step: wait for the instructions, add, forward; record a failure."""
        try:
            with self.cond:
                if self.failure is not None:
                    return
                need = vector.instructions
                what = f"instruction {need - 1}"
                self.wait(lambda: self.instructions >= need, vector.deadline, what)
                if self.instructions != need:
                    raise ProtocolError(
                        f"{vector.label} was computed after {need} instructions, this party "
                        f"has applied {self.instructions}"
                    )
            self.relay(vector, forward)
        except FedanonError as exc:
            self.record(classify(exc, self.name, "Relay"))
        except Exception as exc:  # a bug: still tell the leader, never die silently
            log.exception("run %s: relay", self.run_id.hex()[:8])
            self.record(classify(FedanonError(type(exc).__name__), self.name, "Relay"))
        finally:
            self.last_used = time.monotonic()

    def record(self, failure: Failure) -> None:
        with self.cond:
            if self.failure is None:
                self.failure = failure
            self.cond.notify_all()

    def relay(self, vector: Vector, forward: Forward) -> None:
        """Add this party's statistics and pass the vector on (or keep it, if last).

        A retry of a (round, phase) already processed forwards the cached vector again and
        never adds the statistics twice.
        """
        key = (vector.round, vector.phase)
        with self.cond:
            cached = self.results.get(key)
            if cached is not None:
                if cached[0] != vector.layout_hash or cached[1].size != vector.data.size:
                    raise ProtocolError(f"retry of {vector.label} does not match the first try")
                out = cached[1]
                log.info("run %s: retry of %s", self.run_id.hex()[:8], vector.label)
            else:
                v = vector
                stats = self.statistics(v.phase, v.round, v.data.size, v.layout_hash)
                out = add_share(vector.data, stats, in_place=True)  # the received copy
                self.results[key] = (vector.layout_hash, out)
                while len(self.results) > CACHE_ROUNDS:
                    self.results.popitem(last=False)
                if self.successor is None:
                    self.done += 1
                    self.cond.notify_all()  # a Collect may be waiting for it
        if self.successor is not None:
            forward(vector.with_data(out))
            with self.lock:
                self.stats_bytes_sent += out.nbytes
                if cached is None:
                    self.done += 1

    def collected(
        self, round_: int, phase: Phase, deadline: float, active: Callable[[], bool]
    ) -> tuple[bytes, U64Array]:
        """(layout hash, sum) of a round, for the leader, as soon as it exists."""
        if self.successor is not None or self.pair is not None:
            raise ProtocolError("only the last party of a ring run delivers the sum")
        key = (round_, phase)
        with self.cond:

            def ready() -> bool:
                if self.failure is not None:
                    raise PeerFailed(self.failure)
                if not active():
                    raise TimedOut("the leader cancelled Collect")
                return key in self.results

            self.wait(ready, deadline, f"the sum of round {round_} {phase.name.lower()}")
            cached = self.results[key]
            self.stats_bytes_sent += cached[1].nbytes
        return cached

    def status(self) -> RunStatus:  # no lock: a busy worker may hold it for seconds
        return RunStatus(self.instructions, len(self.received), self.done, self.failure)

    def close(self) -> None:
        """The run is dropped: every wait ends, the worker stops."""
        with self.cond:
            self.closed = True
            worker, self.worker = self.worker, None
            self.cond.notify_all()
        if worker is not None:
            worker.stop()

    # union ------------------------------------------------------------------------------
    def _records_allowed(self) -> None:
        if self.dp is not None:
            raise ProtocolError(
                "a DP run releases noisy counts only: this party sends no records (no union)"
            )

    def union_key(self, tls_key: ec.EllipticCurvePrivateKey, cert_pem: bytes) -> mixnet.SignedKey:
        self._records_allowed()
        with self.lock:
            if self.mix_key is None:
                self.mix_key, self.mix_public = mixnet.generate_keypair()
            raw = self.mix_public
        return mixnet.sign_public_key(self.name, raw, self.run_id, tls_key, cert_pem)

    def union_batch(
        self, keys: Sequence[mixnet.SignedKey], ca_pem: bytes, pad_size: int
    ) -> list[bytes]:
        """Verify every hop key, pad and onion-wrap this party's released records."""
        self._records_allowed()
        if self.transcript is not None:  # records leave: the ledger's check, as for statistics
            self.transcript.sending("MIXNET", self.party.state.round, 0, b"")
        names = [p.name for p in self.ring] + [self.leader]
        if len(keys) != len(names):
            raise ProtocolError(f"expected {len(names)} mix keys, got {len(keys)}")
        hop_keys = [
            mixnet.verify_signed_key(k, ca_pem, n, self.run_id)
            for k, n in zip(keys, names, strict=True)
        ]
        if self.mix_key is None:
            raise ProtocolError("UnionBatch before UnionKey")
        t0 = time.perf_counter()
        if not isinstance(self.party, LocalParty):  # only a record release has records
            raise ProtocolError("this party's run releases no records (no union)")
        cols = self.party.released_columns()
        order = output_columns(self.spec)
        rows = list(zip(*(cols[c] for c in order), strict=True))
        secrets.SystemRandom().shuffle(rows)
        n_hops = len(self.ring)
        own: list[set[bytes]] = [set() for _ in range(n_hops)]
        out: list[bytes] = []
        for row in rows:
            try:
                plain = mixnet.encode_record(row, pad_size)
            except ProtocolError as exc:  # a record's size: the leader learns the fixed
                raise DataError(  # sentence only (this text stays in the hospital's log)
                    f"a released record does not fit the pad ({exc}); raise [run] "
                    "max_field_bytes in the federation config"
                ) from None
            layers = mixnet.wrap_layers(plain, hop_keys, self.run_id)
            for i in range(n_hops):
                own[i].add(layers[i])
            out.append(layers[0])
        self.own_layers = [frozenset(s) for s in own]
        self.pad_size = pad_size
        log.info(
            "run %s: wrapped %d records in %.2fs",
            self.run_id.hex()[:8],
            len(out),
            time.perf_counter() - t0,
        )
        return out

    def hop_size(self, hop: int) -> int:
        """Ciphertext size as hop ``hop`` receives it (``hop`` = number of layers stripped)."""
        return mixnet.ciphertext_size(self.pad_size, len(self.ring) + 1 - hop)

    def mix(self, hop: int, batch: Sequence[bytes], expected: int) -> list[bytes]:
        if hop != self.position:
            raise ProtocolError(f"party {self.name} is hop {self.position}, asked for hop {hop}")
        if self.mix_key is None or not self.own_layers:
            raise ProtocolError("Mix before UnionBatch")
        t0 = time.perf_counter()
        out = mixnet.strip_and_shuffle(
            batch, self.mix_key, self.run_id, hop, expected, own=self.own_layers[hop]
        )
        log.info(
            "run %s: mixed %d records in %.2fs",
            self.run_id.hex()[:8],
            len(out),
            time.perf_counter() - t0,
        )
        return out
