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
    r.add_argument("--quiet", action="store_true", help="no summary; log warnings and errors only")
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


def add_seed_option(p: Any) -> None:
    from fedanon.methods.base import seed_value

    p.add_argument(
        "--seed",
        type=seed_value,
        help="DP spec only: fixed seed for tests and experiments, the release is then NOT PRIVATE",
    )


def check_seed(seed: int | None, spec: Path) -> None:
    """--seed only with a spec whose method draws (the owners of `anonymize --seed`: an LKC
    run draws no randomness to fix)."""
    if seed is None:
        return
    from fedanon.methods import registry

    owners = registry.owners("anonymize", "--seed")
    if registry.of_spec_lenient(spec) not in owners:
        from fedanon.errors import ConfigError

        phrase = " or ".join(o.spec_phrase for o in owners)
        models = " or ".join(f"[privacy] model = {o.name!r}" for o in owners)
        raise ConfigError(f"--seed applies only to {phrase} ({models})", file=str(spec))


def leader_run(args: argparse.Namespace) -> int:
    from fedanon.io.fsutil import check_outputs
    from fedanon.leader.config import check_parties, load_federation_config
    from fedanon.methods import registry
    from fedanon.model import peek

    cfg = load_federation_config(args.config)
    check_parties(cfg.parties, cfg.source)
    if args.insecure:
        from fedanon.security.tls import require_loopback

        for p in cfg.parties:
            require_loopback(p.address, f"[[party]] {p.name} address", cfg.source)
    registry.require_federated(cfg.spec)  # exit 2 with the reason, before the spec's errors
    check_seed(args.seed, cfg.spec)
    # before contacting anyone, without loading the engine: the outputs are new, writable,
    # distinct files, none of them one the run reads (a usage error costs no connection)
    reads = [args.config, cfg.spec, *peek.named_files(cfg.spec), cfg.ca, cfg.cert, cfg.key]
    check_outputs({"[run] output": cfg.output, "[run] report": cfg.report}, reads)
    from fedanon.apispec import Spec
    from fedanon.report.cli import html_with_outputs

    # --html: checked here too; the release and report are held until the page is built
    page_spec = None if args.html is None else Spec.from_toml(cfg.spec)
    with html_with_outputs(
        args.html, page_spec, cfg.output, cfg.report, report_flag="[run] report", reads=reads
    ):
        text = _run(args, cfg)
    if not args.quiet:
        print(text)
    return 0  # the process then ends without teardown (fedanon.cli.main.entry)


def _run(args: argparse.Namespace, cfg: FederationConfig) -> str:
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
    from fedanon.leader.run import run_federation, summary

    out = run_federation(cfg, seed=args.seed, insecure=args.insecure, links=links)
    return summary(cfg.spec, out.report, cfg.output, cfg.report)


def check_run_outputs(cfg: FederationConfig, also_read: Sequence[Path] = ()) -> None:
    """Before contacting anyone: the spec's method runs federated and takes the run's
    options, output and report are new, distinct, writable files, and none of them is a file
    the run reads (config, spec, taxonomies, certificates, key)."""
    from fedanon.apispec import Spec
    from fedanon.io.fsutil import check_outputs
    from fedanon.leader.run import leader_side_of
    from fedanon.methods import registry
    from fedanon.model.spec import taxonomy_paths

    registry.require_federated(cfg.spec)  # exit 2 with the reason, first
    spec = Spec.from_toml(cfg.spec).run_spec  # the one spec; checked by its method
    leader_side_of(cfg.spec, spec, cfg.union, cfg.source, None)
    reads = [*also_read, cfg.spec, *taxonomy_paths(spec, cfg.spec), cfg.ca, cfg.cert, cfg.key]
    check_outputs({"[run] output": cfg.output, "[run] report": cfg.report}, reads)
