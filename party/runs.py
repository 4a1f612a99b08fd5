"""The runs a party daemon holds, their successor channels, and the reaper of orphans.

The channel to a run's ring successor is opened while the run is prepared (so the first
relay does not pay for TCP, TLS and HTTP/2 set-up) and kept for the next runs with the same
successor (name and address; at most :data:`MAX_PEER_CHANNELS`): over a WAN the three
round trips of a new connection would otherwise delay every run's first sum.  The TLS
certificate names the successor on every connection, and every Relay is checked against
its run's ring by the receiver, so a kept channel carries no more trust than a new one.

A leader that crashes never sends Abort or Finish; its run would keep the party's table in
memory forever.  A background thread drops every run the leader has not moved on for the
idle timeout, and every run open for longer than the maximum age, and frees its table and
its MPC port (:mod:`fedanon.party.mpcrun`).  Only progress restarts the idle clock
(:meth:`~fedanon.party.runstate.RunState.progress`: an instruction applied, statistics
computed, a coalition check asked), never a call as such: a hostile leader re-sending an
old ``Instruct``, repeating a ``Contribute`` or keeping a call waiting does not keep a run
(second review, R2).  A run is dropped even while calls work on it: their waits end
(``UnknownRun``), and no call waits longer than the daemon's maximum anyway
(:mod:`fedanon.party.callcap`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import grpc

from fedanon.errors import FedanonError, ProtocolError
from fedanon.io.sources import RowsRead
from fedanon.net.meta import close_channel
from fedanon.net.rpc import connect_soon
from fedanon.party.faults import UnknownRun
from fedanon.party.run import PartyRun
from fedanon.party.runstate import MAX_WAIT_S

log = logging.getLogger(__name__)
MAX_PEER_CHANNELS = 16  # successor channels kept between runs (least recently used closed)
PeerKey = tuple[str, str]  # a ring successor: (name, address)
__all__ = ["RunRegistry", "UnknownRun"]


class RunRegistry:
    def __init__(
        self,
        name: str,
        idle_timeout_s: float,
        max_age_s: float = float("inf"),
        max_wait_s: float = MAX_WAIT_S,
    ) -> None:
        if idle_timeout_s <= 0 or max_age_s <= 0 or max_wait_s <= 0:
            raise ValueError("idle timeout, maximum age and maximum wait must be positive")
        self.name = name
        self.idle_timeout_s = idle_timeout_s
        self.max_age_s = max_age_s
        self.max_wait_s = max_wait_s
        self._runs: dict[bytes, PartyRun] = {}
        self._channels: dict[PeerKey, grpc.Channel] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stats_bytes_sent = 0  # over every run this daemon has finished, aborted or reaped
        self._loading: dict[bytes, int] = {}  # runs whose Prepare is reading: records so far
        # every run id this daemon was asked to prepare: a run id is never used twice (a
        # replayed id would let an earlier run's signed pairwise keys verify again)
        self._seen: set[bytes] = set()
        # told of every run dropped, with why (the privacy ledger records its outcome)
        self.on_drop: Callable[[PartyRun, str], None] | None = None

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)

    def __contains__(self, run_id: bytes) -> bool:
        with self._lock:
            return run_id in self._runs

    def total_stats_bytes(self) -> int:
        """Bytes of statistics sent by this daemon: dropped runs and runs still held."""
        with self._lock:
            return self.stats_bytes_sent + sum(r.stats_bytes_sent for r in self._runs.values())

    def add(self, run: PartyRun) -> None:
        """The run is accepted: its age and idle clock start now (not when its table began
        to be read), its waits end by the daemon's maximum."""
        with self._lock:
            if run.run_id in self._runs:
                raise FedanonError(f"run {run.run_id.hex()[:8]} is already prepared")
            run.max_wait_s = self.max_wait_s
            run.opened = run.progressed = time.monotonic()
            self._runs[run.run_id] = run

    @contextmanager
    def loading(self, run_id: bytes) -> Iterator[RowsRead]:
        """While Prepare reads the table of ``run_id``: a callback for the records read so
        far, which :meth:`rows_read` answers the leader's ``Status`` with."""
        with self._lock:  # a repeated run id is refused before the ledger charges it
            if run_id in self._loading or run_id in self._runs:
                raise ProtocolError(f"run {run_id.hex()[:8]} is already prepared")
            if run_id in self._seen:
                raise ProtocolError(
                    f"run id {run_id.hex()[:8]} was used before: every run needs a new one"
                )
            self._seen.add(run_id)
            self._loading[run_id] = 0

        def rows(n: int) -> None:
            with self._lock:
                if run_id in self._loading:
                    self._loading[run_id] = n

        try:
            yield rows
        finally:
            with self._lock:
                self._loading.pop(run_id, None)

    def rows_read(self, run_id: bytes) -> int | None:
        """Records read so far by the Prepare of ``run_id`` (None if none is reading),
        rounded down to two significant digits: progress, not the table's exact size."""
        with self._lock:
            n = self._loading.get(run_id)
        if n is None:
            return None
        return round_down(n)

    def peek(self, run_id: bytes) -> PartyRun:
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            raise UnknownRun(f"unknown run {run_id.hex()[:8]}")
        return run

    @contextmanager
    def use(self, run_id: bytes) -> Iterator[PartyRun]:
        """The run, marked busy for the duration of the block.  A call is no progress: the
        idle clock is restarted by what the call does (:meth:`PartyRun.progress`)."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                raise UnknownRun(f"unknown run {run_id.hex()[:8]}")
            run.busy += 1
            run.last_used = time.monotonic()
        try:
            yield run
        finally:
            with self._lock:
                run.busy -= 1
                run.last_used = time.monotonic()

    def channel(self, peer: PeerKey, make: Callable[[], grpc.Channel]) -> grpc.Channel:
        """The daemon's channel to ring successor ``peer`` (name, address), made on first
        use and kept for later runs (the certificate is checked on every connection)."""
        with self._lock:
            chan = self._channels.pop(peer, None)
            if chan is None:
                chan = make()
            self._channels[peer] = chan  # most recently used last
            old = []
            while len(self._channels) > MAX_PEER_CHANNELS:
                old.append(self._channels.pop(next(iter(self._channels))))
        for c in old:
            c.close()
        return chan

    def forget(self, peer: PeerKey, chan: grpc.Channel) -> bool:
        """Close the channel ``chan`` to ``peer``, so that the next use makes a new one;
        False if another thread replaced it already."""
        with self._lock:
            if self._channels.get(peer) is not chan:
                return False
            del self._channels[peer]
        close_channel(chan)
        return True

    def connect(self, peer: PeerKey, make: Callable[[], grpc.Channel]) -> None:
        """Start connecting to ``peer`` in the background (no waiting); a channel kept from
        an earlier run is connected already."""
        connect_soon(self.channel(peer, make))

    def drop(self, run_id: bytes, why: str) -> PartyRun | None:
        """Forget a run (tables freed, channel closed); logs one line with its traffic."""
        with self._lock:
            run = self._runs.pop(run_id, None)
            if run is not None:
                self.stats_bytes_sent += run.stats_bytes_sent
        if run is not None and self.on_drop is not None:
            self.on_drop(run, why)
        if run is not None:  # only a finished run's MPC worker has a shutdown to pass
            run.close(finished=why == "finished")
        if run is not None:
            log.info(
                "run %s %s: %d bytes of statistics sent",
                run_id.hex()[:8],
                why,
                run.stats_bytes_sent,
            )
        return run

    def reap(self, now: float | None = None) -> list[bytes]:
        """Drop the runs the leader has not moved on for longer than the idle timeout, and
        those open for longer than the maximum age, calls in progress or not; their ids."""
        t = time.monotonic() if now is None else now
        with self._lock:
            idle = [r for r, run in self._runs.items() if t - run.progressed > self.idle_timeout_s]
            old = [
                r
                for r, run in self._runs.items()
                if r not in idle and t - run.opened > self.max_age_s
            ]
        for run_id in idle:
            log.warning(
                "run %s: nothing new from the leader (instruction, sum or check) for %gs, "
                "dropping it",
                run_id.hex()[:8],
                self.idle_timeout_s,
            )
            self.drop(run_id, "reaped")
        for run_id in old:
            log.warning(
                "run %s: open for longer than the maximum age (%gs), dropping it",
                run_id.hex()[:8],
                self.max_age_s,
            )
            self.drop(run_id, "reaped")
        return idle + old

    # background reaper -----------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        interval = min(max(min(self.idle_timeout_s, self.max_age_s) / 4, 0.05), 30.0)

        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.reap()
                except Exception:  # the reaper must never die
                    log.exception("reaper")

        self._thread = threading.Thread(target=loop, name="run-reaper", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the reaper and drop every run."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            ids = list(self._runs)
        for run_id in ids:
            self.drop(run_id, "dropped at shutdown")
        with self._lock:
            chans, self._channels = list(self._channels.values()), {}
        for chan in chans:
            close_channel(chan)


def round_down(n: int, digits: int = 2) -> int:
    """``n`` rounded down to ``digits`` significant digits (1,234,567 -> 1,200,000)."""
    if n <= 0:
        return 0
    scale: int = 10 ** max(len(str(n)) - digits, 0)
    return n // scale * scale
