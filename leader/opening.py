"""The opening and the end of a joint run, the same for an LKC and a DP run.

:func:`open_run` checks the leader's certificate, opens a link to every party, checks that
each answers, and has every party Prepare (check the proposal, read its table) in parallel.
The :class:`OpenRun` it returns carries the run id, the links, the traffic counters, the
deadline and the worker pool; :meth:`OpenRun.guard` aborts the run at every party on any
failure (naming the phase) and :meth:`OpenRun.finish` tells every party the run completed
while the leader publishes.
"""

from __future__ import annotations

import logging
import queue
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from fedanon.errors import ConfigError, FedanonError, RunAborted
from fedanon.io.table import Schema
from fedanon.leader.config import FederationConfig
from fedanon.leader.links import (
    Link,
    PartyFailed,
    PartyRejected,
    Traffic,
    connect_links,
    leader_tls,
)
from fedanon.leader.mpccheck import check_mpc_parties
from fedanon.leader.preparewatch import ProgressWatch
from fedanon.leader.reach import LeaderTls, check_reachable
from fedanon.net import rpc
from fedanon.net.convert import secure_sum_to_pb
from fedanon.net.meta import close_channel
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security.tls import TlsMaterial

log = logging.getLogger(__name__)
ABORT_TIMEOUT_S = 5.0
INSECURE = "*** --insecure: the federation runs WITHOUT TLS. Never with real data. ***"

__all__ = ["ABORT_TIMEOUT_S", "OpenRun", "Outcome", "leader_tls", "open_run"]


@dataclass(frozen=True)
class Outcome:
    """What a finished run released: its report and the number of records."""

    report: dict[str, Any]
    records: int


class OpenRun:
    """A run every party has prepared: what the rounds and the union work with."""

    def __init__(
        self,
        cfg: FederationConfig,
        tls: TlsMaterial,
        insecure: bool,
        links: Sequence[Link] | None = None,
    ) -> None:
        if insecure:
            log.warning(
                "*** --insecure: the federation runs WITHOUT TLS. Never with real data. ***"
            )
        self.cfg = cfg
        self.insecure = insecure
        self.links = list(links) if links is not None else connect_links(cfg, tls, insecure)
        self.run_id = secrets.token_bytes(16)
        self.traffic = Traffic()
        self.deadline = rpc.Deadline(cfg.deadline_seconds)
        self.pool = ThreadPoolExecutor(
            # a sum keeps two calls in flight and a decision one per party: never queue
            max_workers=2 * len(self.links) + 4,
            thread_name_prefix="leader",
        )
        self.phase = "connect"
        self.seconds: dict[str, float] = {}  # wall time of the opening's steps
        self.sum_keys: dict[str, pb.SignedKey] = {}  # pairwise: each party's signed key

    @contextmanager
    def guard(self) -> Iterator[None]:
        """On any failure inside: abort the run at every party that knows it, close the
        links, and raise a :class:`FedanonError` naming the phase."""
        try:
            yield
        except BaseException as exc:
            reason = str(exc) if isinstance(exc, FedanonError) else type(exc).__name__
            if self.phase != "connect":  # before Prepare no party knows the run
                _abort(self.run_id, self.links, f"{self.phase}: {reason}", self.pool)
            self.close()
            if isinstance(exc, FedanonError) or not isinstance(exc, Exception):
                raise
            raise RunAborted(
                f"run failed during {self.phase}: {type(exc).__name__}: {exc}"
            ) from exc

    def finish(self, publish: Callable[[], None]) -> None:
        """Tell every party the run completed and ``publish`` meanwhile (a party that misses
        Finish drops the run when idle); then close the links."""
        req = pb.FinishRequest(run_id=self.run_id)
        futs = [
            (lk, lk.stub.Finish.future(req, timeout=rpc.DEFAULT_TIMEOUT_S)) for lk in self.links
        ]
        try:
            publish()
        finally:
            for link, fut in futs:
                try:
                    fut.result()
                except Exception as exc:
                    log.warning(
                        "%s did not acknowledge Finish (%s); the release is complete (all "
                        "it sent came before Finish) and is published, but %s drops the run "
                        "when idle (or at its next start) and its privacy ledger records it "
                        "as aborted, its budget spent",
                        link.name,
                        _status_name(exc),
                        link.name,
                    )
            self.close()

    def close(self) -> None:
        for link in self.links:
            close_channel(link.channel)
        self.pool.shutdown(wait=False)


def open_run(
    cfg: FederationConfig,
    tls: TlsMaterial,
    spec_path: Path,
    schema: Schema,
    want: bytes,
    insecure: bool = False,
    links: Sequence[Link] | None = None,
) -> OpenRun:
    """Connect to every party and Prepare the run there; ``want`` is the run hash every
    party must answer with (it agreed to the same spec and taxonomies).  ``links``: made by
    :func:`connect_links` earlier (already connecting), else made now."""
    spec_text = spec_path.read_text(encoding="utf-8")
    run = OpenRun(cfg, tls, insecure, links)
    with run.guard():
        mpc = check_mpc_parties(schema.spec, cfg)  # m > 0: refused before anyone is asked
        t0 = time.perf_counter()
        run.traffic.timed("network", lambda: _check_reachable(cfg, run.links, insecure, run.pool))
        run.phase = "prepare"
        t1 = time.perf_counter()
        run.traffic.timed(
            "network",
            lambda: _prepare(
                run.run_id,
                spec_text,
                schema,
                want,
                run.links,
                run.traffic,
                run.deadline,
                cfg.secure_sum,
                run.sum_keys,
                mpc,
            ),
        )
        run.seconds = {"connect": t1 - t0, "prepare": time.perf_counter() - t1}
    return run


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
    run_id: bytes,
    spec_text: str,
    files: dict[str, bytes],
    links: Sequence[Link],
    i: int,
    secure_sum: str = "pairwise",
    mpc: dict[str, str] | None = None,
) -> pb.PrepareRequest:
    ring = [
        pb.PartyRef(name=lk.name, address=lk.address, mpc_address=(mpc or {}).get(lk.name, ""))
        for lk in links
    ]
    return pb.PrepareRequest(
        run_id=run_id,
        spec_toml=spec_text,
        files=files,
        ring=ring,
        ring_position=i,
        secure_sum=secure_sum_to_pb(secure_sum),
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
    deadline: rpc.Deadline,
    secure_sum: str = "pairwise",
    sum_keys: dict[str, pb.SignedKey] | None = None,
    mpc: dict[str, str] | None = None,
) -> None:
    """Prepare at every party in parallel (``sum_keys`` gets each party's signed pairwise
    key; ``mpc``: the MPC workers' addresses by party, for an m-private run).

    A party reads its whole table inside Prepare, so the call gets the run's remaining
    budget; after :data:`fedanon.leader.preparewatch.FIRST_S` the leader shows how far each
    party has read (:class:`ProgressWatch`).  Every call is waited for (each ends by the
    run's deadline), also after a failure: which hospital is named must not depend on whose
    answer came first -- that order follows the data (where a table's first failing record
    is).  Raised is the first refusal in ring order (else the first other failure in ring
    order); every further one is logged, in ring order.
    """
    files = {k: v.encode("utf-8") for k, v in schema.files.items()}
    issued: list[tuple[Link, pb.PrepareRequest, Any]] = []
    done: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i, link in enumerate(links):
        req = _prepare_request(run_id, spec_text, files, links, i, secure_sum, mpc)
        call = link.stub.Prepare.future(req, timeout=deadline.remaining())
        call.add_done_callback(lambda _f, i=i: done.put(i))
        issued.append((link, req, call))
    watch = ProgressWatch(run_id, links, deadline)
    try:
        errors: list[tuple[int, Exception]] = []
        for _ in issued:
            i = watch.wait(done)
            watch.ready(i)
            err = _outcome(*issued[i], want, traffic, sum_keys)
            if err is not None and not isinstance(err, _Cancelled):
                errors.append((i, err))
    except BaseException:
        for *_, c in issued:
            c.cancel()
        raise
    # a refusal explains most; then ring order -- never the order the answers came in
    errors.sort(key=lambda e: (not isinstance(e[1], PartyRejected), e[0]))
    for _, e in errors[1:]:
        log.warning("prepare: also %s", e)
    if errors:
        raise errors[0][1]


def _outcome(
    link: Link,
    req: pb.PrepareRequest,
    call: Any,
    want: bytes,
    traffic: Traffic,
    sum_keys: dict[str, pb.SignedKey] | None = None,
) -> Exception | None:
    """The failure of one finished Prepare call (None: the party prepared the same run)."""

    def result(_stub: pb_grpc.PartyStub) -> pb.PrepareReply:
        try:
            reply: pb.PrepareReply = call.result()
        except grpc.FutureCancelledError:
            raise _Cancelled from None
        return reply

    try:
        reply = link.call("prepare", result)
    except _Cancelled as exc:
        return exc
    except FedanonError as exc:
        return exc
    traffic.add("prepare", sent=req.ByteSize(), received=reply.ByteSize())
    if reply.name != link.name:
        return PartyFailed(link.name, "prepare", f"answered as {reply.name!r}")
    if reply.run_hash != want:
        return ConfigError(
            f"party {link.name} would run a different spec or taxonomies than the leader "
            f"(run hash {reply.run_hash.hex()[:16]} != {want.hex()[:16]}); "
            "make every party accept the leader's spec"
        )
    if sum_keys is not None and reply.HasField("sum_key"):
        sum_keys[link.name] = reply.sum_key
    return None


def _abort(run_id: bytes, links: Sequence[Link], reason: str, pool: ThreadPoolExecutor) -> None:
    req = pb.AbortRequest(run_id=run_id, reason=reason[:500])

    def one(link: Link) -> None:
        try:
            link.stub.Abort(req, timeout=ABORT_TIMEOUT_S)
        except Exception as exc:  # best effort: the party may be the one that died
            log.warning("abort at %s failed: %s", link.name, _status_name(exc))

    list(pool.map(one, links))


def _status_name(exc: Exception) -> str:
    """A failed call's gRPC status (UNAVAILABLE, DEADLINE_EXCEEDED, ...), else the type of
    the error: never a gRPC internal class such as _MultiThreadedRendezvous."""
    code = exc.code() if isinstance(exc, grpc.RpcError) and hasattr(exc, "code") else None
    return code.name if isinstance(code, grpc.StatusCode) else type(exc).__name__
