"""The pairwise-masked secure sum at the leader (``[run] secure_sum = "pairwise"``, the default).

Right after Prepare the leader hands every party every party's signed per-run key
(``PairKeys``, acknowledged with the first sum like an Instruction: no round trip of its
own).  A sum is one round trip: the leader orders every party at once (``Contribute``) and
adds the masked chunks into the total as they stream in (:class:`Accumulator`); the pairwise
masks cancel.  Hospitals never connect to each other.  A party that finds a key swapped,
dropped or replayed refuses, naming the key's holder (kind ``key``): the leader exits 2
naming that hospital.  A decision travels inside the next sum's order (``carried``): one
call per party and sum; decisions no sum follows go as ``Instruct`` calls (:meth:`flush`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc

from fedanon.arrays import IntArray
from fedanon.errors import ProtocolError
from fedanon.leader.links import Link, Traffic
from fedanon.leader.ring import RingFederation
from fedanon.leader.watch import PROBE_S, Call
from fedanon.net import rpc
from fedanon.net.convert import sum_order_to_pb, update_to_pb
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security.pairwise import Accumulator, SumOrder
from fedanon.tds.state import Phase, Update

__all__ = ["PairwiseFederation", "new_federation"]

CHUNK_WORDS = rpc.CHUNK_BYTES // 8
CONTRIBUTE_ATTEMPTS = 2  # a Contribute cut by a transient UNAVAILABLE is asked once more
RETRY_PAUSE_S = 0.2
log = logging.getLogger(__name__)


class PairwiseFederation(RingFederation):
    """Implements :class:`fedanon.tds.engine.Federation` with pairwise-masked sums."""

    def __init__(
        self,
        run_id: bytes,
        links: Sequence[Link],
        traffic: Traffic,
        deadline: rpc.Deadline,
        pool: ThreadPoolExecutor,
        keys: Mapping[str, pb.SignedKey],
        probe_s: float = PROBE_S,
    ) -> None:
        super().__init__(run_id, links, traffic, deadline, pool, probe_s)
        self._seen: set[bytes] = set()  # fingerprints of every chunk received in this run
        self._carry: list[tuple[pb.Instruction, str]] = []  # decisions awaiting the next sum
        missing = [lk.name for lk in self.links if lk.name not in keys]
        if missing:
            raise ProtocolError(f"party {missing[0]} sent no pairwise key at Prepare")
        req = pb.PairKeysRequest(run_id=run_id, keys=[keys[lk.name] for lk in self.links])
        timeout = self._timeout(rpc.DEFAULT_TIMEOUT_S)
        for link in self.links:  # acknowledged with the first sum
            fut = self.pool.submit(
                link.call, "pair keys", lambda s: s.PairKeys(req, timeout=timeout)
            )
            self._pending.append(Call(link, "pair keys", fut))
            self.traffic.add("prepare", sent=req.ByteSize(), received=2)

    def broadcast(self, update: Update, step: str | None = None, *, chained: bool = False) -> None:
        """Keep the decision for the next sum's order (or :meth:`flush`)."""
        msg = update_to_pb(update, self.run_id)
        msg.seq = self.instructions
        msg.chained = chained
        self.instructions += 1
        self._carry.append((msg, step or f"round {update.round}"))

    def flush(self) -> None:
        """Send the decisions no sum carried as ``Instruct`` calls."""
        carry, self._carry = self._carry, []
        for msg, step in carry:
            self._instruct(msg, step)

    def sum(
        self, phase: Phase, round_: int, size: int, digest: bytes, step: str | None = None
    ) -> IntArray:
        order = SumOrder(self.sums, round_, phase, digest, size, self.instructions)
        label = f"round {round_} {phase.name.lower()} sum"
        step = step or f"round {round_}"
        names = [lk.name for lk in self.links]
        acc = Accumulator(size, names, order.sum_no, CHUNK_WORDS, self._seen)
        req = sum_order_to_pb(order, self.run_id)
        order_bytes = req.ByteSize()  # per party; the carried decisions count in their step
        for msg, msg_step in self._carry:
            req.carried.append(msg)
            self.traffic.add(msg_step, sent=len(self.links) * msg.ByteSize())
        self._carry = []

        def once(i: int, stub: pb_grpc.PartyStub) -> None:
            stream = stub.Contribute(req, timeout=self.deadline.remaining())
            for sum_no, seq, data in rpc.read_masked(
                self.traffic.counting(step, stream, sent=False),
                run_id=self.run_id,
                round=round_,
                phase=req.phase,
                layout_hash=digest,
                total_len=size,
            ):
                acc.add(i, sum_no, seq, data)

        def one(i: int, stub: pb_grpc.PartyStub) -> None:
            for attempt in range(CONTRIBUTE_ATTEMPTS):
                try:
                    return once(i, stub)
                except grpc.RpcError as exc:
                    # only a connection problem, never a failure the party reports: the
                    # party answers the same order with the same bytes (safe to ask again)
                    retry = exc.code() == grpc.StatusCode.UNAVAILABLE and not rpc.failure_metadata(
                        exc
                    )
                    if not retry or attempt + 1 == CONTRIBUTE_ATTEMPTS:
                        raise
                log.info("%s: Contribute from %s unavailable, asking again", label, names[i])
                acc.restart(i)
                time.sleep(RETRY_PAUSE_S)

        calls = []
        for i, link in enumerate(self.links):
            self.traffic.add(step, sent=order_bytes)
            fut = self.pool.submit(link.call, label, lambda s, i=i: one(i, s))
            calls.append(Call(link, label, fut))

        def network() -> None:
            self._wait([*calls, *self._pending], label, step)
            self._pending = []

        self.traffic.timed("network", network)
        total = acc.result()
        self.sums += 1
        return total


def new_federation(
    method: str,
    run_id: bytes,
    links: Sequence[Link],
    traffic: Traffic,
    deadline: rpc.Deadline,
    pool: ThreadPoolExecutor,
    keys: Mapping[str, pb.SignedKey],
) -> RingFederation:
    """The run's Federation: ``pairwise`` or ``ring`` (``[run] secure_sum``)."""
    if method == "pairwise":
        return PairwiseFederation(run_id, links, traffic, deadline, pool, keys)
    if method == "ring":
        return RingFederation(run_id, links, traffic, deadline, pool)
    raise ValueError(f"unknown secure sum {method!r}")
