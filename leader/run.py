"""One joint run, driven by the leader, for every federated method: connect, Prepare, the
rounds over the secure sum, the method's release, the one publisher (table and report, both or
neither: :func:`fedanon.methods.publish.publish_release`), Finish.

What differs between methods is the method's leader side (:attr:`fedanon.methods.base.Method.
leader_side`, loaded through :func:`fedanon.methods.registry.leader_side`): the LKC family's
rounds by argmax and its secure record union (:mod:`fedanon.leader.records`), DiffGen's
exponential mechanism and noisy counts (:mod:`fedanon.leader.counts`).  A method without a
federated variant is refused from its capability, in one place
(:func:`fedanon.methods.registry.require_federated`), before any party is contacted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fedanon.apispec import Spec
from fedanon.io.fsutil import Pending
from fedanon.io.table import Schema
from fedanon.io.tablewrite import warm_up
from fedanon.leader.config import FederationConfig, check_parties
from fedanon.leader.links import Link, Traffic, connect_links, leader_tls
from fedanon.leader.mixunion import fetch_keys
from fedanon.leader.opening import Outcome, open_run
from fedanon.leader.pairwise import new_federation
from fedanon.methods import registry
from fedanon.methods.publish import publish_release
from fedanon.model.spec import RunSpec
from fedanon.net import rpc
from fedanon.net.meta import close_channel
from fedanon.security.certs import load_private_key
from fedanon.security.tls import TlsMaterial
from fedanon.tds.engine import Federation, Progress

log = logging.getLogger(__name__)
__all__ = ["LeaderSide", "Outcome", "RunContext", "leader_side_of", "run_federation", "summary"]


@dataclass
class RunContext:
    """What a method's leader side works with once every party prepared the run."""

    cfg: FederationConfig
    tls: TlsMaterial
    tls_key: Any
    schema: Schema
    run_id: bytes
    links: Sequence[Link]
    traffic: Traffic
    pool: ThreadPoolExecutor
    deadline: rpc.Deadline
    keys: Any = None  # the mix-net's keys (union = "mixnet"), asked before the rounds
    rounds: int = 0


class LeaderSide(Protocol):
    """A method's leader side: built from the spec and the run's options (refusing what does
    not apply, before anyone is contacted), then the rounds, its release, its report."""

    def __init__(self, spec: RunSpec, union: str, source: str, seed: int | None) -> None: ...

    def check_schema(self, schema: Schema) -> None: ...

    def rounds(self, ctx: RunContext, fed: Federation, progress: Progress | None) -> None: ...

    def release(self, ctx: RunContext, fed: Any) -> None: ...

    def report(self, ctx: RunContext, federation: dict[str, Any]) -> dict[str, Any]: ...

    def table(self, output: Path) -> Pending: ...

    @property
    def records(self) -> int: ...

    @staticmethod
    def summary(rep: dict[str, Any], output: Path, report_path: Path | None) -> str: ...


def leader_side_of(
    spec_path: Path, spec: RunSpec, union: str, source: str, seed: int | None
) -> LeaderSide:
    """The leader side of the spec's method (refused without a federated variant), built
    from the spec and the run's options: what does not apply is refused here, before any
    party is contacted (``source``: where ``union`` was set)."""
    method = registry.require_federated(spec_path)
    method.check_spec(spec)
    side: LeaderSide = registry.leader_side(method)(spec, union, source, seed)
    return side


def summary(spec_path: Path, rep: dict[str, Any], output: Path, report: Path | None) -> str:
    """The CLI's summary of a federated run of the spec's method."""
    side = registry.leader_side(registry.of_spec_lenient(spec_path))
    text: str = side.summary(rep, output, report)
    return text


def run_federation(
    cfg: FederationConfig,
    *,
    seed: int | None = None,
    insecure: bool = False,
    progress: Progress | None = None,
    startup_seconds: float | None = None,
    links: Sequence[Link] | None = None,
) -> Outcome:
    """The whole joint run; writes output (and report) only if everything succeeded.
    ``seed``: a fixed seed for a method that draws (DiffGen; tests and experiments only,
    the release is then NOT PRIVATE).  ``startup_seconds``: how long `fedanon federate` took
    to start the daemons (reported apart from the leader's own time).  ``links``: from
    :func:`connect_links` made earlier (the CLI connects before it loads this module), else
    made here first thing, so that the handshakes overlap loading the spec."""
    t_start = time.perf_counter()
    check_parties(cfg.parties, cfg.source)
    tls = leader_tls(cfg)
    links = list(links) if links is not None else connect_links(cfg, tls, insecure)
    try:
        method = registry.require_federated(cfg.spec)  # exit 2 with the reason, first
        one = Spec.from_toml(cfg.spec)  # the one spec; checked by its method
        spec, reader = one.run_spec, one.taxonomy_reader()
        side = leader_side_of(cfg.spec, spec, cfg.union, cfg.source, seed)
        schema = method.schema(spec, reader)
        side.check_schema(schema)
        tls_key = load_private_key(tls.key)
    except BaseException:
        for link in links:
            close_channel(link.channel)
        raise
    want = registry.get(spec.privacy.model).run_hash(spec, schema.files)
    opened = open_run(cfg, tls, cfg.spec, schema, want, insecure, links)
    ctx = RunContext(
        cfg,
        tls,
        tls_key,
        schema,
        opened.run_id,
        opened.links,
        opened.traffic,
        opened.pool,
        opened.deadline,
    )
    with opened.guard():
        fed = new_federation(
            cfg.secure_sum,
            opened.run_id,
            opened.links,
            opened.traffic,
            opened.deadline,
            opened.pool,
            opened.sum_keys,
        )
        fed.start_chain(want)  # the ring's vectors carry the chain the parties started
        if cfg.union == "mixnet":  # the mix keys are asked now and arrive while the rounds run
            ctx.keys = fetch_keys(
                opened.run_id, opened.links, tls.ca, opened.traffic, opened.pool, opened.deadline
            )
        opened.phase = "rounds"
        warm_up()  # the release writer loads while the leader waits on the sums
        t0 = time.perf_counter()
        side.rounds(ctx, fed, progress)
        t_rounds = time.perf_counter() - t0
        opened.phase = "union"
        t1 = time.perf_counter()
        side.release(ctx, fed)
        t_union = time.perf_counter() - t1
        fed.settle()  # every Instruction acknowledged before anything is published
    rep: dict[str, Any] = {}

    def release() -> None:  # while the parties acknowledge Finish
        federation = _federation(cfg, ctx, t_rounds, t_union, t_start)
        if startup_seconds is not None:
            federation["seconds"]["daemon_startup"] = round(startup_seconds, 4)
        federation["sums"] = fed.sums
        for step, secs in opened.seconds.items():  # the opening, each step's wall time
            federation["seconds"][step] = round(secs, 4)
        rep.update(side.report(ctx, federation))
        publish_release(side.table(cfg.output), cfg.report, rep)  # both or neither

    opened.finish(release)
    return Outcome(rep, side.records)


def _federation(
    cfg: FederationConfig, ctx: RunContext, t_rounds: float, t_union: float, t_start: float
) -> dict[str, Any]:
    traffic = ctx.traffic
    net = traffic.seconds.get("network", 0.0)
    crypto = traffic.seconds.get("crypto", 0.0)
    total = time.perf_counter() - t_start
    return {
        "parties": [p.name for p in cfg.parties],
        "run_id": ctx.run_id.hex(),  # as the hospitals' privacy ledgers name the run
        "rounds": ctx.rounds,
        "secure_sum": cfg.secure_sum,
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
