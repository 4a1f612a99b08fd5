"""The mix-net union RPCs of the Party servicer (``UnionKey``, ``UnionBatch``, ``Mix``):
convert and delegate to the run (:mod:`fedanon.party.unionrun`).  Mixed into
:class:`fedanon.party.service.PartyService`, whose ``runs``, ``tls``, ``tls_key`` and
``_guard`` they use."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

import grpc

from fedanon.errors import ProtocolError
from fedanon.net import rpc
from fedanon.net.convert import (
    key_from_pb,
    key_to_pb,
    mix_blobs,
    pack_blobs,
    read_mix_header,
    unpack_data,
)
from fedanon.pb.fedanon.v1 import party_pb2 as pb

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

    from fedanon.party.runs import RunRegistry
    from fedanon.security.tls import TlsMaterial

T = TypeVar("T")


def _deadline(context: grpc.ServicerContext) -> float:
    left = context.time_remaining()
    return time.monotonic() + (rpc.STREAM_TIMEOUT_S if left is None else left)


class UnionRpcs:
    runs: RunRegistry
    tls: TlsMaterial
    tls_key: ec.EllipticCurvePrivateKey

    def _guard(self, context: grpc.ServicerContext, phase: str, fn: Callable[[], T]) -> T:
        raise NotImplementedError  # PartyService's

    def UnionKey(self, request: pb.UnionKeyRequest, context: grpc.ServicerContext) -> pb.SignedKey:
        def work() -> pb.SignedKey:
            with self.runs.use(bytes(request.run_id)) as run:
                return key_to_pb(run.union_key(self.tls_key, self.tls.cert))

        return self._guard(context, "UnionKey", work)

    def UnionBatch(
        self, request: pb.UnionBatchRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.Blob]:
        def work() -> list[pb.Blob]:
            with self.runs.use(bytes(request.run_id)) as run:
                run.wait_ended(_deadline(context))  # the end instruction may still travel
                keys = [key_from_pb(k) for k in request.keys]
                batch = run.union_batch(keys, self.tls.ca, request.pad_size)
                return list(pack_blobs(batch, run.hop_size(0)))

        return iter(self._guard(context, "UnionBatch", work))

    def Mix(
        self, request_iterator: Iterator[pb.MixChunk], context: grpc.ServicerContext
    ) -> Iterator[pb.Blob]:
        def work() -> list[pb.Blob]:
            it = iter(request_iterator)
            header = read_mix_header(it)
            with self.runs.use(bytes(header.run_id)) as run:
                if header.hop != run.position:
                    raise ProtocolError(f"party {run.name} is hop {run.position}, not {header.hop}")
                if header.expected_count > rpc.MAX_CIPHERTEXTS:
                    raise ProtocolError(f"Mix announces {header.expected_count} ciphertexts")
                size = run.hop_size(header.hop)
                batch = unpack_data(mix_blobs(it), size, header.expected_count)
                out = run.mix(header.hop, batch, header.expected_count)
                return list(pack_blobs(out, run.hop_size(header.hop + 1)))

        return iter(self._guard(context, "Mix", work))
