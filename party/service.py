"""The Party gRPC servicer: authorize, convert, delegate to :class:`party.run.PartyRun`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import NoReturn, TypeVar

import grpc
from cryptography.hazmat.primitives.asymmetric import ec

from common import rpc
from common.auth import require
from common.certs import load_private_key
from common.convert import (
    key_from_pb,
    key_to_pb,
    mix_blobs,
    pack_blobs,
    phase_from_pb,
    phase_to_pb,
    read_mix_header,
    unpack_data,
    update_from_pb,
)
from common.engine import LocalParty
from common.errors import (
    AuthError,
    FedanonError,
    InputError,
    ProtocolError,
    RunAborted,
)
from common.pb.fedanon.v1 import party_pb2 as pb
from common.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from common.spec import load_spec, parse_spec, run_hash
from common.state import Phase
from common.table import build_schema, encode_table
from common.tls import TlsMaterial, insecure_channel
from party.config import PartyConfig
from party.run import U64, PartyRun, Peer

log = logging.getLogger(__name__)
T = TypeVar("T")
LEADER = frozenset({"leader"})
RUN_IDLE_TTL_S = 3600


class UnknownRun(FedanonError):
    pass


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, text: str) -> NoReturn:
    context.abort(code, text)
    raise AssertionError("unreachable")


class PartyService(pb_grpc.PartyServicer):
    def __init__(self, config: PartyConfig, tls: TlsMaterial, *, insecure: bool = False) -> None:
        self.config = config
        self.tls = tls
        self.insecure = insecure
        self.runs: dict[bytes, PartyRun] = {}
        self.lock = threading.Lock()
        self.channels: dict[bytes, grpc.Channel] = {}
        self.tls_key: ec.EllipticCurvePrivateKey = load_private_key(tls.key)

    # helpers ----------------------------------------------------------------------------
    def _leader_only(self, context: grpc.ServicerContext, method: str) -> None:
        if self.insecure:
            return
        require(
            context,
            allowed_roles=LEADER,
            allowed_names={self.config.leader},
            method=f"/fedanon.v1.Party/{method}",
        )

    def _run(self, run_id: bytes) -> PartyRun:
        with self.lock:
            run = self.runs.get(run_id)
        if run is None:
            raise UnknownRun(f"party {self.config.name}: unknown run {run_id.hex()[:8]}")
        run.last_used = time.monotonic()
        return run

    def _reap(self) -> None:
        """Forget runs whose leader went silent (no Abort/Finish) for RUN_IDLE_TTL_S."""
        now = time.monotonic()
        with self.lock:
            stale = [r for r, run in self.runs.items() if now - run.last_used > RUN_IDLE_TTL_S]
        for run_id in stale:
            log.warning("run %s: no message for %ds, dropping it", run_id.hex()[:8], RUN_IDLE_TTL_S)
            self._drop(run_id)

    def _guard(self, context: grpc.ServicerContext, what: str, fn: Callable[[], T]) -> T:
        """Run ``fn``; map errors to status codes naming this party, never echoing values."""
        me = self.config.name
        try:
            return fn()
        except UnknownRun as exc:
            _abort(context, grpc.StatusCode.NOT_FOUND, str(exc))
        except InputError as exc:
            # a record value never reaches a log or the leader: file, line and column locate it
            local = InputError(
                exc.message, file=exc.file, line=exc.line, column=exc.column, expected=exc.expected
            )
            log.error("%s: %s", what, local)
            safe = InputError(exc.message, column=exc.column, line=exc.line, expected=exc.expected)
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"party {me}: {safe}")
        except AuthError as exc:
            log.warning("%s: %s", what, exc)
            _abort(context, grpc.StatusCode.PERMISSION_DENIED, f"party {me}: {exc}")
        except ProtocolError as exc:
            log.warning("%s: %s", what, exc)
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"party {me}: {exc}")
        except RunAborted as exc:
            log.warning("%s: %s", what, exc)
            _abort(context, grpc.StatusCode.UNAVAILABLE, f"party {me}: {exc}")

    def _channel(self, run: PartyRun, peer: Peer) -> grpc.Channel:
        with self.lock:
            chan = self.channels.get(run.run_id)
            if chan is None:
                if self.insecure:
                    chan = insecure_channel(peer.address)
                else:
                    chan = self.tls.channel(peer.address, expected_name=peer.name)
                self.channels[run.run_id] = chan
            return chan

    def _drop(self, run_id: bytes) -> None:
        with self.lock:
            self.runs.pop(run_id, None)
            chan = self.channels.pop(run_id, None)
        if chan is not None:
            chan.close()

    # Prepare ----------------------------------------------------------------------------
    def Prepare(self, request: pb.PrepareRequest, context: grpc.ServicerContext) -> pb.PrepareReply:
        self._leader_only(context, "Prepare")
        return self._guard(context, "Prepare", lambda: self._prepare(request))

    def _prepare(self, request: pb.PrepareRequest) -> pb.PrepareReply:
        self._reap()
        cfg = self.config
        if len(request.run_id) != 16:
            raise ProtocolError("run id must be 16 bytes")
        ring = tuple(Peer(p.name, p.address) for p in request.ring)
        pos = request.ring_position
        if pos >= len(ring) or ring[pos].name != cfg.name:
            raise ProtocolError(f"ring position {pos} is not this party ({cfg.name})")
        if cfg.spec is not None:
            spec, reader = load_spec(cfg.spec)
        else:
            files = {k: v.decode("utf-8") for k, v in request.files.items()}
            spec = parse_spec(request.spec_toml, "<leader spec>")

            def reader(rel: str) -> str:
                if rel not in files:
                    raise InputError("taxonomy file not sent by the leader", file=rel)
                return files[rel]

        if spec.class_attr is not None and spec.class_attr.values is None:
            raise InputError(
                f"the class attribute {spec.class_attr.name!r} needs values = [...] in the spec"
            )
        schema = build_schema(spec, reader)
        table = encode_table(schema, cfg.data)
        run = PartyRun(
            request.run_id, cfg.name, spec, LocalParty(schema, table), ring, pos, cfg.leader
        )
        with self.lock:
            self.runs[request.run_id] = run
        log.info(
            "run %s: prepared (%d rows, position %d)", request.run_id.hex()[:8], table.n_rows, pos
        )
        return pb.PrepareReply(run_hash=run_hash(spec, schema.files), name=cfg.name)

    # Relay / Collect --------------------------------------------------------------------
    def Relay(
        self, request_iterator: Iterator[pb.VectorChunk], context: grpc.ServicerContext
    ) -> pb.Ack:
        it = iter(request_iterator)
        first = next(it, None)
        if first is None or not first.HasField("header"):
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "Relay stream without header")
        try:
            run = self._run(first.header.run_id)
        except UnknownRun as exc:
            if not self.insecure:  # audit the caller even for unknown runs
                require(
                    context, allowed_roles={"party", "leader"}, method="/fedanon.v1.Party/Relay"
                )
            _abort(context, grpc.StatusCode.NOT_FOUND, str(exc))
        pred, role = run.predecessor
        if not self.insecure:
            require(
                context,
                allowed_roles={role},
                allowed_names={pred},
                method="/fedanon.v1.Party/Relay",
            )

        def chain() -> Iterator[pb.VectorChunk]:
            yield first
            yield from it

        def work() -> pb.Ack:
            header, vec = rpc.decode_vector(chain(), run_id=run.run_id)
            phase = phase_from_pb(header.phase)
            run.relay(header.round, phase, bytes(header.layout_hash), vec, self._forwarder(run))
            return pb.Ack(ok=True)

        return self._guard(context, "Relay", work)

    def _forwarder(self, run: PartyRun) -> Callable[[U64, int, Phase, bytes], None]:
        def forward(vec: U64, round_: int, phase: Phase, layout_hash: bytes) -> None:
            succ = run.successor
            assert succ is not None
            stub = pb_grpc.PartyStub(self._channel(run, succ))  # type: ignore[no-untyped-call]
            chunks = rpc.encode_vector(
                vec,
                run_id=run.run_id,
                round=round_,
                phase=phase_to_pb(phase),
                layout_hash=layout_hash,
            )
            try:
                stub.Relay(chunks, timeout=rpc.STREAM_TIMEOUT_S)
            except grpc.RpcError as exc:
                code = exc.code()
                details = exc.details()
                if code == grpc.StatusCode.UNAVAILABLE and not str(details).startswith("party "):
                    details = f"party {succ.name} unreachable ({details})"
                raise RunAborted(f"relay to {succ.name} failed: {details}") from None

        return forward

    def Collect(
        self, request: pb.CollectRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.VectorChunk]:
        self._leader_only(context, "Collect")

        def work() -> list[pb.VectorChunk]:
            run = self._run(request.run_id)
            phase = phase_from_pb(request.phase)
            vec = run.collected(request.round, phase)
            layout = run.results[(request.round, phase)][0]
            return list(
                rpc.encode_vector(
                    vec,
                    run_id=run.run_id,
                    round=request.round,
                    phase=request.phase,
                    layout_hash=layout,
                )
            )

        return iter(self._guard(context, "Collect", work))

    # Instruct ---------------------------------------------------------------------------
    def Instruct(self, request: pb.Instruction, context: grpc.ServicerContext) -> pb.Ack:
        self._leader_only(context, "Instruct")

        def work() -> pb.Ack:
            run = self._run(request.run_id)
            update = update_from_pb(request)
            with run.lock:
                if update.round < run.party.state.round or run.party.state.ended:
                    return pb.Ack(ok=True)  # already applied (retry)
                run.party.apply(update)
            return pb.Ack(ok=True)

        return self._guard(context, "Instruct", work)

    # Union ------------------------------------------------------------------------------
    def UnionKey(self, request: pb.UnionKeyRequest, context: grpc.ServicerContext) -> pb.SignedKey:
        self._leader_only(context, "UnionKey")

        def work() -> pb.SignedKey:
            run = self._run(request.run_id)
            return key_to_pb(run.union_key(self.tls_key, self.tls.cert))

        return self._guard(context, "UnionKey", work)

    def UnionBatch(
        self, request: pb.UnionBatchRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.Blob]:
        self._leader_only(context, "UnionBatch")

        def work() -> list[pb.Blob]:
            run = self._run(request.run_id)
            keys = [key_from_pb(k) for k in request.keys]
            batch = run.union_batch(keys, self.tls.ca, request.pad_size)
            return list(pack_blobs(batch, run.hop_size(0)))

        return iter(self._guard(context, "UnionBatch", work))

    def Mix(
        self, request_iterator: Iterator[pb.MixChunk], context: grpc.ServicerContext
    ) -> Iterator[pb.Blob]:
        self._leader_only(context, "Mix")

        def work() -> list[pb.Blob]:
            it = iter(request_iterator)
            header = read_mix_header(it)
            run = self._run(header.run_id)
            if header.hop != run.position:
                raise ProtocolError(f"party {run.name} is hop {run.position}, not {header.hop}")
            if header.expected_count > rpc.MAX_CIPHERTEXTS:
                raise ProtocolError(f"Mix announces {header.expected_count} ciphertexts")
            size = run.hop_size(header.hop)
            batch = unpack_data(mix_blobs(it), size, header.expected_count)
            out = run.mix(header.hop, batch, header.expected_count)
            return list(pack_blobs(out, run.hop_size(header.hop + 1)))

        return iter(self._guard(context, "Mix", work))

    # Abort / Finish ---------------------------------------------------------------------
    def Abort(self, request: pb.AbortRequest, context: grpc.ServicerContext) -> pb.Ack:
        self._leader_only(context, "Abort")
        log.warning(
            "run %s aborted by the leader: %s", request.run_id.hex()[:8], request.reason[:200]
        )
        self._drop(request.run_id)
        return pb.Ack(ok=True)

    def Finish(self, request: pb.FinishRequest, context: grpc.ServicerContext) -> pb.Ack:
        self._leader_only(context, "Finish")
        log.info("run %s finished", request.run_id.hex()[:8])
        self._drop(request.run_id)
        return pb.Ack(ok=True)
