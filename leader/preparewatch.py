"""While the hospitals load their tables: the leader shows how far each one got.

Prepare is one call per party and a party reads its whole table inside it -- seconds for a
small table, minutes for tens of millions of rows.  Once a Prepare has been outstanding for
:data:`FIRST_S` seconds, :class:`ProgressWatch` asks every party still preparing for its
``Status`` (deadline :data:`STATUS_TIMEOUT_S`) and prints one plain line on stderr, then
again every :data:`EVERY_S` seconds.  A party answers with the records it has read so far,
rounded down to two significant digits: a count, never a value.  A small table costs
nothing: no Status call is made before :data:`FIRST_S`.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Sequence

import grpc

from fedanon.io.progress import to_stderr
from fedanon.leader.links import Link
from fedanon.net import rpc
from fedanon.pb.fedanon.v1 import party_pb2 as pb

log = logging.getLogger(__name__)
FIRST_S = 2.0  # no progress line (and no Status call) for a Prepare shorter than this
EVERY_S = 5.0  # then one line every this many seconds
STATUS_TIMEOUT_S = 2.0

__all__ = ["EVERY_S", "FIRST_S", "ProgressWatch"]


class ProgressWatch:
    """Waits for the Prepare calls to finish, printing the parties' progress meanwhile."""

    def __init__(
        self,
        run_id: bytes,
        links: Sequence[Link],
        deadline: rpc.Deadline,
        emit: Callable[[str], None] | None = None,
        first_s: float = FIRST_S,
        every_s: float = EVERY_S,
    ) -> None:
        self.run_id = run_id
        self.links = list(links)
        self.deadline = deadline
        self.emit = emit or to_stderr("fedanon")
        self.every_s = every_s
        self.t0 = time.monotonic()
        self.next = self.t0 + first_s
        self.pending = set(range(len(self.links)))

    def ready(self, i: int) -> None:
        """Party ``i`` answered its Prepare: no more progress for it."""
        self.pending.discard(i)

    def wait(self, done: queue.SimpleQueue[int]) -> int:
        """The index of the next Prepare call that finished (from ``done``)."""
        while True:
            left = self.next - time.monotonic()
            if left > 0:
                try:
                    return done.get(timeout=min(left, max(self.deadline.remaining(), 0.01)))
                except queue.Empty:
                    if self.deadline.remaining() <= 0:
                        return done.get()  # every call has this deadline: it ends now
                    continue
            self.show()
            self.next = time.monotonic() + self.every_s

    def show(self) -> None:
        """One line: each party still preparing and the records it has read."""
        req = pb.StatusRequest(run_id=self.run_id)
        timeout = max(min(STATUS_TIMEOUT_S, self.deadline.remaining()), 0.01)
        asked = [
            (self.links[i], self.links[i].stub.Status.future(req, timeout=timeout))
            for i in sorted(self.pending)
        ]
        parts = []
        for link, fut in asked:
            try:
                st: pb.RunStatus = fut.result()
            except grpc.RpcError:
                parts.append(f"{link.name} no answer")
                continue
            if st.preparing and st.rows_read:
                parts.append(f"{link.name} read {st.rows_read:,} records")
            elif st.preparing:  # nothing read yet, or its policy says share_progress = false
                parts.append(f"{link.name} loading")
            else:
                parts.append(f"{link.name} loaded")
        if parts:
            secs = time.monotonic() - self.t0
            self.emit(f"prepare ({secs:.0f} s): " + "; ".join(parts))
