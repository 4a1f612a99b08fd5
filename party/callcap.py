"""No call the party daemon serves outlasts the daemon's maximum wait, whatever deadline the
caller gave it (second review, R2).

A call's own waits -- for an instruction, a sum, the keys, a coalition check -- end by
:meth:`CallCap.deadline`: the caller's deadline, at most ``[party] max_wait_seconds`` from
now (:attr:`fedanon.party.config.PartyConfig.max_wait_s`).  A call can also be held inside
gRPC, where none of those waits runs: a response stream the caller never reads, a request
stream it never finishes.  :meth:`CallCap.arm` hands every call whose deadline is later than
the maximum to one watchdog thread, which cancels it :data:`GRACE_S` after the maximum (a
wait ends first and answers with its own failure; the grace is for that answer to go out).
So a days-long deadline holds neither a server thread nor the run (its table, its MPC port)
that the call works on.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time

import grpc

log = logging.getLogger(__name__)
GRACE_S = 5.0  # after the maximum wait, before a call still running is cancelled


class CallCap:
    """The daemon's maximum wait per call, and the watchdog that enforces it."""

    def __init__(self, max_wait_s: float, grace_s: float = GRACE_S) -> None:
        if max_wait_s <= 0 or grace_s < 0:
            raise ValueError("the maximum wait must be positive")
        self.max_wait_s = max_wait_s
        self.grace_s = grace_s
        self.cancelled = 0  # calls this watchdog cancelled
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []  # (when, key); keys of ended calls are stale
        self._calls: dict[int, grpc.ServicerContext] = {}
        self._keys = itertools.count()
        self._thread: threading.Thread | None = None
        self._stop = False

    def deadline(self, context: grpc.ServicerContext, default: float) -> float:
        """The time.monotonic() by which this call's waits end: its deadline (``default``
        seconds if it has none), at most the maximum wait from now."""
        left = context.time_remaining()
        return time.monotonic() + min(default if left is None else left, self.max_wait_s)

    def arm(self, context: grpc.ServicerContext) -> None:
        """Cancel the call if it still runs :data:`GRACE_S` after the maximum wait (a call
        whose own deadline comes before that is ended by gRPC itself)."""
        limit = self.max_wait_s + self.grace_s
        left = context.time_remaining()
        if left is not None and left <= limit:
            return
        key = next(self._keys)
        with self._cond:
            if self._stop:
                return
            self._calls[key] = context
            heapq.heappush(self._heap, (time.monotonic() + limit, key))
            if len(self._heap) > 64 and len(self._heap) > 2 * len(self._calls):
                self._heap = [e for e in self._heap if e[1] in self._calls]  # ended calls
                heapq.heapify(self._heap)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="call-cap", daemon=True)
                self._thread.start()
            self._cond.notify()
        if not context.add_callback(lambda: self._ended(key)):
            self._ended(key)  # it ended already

    def _ended(self, key: int) -> None:
        with self._cond:
            self._calls.pop(key, None)

    def pending(self) -> int:
        """Calls armed that have not ended."""
        with self._cond:
            return len(self._calls)

    def _loop(self) -> None:
        while True:
            due: list[grpc.ServicerContext] = []
            with self._cond:
                if self._stop:
                    return
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    ctx = self._calls.pop(heapq.heappop(self._heap)[1], None)
                    if ctx is not None:
                        due.append(ctx)
                if not due:
                    self._cond.wait(self._heap[0][0] - now if self._heap else None)
                    continue
            for ctx in due:
                try:
                    if ctx.is_active():
                        self.cancelled += 1
                        ctx.cancel()  # type: ignore[no-untyped-call]
                        log.warning(
                            "a call was still running %gs after the daemon's maximum wait "
                            "(max_wait_seconds = %g): cancelled",
                            self.grace_s,
                            self.max_wait_s,
                        )
                except Exception:  # the watchdog must never die
                    log.exception("call cap")

    def close(self) -> None:
        """Stop the watchdog (calls still running end at their own deadlines)."""
        with self._cond:
            self._stop = True
            self._calls.clear()
            self._heap = []
            thread, self._thread = self._thread, None
            self._cond.notify()
        if thread is not None:
            thread.join(timeout=5)
