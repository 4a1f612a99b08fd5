"""One federated DiffGen run (``[privacy] model = "dp"``), driven by the leader.

The same connect / Prepare / Finish as an LKC run (:mod:`fedanon.leader.opening`), and the
same ring secure sum (:class:`fedanon.leader.ring.RingFederation`): the parties add their
local count statistics around the ring, the leader sees the totals -- the same aggregate
counts it sees in an LKC run -- runs the exponential mechanism on them and broadcasts each
selection.  After the h selections one more sum delivers the count of every final group x
class value (empty groups included); the leader adds the Laplace noise and publishes the
noisy count table.
There is no record union in a DP run: no record leaves a hospital, and a party of a DP run
refuses the union RPCs.

Each party checks the proposal against its own policy (``max_epsilon``) in Prepare, and
answers with :func:`fedanon.dp.spec.dp_run_hash`, which covers epsilon, h and the score.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fedanon.dp.randomness import NOT_PRIVATE, RandomSource
from fedanon.dp.release import release_file, report
from fedanon.dp.run import DPRun, check_table_size, new_decider, run_dp
from fedanon.dp.spec import dp_run_hash, is_dp_spec, load_dp_spec
from fedanon.errors import ConfigError
from fedanon.io.fsutil import Pending, atomic_write_all
from fedanon.io.table import build_schema
from fedanon.leader.config import FederationConfig, check_parties
from fedanon.leader.links import Link, Traffic, leader_tls
from fedanon.leader.opening import Outcome, open_run
from fedanon.leader.pairwise import new_federation
from fedanon.leader.ring import RingFederation
from fedanon.tds.engine import Progress

log = logging.getLogger(__name__)
__all__ = [
    "check_dp_options",
    "dp_summary",
    "is_dp_spec",
    "run_dp_federation",
]


def check_dp_options(union: str, output: Path, source: str) -> None:
    """What does not apply to a DP run, refused before anyone is contacted.  ``output``: any
    name (CSV, .gz or .parquet, as a centralized run writes)."""
    if union != "auto":
        raise ConfigError(
            f"union = {union!r} does not apply to a DP run: it releases noisy counts of the "
            "final groups, no records are integrated (there is no record union)",
            file=source,
            value=union,
            expected='union = "auto" (or no union setting)',
        )


def run_dp_federation(
    cfg: FederationConfig,
    *,
    seed: int | None = None,
    insecure: bool = False,
    progress: Progress | None = None,
    startup_seconds: float | None = None,
    links: Sequence[Link] | None = None,
) -> Outcome:
    """The whole joint DP run; writes output (and report) only if everything succeeded.
    ``seed``: a fixed seed for tests and experiments -- the release is then NOT PRIVATE.
    ``links``: as in :func:`fedanon.leader.run.run_federation`."""
    t_start = time.perf_counter()
    check_parties(cfg.parties, cfg.source)
    check_dp_options(cfg.union, cfg.output, cfg.source)
    spec, reader = load_dp_spec(cfg.spec)
    schema = build_schema(spec.run, reader)
    check_table_size(spec, schema)  # from the spec alone: refused before any Prepare
    tls = leader_tls(cfg)
    rng = RandomSource(seed)
    if not rng.private:
        log.warning("%s %d: the release is NOT differentially private", NOT_PRIVATE, seed)
    want = dp_run_hash(spec, schema.files)
    opened = open_run(cfg, tls, cfg.spec, schema, want, insecure, links)
    with opened.guard():
        decider = new_decider(spec, schema, rng)
        fed = new_federation(
            cfg.secure_sum,
            opened.run_id,
            opened.links,
            opened.traffic,
            opened.deadline,
            opened.pool,
            opened.sum_keys,
        )
        opened.phase = "rounds"
        t0 = time.perf_counter()
        counts = run_dp(decider, fed, progress)
        t_rounds = time.perf_counter() - t0
        fed.settle()  # every Instruction acknowledged before anything is published
    result = DPRun(spec, decider, counts, t_rounds)
    rep: dict[str, Any] = {}

    def release() -> None:  # while the parties acknowledge Finish
        rep.update(report(result))
        fed_rep = _federation_report(cfg, decider.state.round, fed, opened.traffic, t_start)
        fed_rep["seconds"]["rounds"] = round(t_rounds, 4)
        if startup_seconds is not None:
            fed_rep["seconds"]["daemon_startup"] = round(startup_seconds, 4)
        rep["federation"] = fed_rep
        rep["release"]["rows_written"] = int(counts.counts.size)
        _publish(cfg.output, cfg.report, result, rep)

    opened.finish(release)
    return Outcome(rep, int(counts.counts.sum()))


def _publish(output: Path, report_path: Path | None, result: DPRun, rep: dict[str, Any]) -> None:
    """The noisy table (predictors and class in spec order, then count; CSV, .gz or Parquet
    by the name) and the report: both or neither."""
    files = [release_file(output, result)[0]]
    if report_path is not None:
        files.append(Pending(report_path, lambda fh: json.dump(rep, fh, indent=2)))
    atomic_write_all(files)


def _federation_report(
    cfg: FederationConfig, rounds: int, fed: RingFederation, traffic: Traffic, t_start: float
) -> dict[str, Any]:
    net = traffic.seconds.get("network", 0.0)
    crypto = traffic.seconds.get("crypto", 0.0)
    total = time.perf_counter() - t_start
    return {
        "parties": [p.name for p in cfg.parties],
        "rounds": rounds,
        "sums": fed.sums,
        "union": "none: a DP run releases noisy counts of the final groups, no records",
        "leader_sees": "exact aggregate counts (as in an LKC run); the noise is added here",
        **traffic.summary(),
        "seconds": {
            "total": round(total, 4),
            "network": round(net, 4),
            "crypto_leader": round(crypto, 4),
            "compute_leader": round(max(total - net - crypto, 0.0), 4),
        },
    }


def dp_summary(rep: dict[str, Any], output: Path, report_path: Path | None) -> str:
    """The CLI's summary of a federated DP run."""
    from fedanon.dp.anonymize import summary_text

    fed = rep["federation"]
    sec = fed["seconds"]
    text = summary_text(rep, output, report_path)
    return (
        text + f"\n  federated over {len(fed['parties'])} parties, {fed['sums']} secure sums; "
        f"bytes sent {fed['bytes_total']['sent']}, received {fed['bytes_total']['received']}; "
        f"time {sec['total']:.2f}s at the leader (network {sec['network']:.2f}s)"
        + (
            f"; daemon start-up {sec['daemon_startup']:.2f}s before that"
            if "daemon_startup" in sec
            else ""
        )
        + "\n  no record union: the release is the noisy count table"
    )
