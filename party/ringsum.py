"""The ring sum at a party (TKDD 2010, Sec. 5.2): Relay stores a vector, the run's worker
adds this party's statistics and forwards it; the last party keeps the sum for Collect.

:meth:`RingSum.receive` stores a vector (Relay is acknowledged at once);
:meth:`RingSum.process` -- on the run's worker thread (:mod:`fedanon.party.relay`) -- waits
for the leader's instructions the vector depends on, adds the statistics and forwards; a
failure is recorded (:attr:`~fedanon.party.runstate.RunState.failure`) for ``Status``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from fedanon.arrays import U64Array
from fedanon.errors import FedanonError, ProtocolError
from fedanon.party.ahead import StatsAhead
from fedanon.party.faults import PeerFailed, TimedOut, UnknownRun, classify
from fedanon.party.relay import Forward, RelayWorker, Vector
from fedanon.security.securesum import add_share
from fedanon.tds.state import Phase

log = logging.getLogger(__name__)
CACHE_ROUNDS = 4  # (round, phase) results kept for idempotent retries


class RingSum(StatsAhead):
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
                if vector.chain != self.chain:  # another decision than this party applied
                    raise ProtocolError(
                        f"{vector.label} was computed after other instructions than this "
                        "party applied"
                    )
            self.relay(vector, forward)
        except FedanonError as exc:
            self.record(classify(exc, self.name, "Relay"))
        except Exception as exc:  # a bug: still tell the leader, never die silently
            log.exception("run %s: relay", self.run_id.hex()[:8])
            self.record(classify(FedanonError(type(exc).__name__), self.name, "Relay"))

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
                self.progress()  # new statistics (a retry, answered from the cache, is none)
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
