"""One joint run, driven by the leader: Prepare, the TDS rounds, the secure union, release."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from fedanon.errors import RunAborted
from fedanon.io.release import output_columns, publish
from fedanon.io.table import build_schema
from fedanon.io.tablewrite import ColumnData
from fedanon.kkm.federation import refuse_federated_kkm
from fedanon.leader.config import FederationConfig, check_parties
from fedanon.leader.links import Link, Traffic, connect_links, leader_tls
from fedanon.leader.mixunion import fetch_keys, pad_size, secure_union
from fedanon.leader.opening import Outcome, open_run
from fedanon.leader.pairwise import new_federation
from fedanon.leader.union import SumUnion, sum_union
from fedanon.leader.union import check_option as check_union_option
from fedanon.leader.union import choose as choose_union
from fedanon.model.checks import check_class_values
from fedanon.model.spec import load_spec, run_hash
from fedanon.net.meta import close_channel
from fedanon.security.certs import load_private_key
from fedanon.tds.decide import Decider
from fedanon.tds.engine import Progress, RunResult, run
from fedanon.tds.report import report

log = logging.getLogger(__name__)
__all__ = ["Outcome", "check_class_values", "run_federation"]


def run_federation(
    cfg: FederationConfig,
    *,
    insecure: bool = False,
    progress: Progress | None = None,
    startup_seconds: float | None = None,
    links: Sequence[Link] | None = None,
) -> Outcome:
    """The whole joint run; writes output (and report) only if everything succeeded.
    ``startup_seconds``: how long `fedanon federate` took to start the daemons (reported
    apart from the leader's own time).  ``links``: from :func:`connect_links` made earlier
    (the CLI connects before it loads this module), else made here first thing, so that the
    handshakes overlap loading the spec."""
    t_start = time.perf_counter()
    check_parties(cfg.parties, cfg.source)
    tls = leader_tls(cfg)
    links = list(links) if links is not None else connect_links(cfg, tls, insecure)
    try:
        refuse_federated_kkm(cfg.spec)
        spec, reader = load_spec(cfg.spec)
        check_class_values(spec)
        check_union_option(cfg.union, spec, cfg.source)
        schema = build_schema(spec, reader)
        tls_key = load_private_key(tls.key)
    except BaseException:
        for link in links:
            close_channel(link.channel)
        raise
    want = run_hash(spec, schema.files)
    opened = open_run(cfg, tls, cfg.spec, schema, want, insecure, links)
    run_id, links, traffic, pool = opened.run_id, opened.links, opened.traffic, opened.pool
    with opened.guard():
        n_class = len(spec.class_attr.values or ()) if spec.class_attr is not None else 1
        decider = Decider(spec, schema.new_trees(), max(n_class, 1))
        fed = new_federation(
            cfg.secure_sum, run_id, links, traffic, opened.deadline, pool, opened.sum_keys
        )
        # the mix keys are asked now and arrive while the rounds run
        keys = (
            fetch_keys(run_id, links, tls.ca, traffic, pool, opened.deadline)
            if cfg.union == "mixnet"
            else None
        )
        opened.phase = "rounds"
        t0 = time.perf_counter()
        result: RunResult = run(decider, fed, progress)
        decider.verify()
        t_rounds = time.perf_counter() - t0
        opened.phase = "union"
        t1 = time.perf_counter()
        method = choose_union(cfg.union, spec, decider, cfg.source)
        pad = 0
        if method == "mixnet":
            fed.flush()  # the final decision reaches every party before the mix-net starts
            pad = pad_size(spec, decider.state.trees, cfg.max_field_bytes)
            records = secure_union(
                run_id,
                links,
                cfg.name,
                tls_key,
                tls.cert,
                tls.ca,
                pad,
                traffic,
                pool,
                opened.deadline,
                keys,
            )
            data: Mapping[str, ColumnData] = _columns(output_columns(spec), records)
            if len(records) != int(decider.final_totals()[1].sum()):
                raise RunAborted("union: the number of records disagrees with the groups' sizes")
            done = SumUnion("mixnet")
        else:
            done = sum_union(method, spec, decider, fed, len(links))
            data = done.data
        t_union = time.perf_counter() - t1
        fed.settle()  # every Instruction acknowledged before anything is published
    cols = output_columns(spec)
    rep: dict[str, Any] = {}

    def release() -> None:  # while the parties acknowledge Finish
        extra = _extra(cfg, result, traffic, t_rounds, t_union, pad, t_start)
        extra["federation"]["union"] = done.report(traffic, t_union)
        if startup_seconds is not None:
            extra["federation"]["seconds"]["daemon_startup"] = round(startup_seconds, 4)
        extra["federation"]["sums"] = fed.sums
        for step, secs in opened.seconds.items():  # the opening, each step's wall time
            extra["federation"]["seconds"][step] = round(secs, 4)
        rep.update(report(spec, result, extra))
        publish(cfg.output, cols, data, cfg.report, rep)  # both or neither

    opened.finish(release)
    return Outcome(rep, len(data[cols[0]]))


def _columns(cols: list[str], records: Sequence[Sequence[str]]) -> dict[str, list[str]]:
    if any(len(r) != len(cols) for r in records):
        raise RunAborted("union: a record has the wrong number of fields")
    return {c: [r[i] for r in records] for i, c in enumerate(cols)}


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
            "count_sums": result.count_sums,  # < rounds when a sum decided several
            "pad_size": pad,
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
    }
