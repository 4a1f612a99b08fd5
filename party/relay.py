"""The relay worker of one run: received vectors, one at a time and in arrival order.

A party acknowledges a Relay as soon as it has checked the header and stored the vector, so
that nothing in the ring waits for the rest of the ring.  This thread then does the slow part
for each vector -- wait for the leader's instructions it depends on, add the statistics, pass
the result to the successor -- and never lets an exception escape: a failure is recorded in
the run (:meth:`fedanon.party.run.PartyRun.process`), where the leader's ``Status`` call finds it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from fedanon.arrays import U64Array
from fedanon.tds.state import Phase

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Vector:
    """A secure-sum vector as it travels the ring (the header fields plus the data)."""

    round: int
    phase: Phase
    layout_hash: bytes
    instructions: int  # leader Instructions to apply before adding statistics
    data: U64Array
    deadline: float  # time.monotonic() by which the caller wants the sum
    chain: bytes = b""  # the chain of those instructions (the party's own must match)

    def with_data(self, data: U64Array) -> Vector:
        return Vector(
            self.round,
            self.phase,
            self.layout_hash,
            self.instructions,
            data,
            self.deadline,
            self.chain,
        )

    @property
    def label(self) -> str:
        return f"round {self.round} {self.phase.name.lower()}"


Forward = Callable[[Vector], None]  # to the ring successor, within vector.deadline


class RelayWorker:
    """One daemon thread; ``handle`` is called for every submitted vector, in order."""

    def __init__(self, name: str, handle: Callable[[Vector], None]) -> None:
        self._handle = handle
        self._queue: queue.SimpleQueue[Vector | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=f"relay-{name}", daemon=True)
        self._thread.start()

    def submit(self, vector: Vector) -> None:
        self._queue.put(vector)

    def stop(self) -> None:
        """Finish the vector in hand (its waits end when the run is closed), drop the rest."""
        self._queue.put(None)

    def _loop(self) -> None:
        while (vector := self._queue.get()) is not None:
            try:
                self._handle(vector)
            except Exception:  # handle records failures; this is a bug, never fatal
                log.exception("relay worker: %s", vector.label)
