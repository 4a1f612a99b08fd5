"""The Party gRPC servicer: convert, delegate to :mod:`party.prepare` / :class:`PartyRun`.

Authentication, authorization and the audit line are done before any of this runs, by
:class:`common.auth.AuthInterceptor` with the table of :func:`method_policies`.

Every failure is answered with a status code and trailing metadata that say which party
failed, in which RPC and what kind of failure it is (``common.rpc.MD_*``); a party that
cannot deliver to its ring successor names the successor
(or passes on what the successor reported).  The leader reads these, never the message text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import NoReturn, TypeVar

import grpc
from cryptography.hazmat.primitives.asymmetric import ec

from common import rpc
from common.auth import Policy, check_caller, peer_identity
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
from common.errors import AuthError, FedanonError, InputError, ProtocolError, RunAborted
from common.logsafe import safe
from common.pb.fedanon.v1 import party_pb2 as pb
from common.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from common.policy import PolicyRefused
from common.rpc import KINDS, MD_KIND, MD_PARTY, MD_PHASE, MD_RULE
from common.state import Phase
from common.tls import TlsMaterial, insecure_channel
from party.config import PartyConfig
from party.prepare import Proposal, accepted_line, prepare_run
from party.run import U64, PartyRun, Peer
from party.runs import RunRegistry, UnknownRun

log = logging.getLogger(__name__)
T = TypeVar("T")

SERVICE = "/fedanon.v1.Party/"
HEALTH = "/grpc.health.v1.Health/"
FORWARD_MARGIN_S = 2.0  # kept back from the caller's deadline to report a downstream failure
LEADER_METHODS = (
    "Prepare",
    "Collect",
    "Instruct",
    "UnionKey",
    "UnionBatch",
    "Mix",
    "Abort",
    "Finish",
)


def method_policies(leader: str) -> dict[str, Policy]:
    """Who may call what (used by the interceptor; a method not listed here is refused)."""
    table = {SERVICE + m: Policy.of({"leader"}, {leader}) for m in LEADER_METHODS}
    # the ring predecessor (the leader for position 0); checked per run in Relay
    table[SERVICE + "Relay"] = Policy.of({"party", "leader"})
    for m in ("Check", "Watch"):  # health: any federation member (fedanon health uses its own)
        table[HEALTH + m] = Policy.of({"party", "leader"})
    return table


class PeerFailed(RunAborted):
    """The ring successor failed (or could not be reached) while this party relayed to it."""

    def __init__(self, party: str, phase: str, kind: str, code: grpc.StatusCode, detail: str):
        self.party, self.phase, self.kind, self.code = party, phase, kind, code
        super().__init__(detail)


def _fail(
    context: grpc.ServicerContext,
    code: grpc.StatusCode,
    party: str,
    phase: str,
    kind: str,
    text: str,
    rule: str = "",
) -> NoReturn:
    md = [(MD_PARTY, party), (MD_PHASE, phase), (MD_KIND, kind)]
    if rule:
        md.append((MD_RULE, rule))
    context.set_trailing_metadata(tuple(md))
    context.abort(code, text)
    raise AssertionError("unreachable")


class PartyService(pb_grpc.PartyServicer):
    def __init__(self, config: PartyConfig, tls: TlsMaterial, *, insecure: bool = False) -> None:
        self.config = config
        self.tls = tls
        self.insecure = insecure
        self.runs = RunRegistry(config.name, config.idle_timeout_s)
        self.tls_key: ec.EllipticCurvePrivateKey = load_private_key(tls.key)

    # helpers ----------------------------------------------------------------------------
    def _guard(self, context: grpc.ServicerContext, phase: str, fn: Callable[[], T]) -> T:
        """Run ``fn``; map errors to a status and metadata naming the failing party.

        Logged and sent texts are sanitized; a record value never reaches either (data
        errors carry file, line and column only).
        """
        me = self.config.name
        try:
            return fn()
        except PeerFailed as exc:
            log.warning("%s: %s %s: %s", phase, exc.party, exc.kind, safe(exc))
            _fail(context, exc.code, exc.party, exc.phase, exc.kind, safe(exc))
        except UnknownRun as exc:
            _fail(context, grpc.StatusCode.NOT_FOUND, me, phase, "unknown-run", str(exc))
        except PolicyRefused as exc:
            log.warning("%s: refused by policy: %s", phase, safe(exc))
            code = grpc.StatusCode.FAILED_PRECONDITION
            _fail(context, code, me, phase, "policy", safe(exc), exc.rule)
        except InputError as exc:
            # a record value never reaches a log or the leader: file, line and column locate it
            local = InputError(
                exc.message, file=exc.file, line=exc.line, column=exc.column, expected=exc.expected
            )
            log.error("%s: %s", phase, safe(local))
            sent = InputError(exc.message, column=exc.column, line=exc.line, expected=exc.expected)
            code = grpc.StatusCode.INVALID_ARGUMENT
            _fail(context, code, me, phase, "input", safe(sent))
        except AuthError as exc:
            log.warning("%s: %s", phase, safe(exc))
            _fail(context, grpc.StatusCode.PERMISSION_DENIED, me, phase, "auth", safe(exc))
        except ProtocolError as exc:
            log.warning("%s: %s", phase, safe(exc))
            code = grpc.StatusCode.FAILED_PRECONDITION
            _fail(context, code, me, phase, "protocol", safe(exc))
        except FedanonError as exc:
            log.warning("%s: %s", phase, safe(exc))
            _fail(context, grpc.StatusCode.ABORTED, me, phase, "aborted", safe(exc))

    def _caller(self, context: grpc.ServicerContext) -> str:
        if self.insecure:
            return self.config.leader
        try:
            return peer_identity(context).name
        except AuthError:
            return "-"

    # Prepare ----------------------------------------------------------------------------
    def Prepare(self, request: pb.PrepareRequest, context: grpc.ServicerContext) -> pb.PrepareReply:
        def work() -> pb.PrepareReply:
            proposal = Proposal(
                run_id=bytes(request.run_id),
                spec_toml=request.spec_toml,
                files=dict(request.files),
                ring=tuple(Peer(p.name, p.address) for p in request.ring),
                position=request.ring_position,
            )
            run, digest = prepare_run(self.config, proposal)
            if not context.is_active():  # the leader gave up (another party failed)
                log.info("run %s: Prepare cancelled by the leader", run.run_id.hex()[:8])
                raise RunAborted("Prepare was cancelled")
            self.runs.add(run)
            log.info("%s", accepted_line(run, self._caller(context), digest))
            return pb.PrepareReply(run_hash=digest, name=self.config.name)

        return self._guard(context, "Prepare", work)

    # Relay / Collect --------------------------------------------------------------------
    def Relay(
        self, request_iterator: Iterator[pb.VectorChunk], context: grpc.ServicerContext
    ) -> pb.Ack:
        def work() -> pb.Ack:
            it = iter(request_iterator)
            first = next(it, None)
            if first is None or not first.HasField("header"):
                raise ProtocolError("Relay stream without header")
            with self.runs.use(bytes(first.header.run_id)) as run:
                pred, role = run.predecessor
                if not self.insecure:
                    check_caller(context, pred, role, SERVICE + "Relay")

                def chain() -> Iterator[pb.VectorChunk]:
                    yield first
                    yield from it

                header, vec = rpc.decode_vector(chain(), run_id=run.run_id)
                phase = phase_from_pb(header.phase)
                forward = self._forwarder(run, context.time_remaining)
                run.relay(header.round, phase, bytes(header.layout_hash), vec, forward)
            return pb.Ack(ok=True)

        return self._guard(context, "Relay", work)

    def _forwarder(
        self, run: PartyRun, time_remaining: Callable[[], float | None]
    ) -> Callable[[U64, int, Phase, bytes], None]:
        """Relay to the successor within what is left of the caller's deadline."""

        def forward(vec: U64, round_: int, phase: Phase, layout_hash: bytes) -> None:
            succ = run.successor
            assert succ is not None
            remaining = time_remaining()
            budget = rpc.STREAM_TIMEOUT_S if remaining is None else remaining - FORWARD_MARGIN_S
            if budget <= 0:
                raise RunAborted("the run's deadline leaves no time to relay")
            chan = self.runs.channel(run, lambda: self._connect(succ))
            stub = pb_grpc.PartyStub(chan)  # type: ignore[no-untyped-call]
            chunks = rpc.encode_vector(
                vec,
                run_id=run.run_id,
                round=round_,
                phase=phase_to_pb(phase),
                layout_hash=layout_hash,
            )
            try:
                stub.Relay(chunks, timeout=budget)
            except grpc.RpcError as exc:
                raise self._peer_failure(run, succ, exc) from None

        return forward

    def _connect(self, peer: Peer) -> grpc.Channel:
        if self.insecure:
            return insecure_channel(peer.address)
        return self.tls.channel(peer.address, expected_name=peer.name)

    def _peer_failure(self, run: PartyRun, succ: Peer, exc: grpc.RpcError) -> PeerFailed:
        """What the successor reported (only parties after it may be named), else itself."""
        code = exc.code()
        md = rpc.failure_metadata(exc)
        downstream = {p.name for p in run.ring[run.position + 1 :]}
        who = md.get(MD_PARTY, "")
        kind = md.get(MD_KIND, "")
        detail = safe(exc.details() or code.name)
        if who in downstream and kind in KINDS:
            return PeerFailed(who, safe(md.get(MD_PHASE, "Relay"), 40), kind, code, detail)
        kind = "timeout" if code == grpc.StatusCode.DEADLINE_EXCEEDED else "unreachable"
        status = grpc.StatusCode.UNAVAILABLE
        text = f"relay to {succ.name} at {safe(succ.address, 100)} failed: {code.name}: {detail}"
        return PeerFailed(succ.name, "Relay", kind, status, text)

    def Collect(
        self, request: pb.CollectRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.VectorChunk]:
        def work() -> list[pb.VectorChunk]:
            with self.runs.use(bytes(request.run_id)) as run:
                phase = phase_from_pb(request.phase)
                layout, vec = run.collected(request.round, phase)
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
        def work() -> pb.Ack:
            with self.runs.use(bytes(request.run_id)) as run:
                update = update_from_pb(request)
                with run.lock:
                    if update.round < run.party.state.round or run.party.state.ended:
                        return pb.Ack(ok=True)  # already applied (retry)
                    run.party.apply(update)
            return pb.Ack(ok=True)

        return self._guard(context, "Instruct", work)

    # Union ------------------------------------------------------------------------------
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

    # Abort / Finish ---------------------------------------------------------------------
    def Abort(self, request: pb.AbortRequest, context: grpc.ServicerContext) -> pb.Ack:
        run_id = bytes(request.run_id)
        log.warning("run %s aborted by the leader: %s", run_id.hex()[:8], safe(request.reason))
        self.runs.drop(run_id, "aborted")
        return pb.Ack(ok=True)

    def Finish(self, request: pb.FinishRequest, context: grpc.ServicerContext) -> pb.Ack:
        self.runs.drop(bytes(request.run_id), "finished")
        return pb.Ack(ok=True)
