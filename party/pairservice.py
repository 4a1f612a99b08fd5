"""The pairwise-sum RPCs of the Party servicer (``PairKeys``, ``Contribute``): convert and
delegate to :mod:`fedanon.party.pairsum`.  Mixed into :class:`fedanon.party.service.PartyService`,
whose ``runs``, ``tls``, ``config`` and ``_guard`` they use."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NoReturn, TypeVar

import grpc

from fedanon.errors import FedanonError, ProtocolError
from fedanon.net import rpc
from fedanon.net.convert import key_from_pb, sum_order_from_pb, update_from_pb
from fedanon.net.rpc import MD_KIND, MD_PARTY, MD_PHASE, MD_RULE
from fedanon.party import pairsum
from fedanon.party.faults import Failure, classify, is_abort, unexpected
from fedanon.pb.fedanon.v1 import party_pb2 as pb

if TYPE_CHECKING:
    from fedanon.party.callcap import CallCap
    from fedanon.party.config import PartyConfig
    from fedanon.party.run import PartyRun
    from fedanon.party.runs import RunRegistry
    from fedanon.security.tls import TlsMaterial

T = TypeVar("T")
P = TypeVar("P")


def _fail(context: grpc.ServicerContext, f: Failure) -> NoReturn:
    md = [(MD_PARTY, f.party), (MD_PHASE, f.phase), (MD_KIND, f.kind)]
    if f.rule:
        md.append((MD_RULE, f.rule))
    context.set_trailing_metadata(tuple(md))
    context.abort(f.code, f.detail)
    raise AssertionError("unreachable")


def _progress(run: PartyRun, pieces: Iterator[P]) -> Iterator[P]:
    """``pieces``; the run progressed if they are a new sum (a retry of the last one is
    answered from its first computation, and is none)."""
    done = run.done
    first = next(pieces, None)  # the statistics are computed (or taken from the retry)
    if run.done != done:
        run.progress()
    if first is not None:
        yield first
        yield from pieces


class PairwiseRpcs:
    config: PartyConfig
    runs: RunRegistry
    tls: TlsMaterial
    cap: CallCap

    def _guard(self, context: grpc.ServicerContext, phase: str, fn: Callable[[], T]) -> T:
        raise NotImplementedError  # PartyService's

    def PairKeys(self, request: pb.PairKeysRequest, context: grpc.ServicerContext) -> pb.Ack:
        def work() -> pb.Ack:
            with self.runs.use(bytes(request.run_id)) as run:
                pairsum.set_keys(run, [key_from_pb(k) for k in request.keys], self.tls.ca)
            return pb.Ack(ok=True)

        return self._guard(context, "PairKeys", work)

    def Contribute(
        self, request: pb.ContributeRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.VectorChunk]:
        """This party's masked statistics of one sum, streamed as they are masked."""
        self.cap.arm(context)  # a stream never read is cancelled after the maximum wait
        try:
            order = sum_order_from_pb(request)
            deadline = self.cap.deadline(context, rpc.STREAM_TIMEOUT_S)
            with self.runs.use(bytes(request.run_id)) as run:
                for msg in request.carried:  # the decisions since the last sum, in order
                    if bytes(msg.run_id) != run.run_id:
                        raise ProtocolError("a carried instruction of another run")
                    if run.instruct(  # the statistics follow at once: nothing to start ahead
                        msg.seq, update_from_pb(msg), deadline, chained=msg.chained, ahead=False
                    ):
                        run.progress()
                pieces = pairsum.contribute(
                    run, order, rpc.CHUNK_BYTES // 8, deadline, context.is_active
                )
                yield from rpc.masked_stream(
                    _progress(run, pieces),
                    run_id=run.run_id,
                    round=order.round,
                    phase=request.phase,
                    layout_hash=order.layout_hash,
                    total_len=order.size,
                    sum_no=order.sum_no,
                )
        except FedanonError as exc:
            _fail(context, classify(exc, self.config.name, "Contribute"))
        except Exception as exc:  # never gRPC's default answer, which quotes str(exc)
            if is_abort(exc):
                raise
            _fail(context, unexpected(exc, self.config.name, "Contribute"))
