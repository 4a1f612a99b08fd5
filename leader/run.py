"""One joint run, driven by the leader: Prepare, the TDS rounds, the secure union, release."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import grpc

from fedanon.errors import ConfigError, FedanonError, RunAborted
from fedanon.io.release import output_columns, publish, report
from fedanon.io.table import Schema, build_schema
from fedanon.kkm.federation import refuse_federated_kkm
from fedanon.leader.config import FederationConfig, check_parties
from fedanon.leader.links import Link, PartyFailed, PartyRejected, Traffic
from fedanon.leader.mixunion import pad_size, secure_union
from fedanon.leader.reach import LeaderTls, check_reachable
from fedanon.leader.ring import RingFederation
from fedanon.leader.union import SumUnion, sum_union
from fedanon.leader.union import check_option as check_union_option
from fedanon.leader.union import choose as choose_union
from fedanon.model.spec import RunSpec, load_spec, run_hash
from fedanon.net import rpc
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security.certs import load_private_key
from fedanon.security.tls import TlsMaterial, insecure_channel
from fedanon.tds.decide import Decider
from fedanon.tds.engine import Progress, RunResult, run

log = logging.getLogger(__name__)
ABORT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Outcome:
    report: dict[str, Any]
    records: int


def check_class_values(spec: RunSpec) -> None:
    c = spec.class_attr
    if c is not None and c.values is None:
        raise ConfigError(
            f"the class attribute {c.name!r} needs its labels in the spec, e.g. "
            f'values = ["<=50K", ">50K"], so that every party codes classes identically',
            file=spec.source,
        )


def _links(cfg: FederationConfig, tls: TlsMaterial, insecure: bool) -> list[Link]:
    ring = frozenset(p.name for p in cfg.parties)
    out = []
    for p in cfg.parties:
        chan = insecure_channel(p.address) if insecure else tls.channel(p.address, p.name)
        stub = pb_grpc.PartyStub(chan)  # type: ignore[no-untyped-call]
        out.append(Link(p.name, p.address, chan, stub, ring))
    return out


def _check_reachable(
    cfg: FederationConfig, links: Sequence[Link], insecure: bool, pool: ThreadPoolExecutor
) -> None:
    """Every party answers within the connect timeout, or fail now naming it and why."""
    mine = None if insecure else LeaderTls(cfg.ca, cfg.cert, cfg.key)

    def one(link: Link) -> str | None:
        return check_reachable(
            link.channel, link.address, link.name, mine, cfg.connect_timeout_seconds
        )

    problems = [(lk, why) for lk, why in zip(links, pool.map(one, links), strict=True) if why]
    if problems:
        first, why = problems[0]
        more = [lk.name for lk, _ in problems[1:]]
        also = f" (also unreachable: {', '.join(more)})" if more else ""
        raise PartyFailed(first.name, "connect", f"{why}, at {first.address}{also}")


def _prepare_request(
    run_id: bytes, spec_text: str, files: dict[str, bytes], links: Sequence[Link], i: int
) -> pb.PrepareRequest:
    ring = [pb.PartyRef(name=lk.name, address=lk.address) for lk in links]
    return pb.PrepareRequest(
        run_id=run_id, spec_toml=spec_text, files=files, ring=ring, ring_position=i
    )


class _Cancelled(Exception):
    """A Prepare call the leader cancelled because another party failed."""


def _prepare(
    run_id: bytes,
    spec_text: str,
    schema: Schema,
    want: bytes,
    links: Sequence[Link],
    traffic: Traffic,
    pool: ThreadPoolExecutor,
    deadline: rpc.Deadline,
) -> None:
    """Prepare at every party in parallel.

    A party reads its whole table inside Prepare, so the call gets the run's remaining
    budget.  At the first failure the other calls are cancelled (a party drops a run whose
    Prepare was cancelled) and the first real failure is raised once every call has ended.
    """
    files = {k: v.encode("utf-8") for k, v in schema.files.items()}
    calls: list[Any] = []
    lock = threading.Lock()
    failed = threading.Event()

    def one(i: int) -> None:
        link = links[i]
        req = _prepare_request(run_id, spec_text, files, links, i)

        def send(stub: pb_grpc.PartyStub) -> pb.PrepareReply:
            call = stub.Prepare.future(req, timeout=deadline.remaining())
            with lock:
                calls.append(call)
                if failed.is_set():
                    call.cancel()
            try:
                return call.result()  # type: ignore[no-any-return]
            except grpc.FutureCancelledError:
                raise _Cancelled from None

        reply: pb.PrepareReply = link.call("prepare", send)
        traffic.add("prepare", sent=req.ByteSize(), received=reply.ByteSize())
        if reply.name != link.name:
            raise PartyFailed(link.name, "prepare", f"answered as {reply.name!r}")
        if reply.run_hash != want:
            raise ConfigError(
                f"party {link.name} would run a different spec or taxonomies than the leader "
                f"(run hash {reply.run_hash.hex()[:16]} != {want.hex()[:16]}); "
                "make every party accept the leader's spec"
            )

    futs = [pool.submit(one, i) for i in range(len(links))]
    pending = set(futs)
    while pending:
        done, pending = wait(pending, return_when=FIRST_EXCEPTION)
        if any(f.exception() is not None for f in done):
            with lock:
                failed.set()
                for call in calls:
                    call.cancel()
    errors = [e for f in futs if (e := f.exception()) is not None and not isinstance(e, _Cancelled)]
    errors.sort(key=lambda e: not isinstance(e, PartyRejected))  # a refusal explains most
    for e in errors[1:]:
        log.warning("prepare: also %s", e)
    if errors:
        raise errors[0]


def _abort(run_id: bytes, links: Sequence[Link], reason: str, pool: ThreadPoolExecutor) -> None:
    req = pb.AbortRequest(run_id=run_id, reason=reason[:500])

    def one(link: Link) -> None:
        try:
            link.stub.Abort(req, timeout=ABORT_TIMEOUT_S)
        except Exception as exc:  # best effort: the party may be the one that died
            log.warning("abort at %s failed: %s", link.name, type(exc).__name__)

    list(pool.map(one, links))


def _finish(run_id: bytes, links: Sequence[Link]) -> Callable[[], None]:
    """Tell every party the run completed; returns the wait for their acknowledgements (the
    leader publishes meanwhile: a party that misses Finish drops the run when idle)."""
    req = pb.FinishRequest(run_id=run_id)
    futs = [(lk, lk.stub.Finish.future(req, timeout=rpc.DEFAULT_TIMEOUT_S)) for lk in links]

    def wait() -> None:
        for link, fut in futs:
            try:
                fut.result()
            except Exception as exc:
                log.warning("finish at %s failed: %s", link.name, type(exc).__name__)

    return wait


def run_federation(
    cfg: FederationConfig,
    *,
    insecure: bool = False,
    progress: Progress | None = None,
    startup_seconds: float | None = None,
) -> Outcome:
    """The whole joint run; writes output (and report) only if everything succeeded.
    ``startup_seconds``: how long `fedanon federate` took to start the daemons (reported
    apart from the leader's own time)."""
    t_start = time.perf_counter()
    check_parties(cfg.parties, cfg.source)
    refuse_federated_kkm(cfg.spec)
    spec, reader = load_spec(cfg.spec)
    check_class_values(spec)
    check_union_option(cfg.union, spec, cfg.source)
    schema = build_schema(spec, reader)
    spec_text = cfg.spec.read_text(encoding="utf-8")
    tls = TlsMaterial.load(cfg.ca, cfg.cert, cfg.key)
    if tls.identity.role != "leader" or tls.identity.name != cfg.name:
        raise ConfigError(
            f"the leader certificate is for {tls.identity}, expected {cfg.name} (leader)",
            file=str(cfg.cert),
        )
    tls_key = load_private_key(tls.key)
    if insecure:
        log.warning("*** --insecure: the federation runs WITHOUT TLS. Never with real data. ***")
    links = _links(cfg, tls, insecure)
    run_id = secrets.token_bytes(16)
    traffic = Traffic()
    deadline = rpc.Deadline(cfg.deadline_seconds)
    phase = "connect"
    pool = ThreadPoolExecutor(max_workers=max(4, len(links)), thread_name_prefix="leader")
    try:
        traffic.timed("network", lambda: _check_reachable(cfg, links, insecure, pool))
        phase = "prepare"
        want = run_hash(spec, schema.files)
        traffic.timed(
            "network",
            lambda: _prepare(run_id, spec_text, schema, want, links, traffic, pool, deadline),
        )
        n_class = len(spec.class_attr.values or ()) if spec.class_attr is not None else 1
        decider = Decider(spec, schema.new_trees(), max(n_class, 1))
        fed = RingFederation(run_id, links, traffic, deadline, pool)
        phase = "rounds"
        t0 = time.perf_counter()
        result: RunResult = run(decider, fed, progress)
        decider.verify()
        t_rounds = time.perf_counter() - t0
        phase = "union"
        t1 = time.perf_counter()
        method = choose_union(cfg.union, spec, decider, cfg.source)
        pad = 0
        if method == "mixnet":
            pad = pad_size(spec, decider.state.trees, cfg.max_field_bytes)
            records = secure_union(
                run_id, links, cfg.name, tls_key, tls.cert, tls.ca, pad, traffic, pool, deadline
            )
            data = _columns(output_columns(spec), records)
            if len(records) != int(decider.final_totals()[1].sum()):
                raise RunAborted("union: the number of records disagrees with the groups' sizes")
            done = SumUnion("mixnet")
        else:
            done = sum_union(method, spec, decider, fed)
            data = done.data
        t_union = time.perf_counter() - t1
        fed.settle()  # every Instruction acknowledged before anything is published
    except BaseException as exc:
        reason = str(exc) if isinstance(exc, FedanonError) else type(exc).__name__
        if phase != "connect":  # before Prepare no party knows the run
            _abort(run_id, links, f"{phase}: {reason}", pool)
        _close(links, pool)
        if isinstance(exc, FedanonError) or not isinstance(exc, Exception):
            raise
        raise RunAborted(f"run failed during {phase}: {type(exc).__name__}: {exc}") from exc
    finished = _finish(run_id, links)
    try:
        cols = output_columns(spec)
        extra = _extra(cfg, result, traffic, t_rounds, t_union, pad, t_start)
        extra["federation"]["union"] = done.report(traffic, t_union)
        if startup_seconds is not None:
            extra["federation"]["seconds"]["daemon_startup"] = round(startup_seconds, 4)
        extra["federation"]["sums"] = fed.sums
        rep = report(spec, result, extra)
        publish(cfg.output, cols, data, cfg.report, rep)  # both or neither
    finally:
        finished()
        _close(links, pool)
    return Outcome(rep, len(data[cols[0]]))


def _columns(cols: list[str], records: Sequence[Sequence[str]]) -> dict[str, list[str]]:
    if any(len(r) != len(cols) for r in records):
        raise RunAborted("union: a record has the wrong number of fields")
    return {c: [r[i] for r in records] for i, c in enumerate(cols)}


def _close(links: Sequence[Link], pool: ThreadPoolExecutor) -> None:
    for link in links:
        link.channel.close()
    pool.shutdown(wait=False)


def _extra(
    cfg: FederationConfig,
    result: RunResult,
    traffic: Traffic,
    t_rounds: float,
    t_union: float,
    pad: int,
    t_start: float,
) -> dict[str, Any]:
    net = traffic.seconds.get("network", 0.0)
    crypto = traffic.seconds.get("crypto", 0.0)
    total = time.perf_counter() - t_start
    return {
        "federation": {
            "parties": [p.name for p in cfg.parties],
            "rounds": result.rounds,
            "pad_size": pad,
            **traffic.summary(),
            "seconds": {
                "total": round(total, 4),
                "rounds": round(t_rounds, 4),
                "union": round(t_union, 4),
                # leader view: wall time waiting on RPCs (every one: connect, Prepare, sums,
                # Instructions, union; network + remote work), leader-side crypto (masks,
                # mix keys, last layer), and the rest (leader decisions, setup)
                "network": round(net, 4),
                "crypto_leader": round(crypto, 4),
                "compute_leader": round(max(total - net - crypto, 0.0), 4),
            },
        }
    }
