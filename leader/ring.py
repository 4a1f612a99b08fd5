"""The ring secure sum and the broadcast of decisions: the engine's Federation, over gRPC."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import numpy.typing as npt

from common import rpc
from common.convert import phase_to_pb, update_to_pb
from common.errors import ProtocolError
from common.pb.fedanon.v1 import party_pb2 as pb
from common.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from common.securesum import draw_mask, unmask
from common.state import Phase, Update
from leader.links import Link, Traffic

log = logging.getLogger(__name__)
IntArray = npt.NDArray[np.int64]
RELAY_ATTEMPTS = 2


class RingFederation:
    """Implements :class:`common.engine.Federation` with a masked ring sum (Sec. 5.2)."""

    def __init__(
        self,
        run_id: bytes,
        links: Sequence[Link],
        traffic: Traffic,
        deadline: rpc.Deadline,
        pool: ThreadPoolExecutor,
    ) -> None:
        self.run_id = run_id
        self.links = list(links)
        self.traffic = traffic
        self.deadline = deadline
        self.pool = pool
        self.sums = 0

    def _timeout(self, limit: float) -> float:
        return min(limit, self.deadline.remaining())

    def sum(self, phase: Phase, round_: int, size: int, digest: bytes) -> IntArray:
        label = f"round {round_} {phase.name.lower()}"
        step = f"round {round_}"
        mask = self.traffic.timed("crypto", lambda: draw_mask(size))
        ppb = phase_to_pb(phase)
        first, last = self.links[0], self.links[-1]

        def relay(stub: pb_grpc.PartyStub) -> None:
            chunks = rpc.encode_vector(
                mask, run_id=self.run_id, round=round_, phase=ppb, layout_hash=digest
            )
            for attempt in range(RELAY_ATTEMPTS):
                try:
                    # the whole ring works inside this one call: the run's remaining budget
                    # travels along it (each party forwards with what is left)
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
                    chunks = rpc.encode_vector(  # same mask: the party answers idempotently
                        mask, run_id=self.run_id, round=round_, phase=ppb, layout_hash=digest
                    )

        def collect(stub: pb_grpc.PartyStub) -> npt.NDArray[np.uint64]:
            req = pb.CollectRequest(run_id=self.run_id, round=round_, phase=ppb)
            self.traffic.add(step, sent=req.ByteSize())
            stream = stub.Collect(req, timeout=self._timeout(rpc.STREAM_TIMEOUT_S))
            _, vec = rpc.decode_vector(
                self.traffic.counting(step, stream, sent=False),
                run_id=self.run_id,
                round=round_,
                phase=ppb,
                layout_hash=digest,
            )
            return vec

        def network() -> npt.NDArray[np.uint64]:
            first.call(f"{label} sum (relay)", relay)
            return last.call(f"{label} sum (collect)", collect)

        total = self.traffic.timed("network", network)
        if total.size != size:
            raise ProtocolError(f"{label}: collected {total.size} elements, expected {size}")
        self.sums += 1
        return self.traffic.timed("crypto", lambda: unmask(total, mask))

    def broadcast(self, update: Update) -> None:
        msg = update_to_pb(update, self.run_id)
        step = f"round {update.round}"
        label = f"round {update.round} instruction"

        def one(link: Link) -> None:
            link.call(
                label, lambda s: s.Instruct(msg, timeout=self._timeout(rpc.DEFAULT_TIMEOUT_S))
            )
            self.traffic.add(step, sent=msg.ByteSize(), received=2)

        def network() -> None:
            futs = [self.pool.submit(one, link) for link in self.links]
            for f in futs:
                f.result()

        self.traffic.timed("network", network)
