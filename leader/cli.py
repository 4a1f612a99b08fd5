"""`fedanon leader run --config federation.toml`."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedanon.leader.config import FederationConfig

log = logging.getLogger(__name__)


def register(sub: Any) -> None:
    p = sub.add_parser("leader", help="drive a federated run")
    lsub = p.add_subparsers(dest="leader_command", required=True)
    r = lsub.add_parser("run", help="one joint run over the parties of federation.toml")
    r.add_argument("--config", type=Path, required=True, help="federation.toml")
    r.add_argument(
        "--insecure", action="store_true", help="NO TLS to the parties: local experiments only"
    )
    r.add_argument("--quiet", action="store_true", help="no summary")
    add_seed_option(r)
    from fedanon.report.cli import add_html_option

    add_html_option(r)
    r.set_defaults(handler=leader_run)


def main(argv: list[str]) -> int:
    """``fedanon leader ...`` without importing every other command's modules first: the
    leader starts its handshakes with the parties sooner (every round trip counts over a WAN)."""
    import argparse

    from fedanon.process import run_command

    parser = argparse.ArgumentParser(prog="fedanon")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(["leader", *argv])
    return run_command(args.handler, args)


def _lazy_seed(text: str) -> Any:
    """``--seed``'s type, importing the DP command only when the option is given (it pulls
    in the DP engine: a tenth of a second before the leader could start its handshakes)."""
    from fedanon.dp.cli import _seed

    return _seed(text)


def add_seed_option(p: Any) -> None:
    p.add_argument(
        "--seed",
        type=_lazy_seed,
        help="DP spec only: fixed seed for tests and experiments, the release is then NOT PRIVATE",
    )


def check_seed(seed: int | None, dp: bool, source: Path) -> None:
    """--seed only with a DP spec (an LKC run draws no randomness to fix)."""
    if seed is not None and not dp:
        from fedanon.errors import ConfigError

        raise ConfigError(
            "--seed applies only to a DP spec ([privacy] model = 'dp')", file=str(source)
        )


def leader_run(args: argparse.Namespace) -> int:
    from fedanon.io.fsutil import check_outputs
    from fedanon.kkm.federation import refuse_federated_kkm
    from fedanon.leader.config import check_parties, load_federation_config
    from fedanon.model import peek

    cfg = load_federation_config(args.config)
    check_parties(cfg.parties, cfg.source)
    refuse_federated_kkm(cfg.spec)  # exit 2 with the reason, before the generic spec errors
    dp = peek.spec_model(cfg.spec) == "dp"
    check_seed(args.seed, dp, cfg.spec)
    # before contacting anyone, without loading the engine: the outputs are new, writable,
    # distinct files, none of them one the run reads (a usage error costs no connection)
    reads = [args.config, cfg.spec, *peek.named_files(cfg.spec), cfg.ca, cfg.cert, cfg.key]
    check_outputs({"[run] output": cfg.output, "[run] report": cfg.report}, reads)
    from fedanon.report.cli import html_with_outputs

    # --html: checked here too; the release and report are held until the page is built
    with html_with_outputs(
        args.html, cfg.spec, cfg.output, cfg.report, report_flag="[run] report", reads=reads
    ):
        text = _run(args, cfg, dp)
    if not args.quiet:
        print(text)
    exit_now(0)
    return 0


def _run(args: argparse.Namespace, cfg: FederationConfig, dp: bool) -> str:
    """The run itself, from the handshakes on; its summary."""
    from fedanon.leader.links import connect_links, leader_tls

    # the handshakes with every party (TCP, TLS, HTTP/2: 2-3 round trips) run in gRPC's
    # threads while the rest of the leader loads and the spec is checked in full
    links = connect_links(cfg, leader_tls(cfg), args.insecure)
    from fedanon.net.meta import close_channel
    from fedanon.pandasgate import without_pandas

    try:
        check_run_outputs(cfg, [args.config])
    except BaseException:
        for link in links:
            close_channel(link.channel)
        raise
    without_pandas()
    if dp:
        from fedanon.leader.dp_run import dp_summary, run_dp_federation

        rep = run_dp_federation(cfg, seed=args.seed, insecure=args.insecure, links=links).report
        return dp_summary(rep, cfg.output, cfg.report)
    from fedanon.leader.run import run_federation

    out = run_federation(cfg, insecure=args.insecure, links=links)
    return summary(out.report, cfg.output)


def exit_now(code: int) -> None:
    """End the CLI process without the interpreter's teardown of gRPC and Arrow (about
    0.2-0.5 s): the release and the report are written, the links closed (and `federate`'s
    daemons stopped, its work directory removed).  Only from the main thread of the CLI
    process (in another thread it returns)."""
    import logging
    import os
    import sys
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def check_run_outputs(cfg: FederationConfig, also_read: Sequence[Path] = ()) -> None:
    """Before contacting anyone: output and report are new, distinct, writable files, and
    none of them is a file the run reads (config, spec, taxonomies, certificates, key)."""
    from fedanon.dp.spec import is_dp_spec
    from fedanon.io.fsutil import check_outputs
    from fedanon.kkm.federation import refuse_federated_kkm
    from fedanon.model.spec import load_spec, taxonomy_paths

    refuse_federated_kkm(cfg.spec)  # exit 2 with the reason, before the generic spec errors
    if is_dp_spec(cfg.spec):
        from fedanon.dp.spec import load_dp_spec
        from fedanon.leader.dp_run import check_dp_options

        check_dp_options(cfg.union, cfg.output, cfg.source)
        spec = load_dp_spec(cfg.spec)[0].run
    else:
        spec, _ = load_spec(cfg.spec)
    reads = [*also_read, cfg.spec, *taxonomy_paths(spec, cfg.spec), cfg.ca, cfg.cert, cfg.key]
    check_outputs({"[run] output": cfg.output, "[run] report": cfg.report}, reads)


def summary(rep: dict[str, Any], output: Path) -> str:
    fed = rep["federation"]
    sec = fed["seconds"]
    return (
        f"released {rep['records']} records in {rep['groups']} groups -> {output}\n"
        f"  {len(rep['specializations'])} specializations over {fed['rounds']} rounds, "
        f"{len(fed['parties'])} parties\n"
        f"  bytes sent {fed['bytes_total']['sent']}, received {fed['bytes_total']['received']}\n"
        f"  time {sec['total']:.2f}s at the leader: network {sec['network']:.2f}s, "
        f"crypto (leader) {sec['crypto_leader']:.2f}s, "
        f"compute (leader) {sec['compute_leader']:.2f}s"
        + (
            f"; daemon start-up {sec['daemon_startup']:.2f}s before that"
            if "daemon_startup" in sec
            else ""
        )
        + "\n"
        + _union_line(fed.get("union"))
    )


def _union_line(union: Any) -> str:
    """Which union ran, its bytes at the leader and its seconds."""
    if not isinstance(union, dict):
        return f"  union {union}"
    b = union["bytes"]
    return (
        f"  union {union['method']}: {union['seconds']:.2f}s, "
        f"bytes sent {b['sent']}, received {b['received']}"
    )
