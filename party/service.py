"""The Party gRPC servicer: convert, delegate to :mod:`fedanon.party.prepare` / :class:`PartyRun`.

Authentication, authorization and the audit line are done before any of this runs, by
:class:`fedanon.security.auth.AuthInterceptor` with the table of :func:`method_policies`.

Every failure is answered with a status code and trailing metadata that say which party
failed, in which RPC and what kind of failure it is (``fedanon.net.rpc.MD_*``); a party that
cannot deliver to its ring successor names the successor
(or passes on what the successor reported).  The leader reads these, never the message text.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn, TypeVar

import grpc
from cryptography.hazmat.primitives.asymmetric import ec

from fedanon.errors import AuthError, FedanonError, ProtocolError, RunAborted
from fedanon.io.progress import Progress, to_log
from fedanon.io.sources import DataSource, RowsRead
from fedanon.io.table import EncodedTable
from fedanon.logsafe import safe
from fedanon.model.spec import RunSpec
from fedanon.net import rpc
from fedanon.net.convert import (
    key_to_pb,
    mpc_addresses_from_pb,
    phase_from_pb,
    phase_to_pb,
    secure_sum_from_pb,
    update_from_pb,
)
from fedanon.net.rpc import MD_KIND, MD_PARTY, MD_PHASE, MD_RULE
from fedanon.party import mpcrun, pairsum
from fedanon.party.callcap import CallCap
from fedanon.party.config import PartyConfig
from fedanon.party.faults import (
    Failure,
    PeerFailed,
    TimedOut,
    classify,
    is_abort,
    successor_failure,
    unexpected,
)
from fedanon.party.ledgered import LedgerGate
from fedanon.party.mpcservice import MpcRpcs
from fedanon.party.pairservice import PairwiseRpcs
from fedanon.party.prepare import Proposal, accepted_line, preload_pinned, prepare_run
from fedanon.party.relay import RelayWorker, Vector
from fedanon.party.run import PartyRun, Peer
from fedanon.party.runs import RunRegistry
from fedanon.party.tablecache import TableCache
from fedanon.party.unionservice import UnionRpcs
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security.auth import Policy, check_caller, peer_identity
from fedanon.security.certs import load_private_key
from fedanon.security.keyagree import chain_start
from fedanon.security.tls import TlsMaterial, insecure_channel

log = logging.getLogger(__name__)
T = TypeVar("T")

SERVICE = "/fedanon.v1.Party/"
HEALTH = "/grpc.health.v1.Health/"
FORWARD_MARGIN_S = 2.0  # kept back from the caller's deadline: time to report a failure
LEADER_METHODS = (
    "Prepare",
    "Collect",
    "Instruct",
    "PairKeys",
    "Contribute",
    "UnionKey",
    "UnionBatch",
    "Mix",
    "Status",
    "CoalitionCheck",
    "Abort",
    "Finish",
)


def method_policies(leader: str) -> dict[str, Policy]:
    """Who may call what (used by the interceptor; a method not listed here is refused)."""
    table = {SERVICE + m: Policy.of({"leader"}, {leader}) for m in LEADER_METHODS}
    # the ring predecessor (the leader for position 0); checked per run in Relay
    table[SERVICE + "Relay"] = Policy.of({"party", "leader"})
    # health: any federation member may Check (fedanon health uses its own).  Not Watch: a
    # watch blocks one of the daemon's server threads for as long as its caller keeps it
    # open (grpc_health's blocking watcher), so a few dozen would leave no thread for runs
    table[HEALTH + "Check"] = Policy.of({"party", "leader"})
    return table


def _fail(context: grpc.ServicerContext, f: Failure) -> NoReturn:
    md = [(MD_PARTY, f.party), (MD_PHASE, f.phase), (MD_KIND, f.kind)]
    if f.rule:
        md.append((MD_RULE, f.rule))
    context.set_trailing_metadata(tuple(md))
    context.abort(f.code, f.detail)
    raise AssertionError("unreachable")


def _log_rows(source: DataSource) -> RowsRead:
    """The daemon's own progress lines while it reads (as :func:`encode_table` logs them)."""
    label = safe(source.name, 200) if isinstance(source, Path) else "the database"
    return Progress(to_log(log, f"loading {label}")).rows


def _both(a: RowsRead, b: RowsRead) -> RowsRead:
    def rows(n: int) -> None:
        a(n)
        b(n)

    return rows


def _unreachable(exc: grpc.RpcError) -> bool:
    """A connection failure of the channel itself (no party reported anything)."""
    return exc.code() == grpc.StatusCode.UNAVAILABLE and not rpc.failure_metadata(exc)


class PartyService(PairwiseRpcs, MpcRpcs, UnionRpcs, pb_grpc.PartyServicer):
    def __init__(
        self, config: PartyConfig, tls: TlsMaterial, *, ledger: LedgerGate, insecure: bool = False
    ) -> None:
        self.config = config
        self.ledger = ledger  # every Prepare and run outcome is recorded there
        self.tls = tls
        self.insecure = insecure
        self.runs = RunRegistry(
            config.name, config.idle_timeout_s, config.max_age_s, config.max_wait_s
        )
        self.cap = CallCap(config.max_wait_s)  # no call outlasts the daemon's maximum wait
        self.runs.on_drop = ledger.ended
        self.tables = TableCache(config.data, config.keep_table, config.memory_budget)
        self.tls_key: ec.EllipticCurvePrivateKey = load_private_key(tls.key)

    def preload(self, done: Callable[[EncodedTable | None], None] | None = None) -> bool:
        """A pinned spec: load the table in the background now (see :mod:`.tablecache`);
        ``done`` is then called with the loaded table (None: the load failed).  False if
        nothing is loaded ahead (``done`` is not called)."""
        try:
            return preload_pinned(self.config, self.tables, done)
        except FedanonError as exc:  # the first Prepare reports it to the leader
            log.warning("cannot load the table ahead of the first run: %s", safe(str(exc)))
            return False

    # helpers ----------------------------------------------------------------------------
    def _guard(
        self,
        context: grpc.ServicerContext,
        phase: str,
        fn: Callable[[], T],
        *,
        watchdog: bool = True,
    ) -> T:
        """Run ``fn``; map errors to a status and metadata naming the failing party.

        Logged and sent texts are sanitized; a record value never reaches either (data
        errors carry file, line and column only).  The call is cancelled if it still runs
        after the daemon's maximum wait (:class:`CallCap`), unless ``watchdog`` is False:
        Prepare, a single request and a small answer that nothing can hold inside gRPC,
        whose work -- reading this hospital's table, which may take longer than the
        maximum wait -- is honest and bounded by the table (its waits stay capped).
        """
        if watchdog:
            self.cap.arm(context)
        try:
            return fn()
        except FedanonError as exc:
            _fail(context, classify(exc, self.config.name, phase))
        except Exception as exc:  # never gRPC's default answer, which quotes str(exc)
            if is_abort(exc):
                raise
            _fail(context, unexpected(exc, self.config.name, phase))

    def _caller(self, context: grpc.ServicerContext) -> str:
        if self.insecure:
            return self.config.leader
        try:
            return peer_identity(context).name
        except AuthError:
            return "-"

    def _connect(self, peer: Peer) -> grpc.Channel:
        if self.insecure:
            return insecure_channel(peer.address)
        return self.tls.channel(peer.address, expected_name=peer.name)

    # Prepare ----------------------------------------------------------------------------
    def Prepare(self, request: pb.PrepareRequest, context: grpc.ServicerContext) -> pb.PrepareReply:
        run_id = bytes(request.run_id)

        def work() -> pb.PrepareReply:
            proposal = Proposal(
                run_id=run_id,
                spec_toml=request.spec_toml,
                files=dict(request.files),
                ring=tuple(Peer(p.name, p.address) for p in request.ring),
                position=request.ring_position,
                secure_sum=secure_sum_from_pb(request.secure_sum),
            )
            pairwise = proposal.secure_sum == "pairwise"
            mpc = mpc_addresses_from_pb(request.ring)  # m-privacy's workers, ring order

            def connect_successor() -> None:  # once the proposal is accepted, while reading
                if not pairwise and proposal.position + 1 < len(proposal.ring):
                    succ = proposal.ring[proposal.position + 1]
                    self.runs.connect((succ.name, succ.address), lambda: self._connect(succ))

            launched: list[mpcrun.MpcRun] = []  # m > 0: the run's MPC worker, once started
            with self.ledger.prepare(context, run_id) as admit, self.runs.loading(run_id) as rows:

                def early(p: Proposal, spec: RunSpec, digest: bytes) -> None:
                    names = tuple(peer.name for peer in p.ring)
                    mpcrun.check_proposal(self.config, spec, names, mpc)  # m > 0: no MPC, no read
                    admit.early(p, spec, digest)
                    # m > 0: the worker starts and connects to the others' while the table is read
                    worker = mpcrun.launch(self.config, spec, p.run_id, p.ring, p.position, mpc)
                    launched.extend([worker] if worker is not None else [])

                try:
                    run, digest = prepare_run(
                        self.config,
                        proposal,
                        on_accepted=connect_successor,
                        tables=self.tables,
                        progress=_both(rows, _log_rows(self.config.data)),
                        before_read=early,  # an exhausted budget refuses before any read
                    )
                    run.chain = chain_start(run.run_id, digest)  # the spec this party accepted
                    if not context.is_active():  # the leader gave up (another party failed)
                        log.info("run %s: Prepare cancelled by the leader", run.run_id.hex()[:8])
                        raise RunAborted("Prepare was cancelled")
                    admit(run, digest)  # the budgets, ledgered before any statistic can leave
                    if pairwise:  # the per-run X25519 key, signed, goes back with the answer
                        key = key_to_pb(pairsum.start(run, self.tls_key, self.tls.cert))
                    if launched:  # the worker gets this hospital's record count
                        run.mpc = launched[0].begin(run.party.table.n_rows)
                    self.runs.add(run)
                    launched.clear()  # closing the run stops its worker from here on
                finally:
                    for worker in launched:  # not accepted after all: the worker ends
                        worker.close()
            log.info("%s", accepted_line(run, self._caller(context), digest, self.config.policy))
            reply = pb.PrepareReply(run_hash=digest, name=self.config.name)
            if pairwise:
                reply.sum_key.CopyFrom(key)
            return reply

        return self._guard(context, "Prepare", work, watchdog=False)

    # Relay / Collect --------------------------------------------------------------------
    def Relay(
        self, request_iterator: Iterator[pb.VectorChunk], context: grpc.ServicerContext
    ) -> pb.Ack:
        """Check and store the vector, acknowledge; the run's worker adds and forwards."""

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
                vector = Vector(
                    round=header.round,
                    phase=phase_from_pb(header.phase),
                    layout_hash=bytes(header.layout_hash),
                    instructions=header.instructions,
                    data=vec,
                    deadline=self.cap.deadline(context, rpc.STREAM_TIMEOUT_S),
                    chain=bytes(header.chain),
                )
                run.receive(vector, lambda: self._worker(run))
            return pb.Ack(ok=True)

        return self._guard(context, "Relay", work)

    def _worker(self, run: PartyRun) -> RelayWorker:
        send = self._sender(run)
        return RelayWorker(f"{run.run_id.hex()[:8]}", lambda v: run.process(v, send))

    def _sender(self, run: PartyRun) -> Callable[[Vector], None]:
        """Relay to the successor within what is left of the caller's deadline."""
        succ = run.successor

        def send(v: Vector) -> None:
            if succ is None:
                raise ProtocolError("the last party of the ring has no successor")
            budget = v.deadline - time.monotonic() - FORWARD_MARGIN_S
            if budget <= 0:
                raise TimedOut(f"the run's deadline leaves no time to relay {v.label}")
            peer = (succ.name, succ.address)
            for attempt in (0, 1):
                chan = self.runs.channel(peer, lambda: self._connect(succ))
                stub = pb_grpc.PartyStub(chan)  # type: ignore[no-untyped-call]
                chunks = rpc.encode_vector(
                    v.data,
                    run_id=run.run_id,
                    round=v.round,
                    phase=phase_to_pb(v.phase),
                    layout_hash=v.layout_hash,
                    instructions=v.instructions,
                    chain=v.chain,
                )
                try:
                    stub.Relay(
                        chunks, timeout=max(v.deadline - time.monotonic() - FORWARD_MARGIN_S, 0.01)
                    )
                    return
                except grpc.RpcError as exc:
                    # a channel kept from an earlier run may be in reconnect back-off after
                    # the successor restarted: once, a fresh channel (a repeat is harmless:
                    # the successor drops a vector it already holds)
                    if attempt == 0 and _unreachable(exc) and self.runs.forget(peer, chan):
                        log.info("run %s: new channel to %s", run.run_id.hex()[:8], succ.name)
                        continue
                    f = successor_failure(exc, succ.name, succ.address, run.downstream)
                    raise PeerFailed(f) from None

        return send

    def Collect(
        self, request: pb.CollectRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.VectorChunk]:
        """The sum of a round, as soon as it exists (the call is made with the Relay)."""

        def work() -> list[pb.VectorChunk]:
            with self.runs.use(bytes(request.run_id)) as run:
                phase = phase_from_pb(request.phase)
                deadline = self.cap.deadline(context, rpc.STREAM_TIMEOUT_S)
                layout, vec = run.collected(request.round, phase, deadline, context.is_active)
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

    # Instruct / Status ------------------------------------------------------------------
    def Instruct(self, request: pb.Instruction, context: grpc.ServicerContext) -> pb.Ack:
        def work() -> pb.Ack:
            with self.runs.use(bytes(request.run_id)) as run:
                update = update_from_pb(request)
                deadline = self.cap.deadline(context, rpc.DEFAULT_TIMEOUT_S)
                if run.instruct(request.seq, update, deadline, chained=request.chained):
                    run.progress()  # a re-sent old instruction (a no-op) is none
            return pb.Ack(ok=True)

        return self._guard(context, "Instruct", work)

    def Status(self, request: pb.StatusRequest, context: grpc.ServicerContext) -> pb.RunStatus:
        def work() -> pb.RunStatus:
            run_id = bytes(request.run_id)
            rows = self.runs.rows_read(run_id)
            if rows is not None:  # Prepare is still reading the table
                policy = self.config.policy
                if policy is not None and not policy.share_progress:
                    rows = 0  # this hospital does not tell how far it got
                return pb.RunStatus(preparing=True, rows_read=rows)
            run = self.runs.peek(run_id)  # not a use: keeps no run alive
            st = run.status()
            out = pb.RunStatus(instructions=st.instructions, received=st.received, done=st.done)
            if st.failure is not None:
                f = st.failure
                out.failed_party, out.failed_phase = f.party, f.phase
                out.failed_kind, out.failed_detail = f.kind, f.detail
            return out

        return self._guard(context, "Status", work)

    # Abort / Finish ---------------------------------------------------------------------
    def Abort(self, request: pb.AbortRequest, context: grpc.ServicerContext) -> pb.Ack:
        run_id = bytes(request.run_id)
        reason = safe(request.reason, 300)  # starts with the leader's phase: the ledger's too
        log.warning("run %s aborted by the leader: %s", run_id.hex()[:8], reason)
        self.runs.drop(run_id, f"aborted by the leader: {reason}" if reason else "aborted")
        return pb.Ack(ok=True)

    def Finish(self, request: pb.FinishRequest, context: grpc.ServicerContext) -> pb.Ack:
        self.runs.drop(bytes(request.run_id), "finished")
        return pb.Ack(ok=True)
