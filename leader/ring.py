"""The ring secure sum and the broadcast of decisions: the engine's Federation, over gRPC.

A sum costs the leader (n + 1) one-way trips, about (n + 1) / 2
round trips: the masked vector goes to the first party while the Collect is already waiting
at the last one; each party acknowledges on receipt and adds + forwards in the background;
the last party answers the Collect as soon as the sum exists.  A decision is not a round trip
of its own either: the Instructions go to every party at once and the next sum starts
without waiting for the acknowledgements (a party applies them before adding its next
statistics; the leader sees the acknowledgements before its next decision).  Security is the
paper's (Sec. 5.2): only the leader knows the mask, no partial sum travels back along the
ring, a repeated vector is answered from the party's cache, and only the leader instructs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc
import numpy as np
import numpy.typing as npt

from fedanon.arrays import IntArray
from fedanon.errors import FedanonError, ProtocolError
from fedanon.leader.links import Link, Traffic
from fedanon.leader.watch import PROBE_S, Call, probe_status, wait_all
from fedanon.ledger.transcript import update_bytes
from fedanon.net import rpc
from fedanon.net.convert import phase_to_pb, update_to_pb
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security.keyagree import CHAIN_START, chain_applied, chain_start
from fedanon.security.securesum import draw_mask, unmask
from fedanon.tds.state import Phase, Update

log = logging.getLogger(__name__)
RELAY_ATTEMPTS = 2


@dataclass(frozen=True)
class _Started:
    """A sum on its way: its mask (known to the leader only) and the two calls."""

    label: str
    step: str
    mask: npt.NDArray[np.uint64]
    got: Call
    sent: Call


class RingFederation:
    """Implements :class:`fedanon.tds.engine.Federation` with a masked ring sum (Sec. 5.2)."""

    def __init__(
        self,
        run_id: bytes,
        links: Sequence[Link],
        traffic: Traffic,
        deadline: rpc.Deadline,
        pool: ThreadPoolExecutor,
        probe_s: float = PROBE_S,
    ) -> None:
        self.run_id = run_id
        self.links = list(links)
        self.traffic = traffic
        self.deadline = deadline
        self.pool = pool
        self.probe_s = probe_s
        self.sums = 0  # secure sums completed
        self.instructions = 0  # Instructions sent (the next one's seq)
        self.chain = CHAIN_START  # their chain (a ring vector carries it; parties compare)
        self._pending: list[Call] = []  # Instructions not yet acknowledged

    def _timeout(self, limit: float) -> float:
        return min(limit, self.deadline.remaining())

    def sum(
        self, phase: Phase, round_: int, size: int, digest: bytes, step: str | None = None
    ) -> IntArray:
        """``step`` names the bytes in the report (default ``round N``; the union's ``union``)."""
        started = self._start(phase, round_, size, digest, step)
        label = started.label

        def network() -> npt.NDArray[np.uint64]:
            self._wait([started.got, started.sent, *self._pending], label, started.step)
            self._pending = []
            result: npt.NDArray[np.uint64] = started.got.future.result()
            return result

        total = self.traffic.timed("network", network)
        if total.size != size:
            raise ProtocolError(f"{label}: collected {total.size} elements, expected {size}")
        self.sums += 1
        mask = started.mask
        return self.traffic.timed("crypto", lambda: unmask(total, mask, in_place=True))

    def _start(
        self, phase: Phase, round_: int, size: int, digest: bytes, step: str | None
    ) -> _Started:
        """Draw the mask and send the Relay to the first party and the Collect to the last."""
        label = f"round {round_} {phase.name.lower()} sum"
        step = step or f"round {round_}"
        mask = self.traffic.timed("crypto", lambda: draw_mask(size))
        ppb = phase_to_pb(phase)
        first, last = self.links[0], self.links[-1]
        instructions, chain = self.instructions, self.chain

        def relay(stub: pb_grpc.PartyStub) -> None:
            for attempt in range(RELAY_ATTEMPTS):
                chunks = rpc.encode_vector(  # a retry sends the same mask: answered from cache
                    mask,
                    run_id=self.run_id,
                    round=round_,
                    phase=ppb,
                    layout_hash=digest,
                    instructions=instructions,
                    chain=chain,
                )
                try:
                    stub.Relay(
                        self.traffic.counting(step, chunks, sent=True),
                        timeout=self.deadline.remaining(),
                    )
                    return
                except grpc.RpcError as exc:
                    # retry only a connection problem with the first party itself; a failure
                    # a party reports (metadata) is final
                    retry = exc.code() == grpc.StatusCode.UNAVAILABLE and not rpc.failure_metadata(
                        exc
                    )
                    if not retry or attempt + 1 == RELAY_ATTEMPTS:
                        raise
                    log.info("%s: relay to %s unavailable, retrying once", label, first.name)
                    time.sleep(0.2)

        def collect(stub: pb_grpc.PartyStub) -> npt.NDArray[np.uint64]:
            req = pb.CollectRequest(run_id=self.run_id, round=round_, phase=ppb)
            self.traffic.add(step, sent=req.ByteSize())
            # outstanding while the vector travels: the last party answers when it has the sum
            stream = stub.Collect(req, timeout=self.deadline.remaining())
            _, vec = rpc.decode_vector(
                self.traffic.counting(step, stream, sent=False),
                run_id=self.run_id,
                round=round_,
                phase=ppb,
                layout_hash=digest,
            )
            return vec

        lc, lr = f"{label} (collect)", f"{label} (relay)"
        got = Call(last, lc, self.pool.submit(last.call, lc, collect))
        sent = Call(first, lr, self.pool.submit(first.call, lr, relay))
        return _Started(label, step, mask, got, sent)

    def start_chain(self, run_hash: bytes) -> None:
        """Before the first Instruction: the chain starts from the run id and the run hash
        every party answered (the parties start theirs from the spec they accepted)."""
        self.chain = chain_start(self.run_id, run_hash)

    def broadcast(self, update: Update, step: str | None = None, *, chained: bool = False) -> None:
        """Send the decision to every party; acknowledgements are awaited with the next sum
        (or :meth:`settle`).  ``step`` as in :meth:`sum`;
        ``chained`` as in :class:`fedanon.tds.engine.Federation`."""
        msg = update_to_pb(update, self.run_id)
        msg.seq = self.instructions
        msg.chained = chained
        self.instructions += 1
        self.chain = chain_applied(self.chain, update_bytes(update, chained))
        self._instruct(msg, step or f"round {update.round}")

    def _instruct(self, msg: pb.Instruction, step: str) -> None:
        """Send one Instruction to every party (acknowledged with the next sum)."""
        label = f"round {msg.round} instruction"
        timeout = self._timeout(rpc.DEFAULT_TIMEOUT_S)
        size = msg.ByteSize()
        for link in self.links:
            # from the pool: starting a gRPC call costs the leader 1-2 ms of its own thread,
            # which the next sum's Relay (right behind) would otherwise wait for
            fut = self.pool.submit(link.stub.Instruct, msg, timeout=timeout)
            self._pending.append(Call(link, label, fut))
            self.traffic.add(step, sent=size, received=2)

    def flush(self) -> None:
        """Every decision on its way to the parties (the ring sends each at once)."""

    def settle(self) -> None:
        """Wait until every Instruction sent has been acknowledged (raise if one failed)."""
        self.flush()
        if self._pending:
            self.traffic.timed("network", lambda: self._wait(self._pending, "instruction", "end"))
            self._pending = []

    def _wait(self, calls: Sequence[Call], label: str, step: str) -> None:
        def probe() -> FedanonError | None:
            return probe_status(self.run_id, self.links, label, self.deadline, self.traffic, step)

        wait_all(calls, probe, self.deadline, self.probe_s)
