"""`fedanon party serve` and `fedanon health`."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from fedanon.errors import ConfigError, RunAborted
from fedanon.process import run_command

log = logging.getLogger(__name__)


def register(sub: Any) -> None:
    p = sub.add_parser("party", help="hospital party daemon")
    psub = p.add_subparsers(dest="party_command", required=True)
    s = psub.add_parser("serve", help="serve the Party service (mTLS)")
    s.add_argument("--config", type=Path, required=True, help="party.toml")
    s.add_argument("--port-file", type=Path, help="write the bound port here once serving")
    s.add_argument(
        "--digest-file",
        type=Path,
        help="write a digest of the table a pinned spec loads here once it is loaded "
        "(fedanon federate's same-table check; '-' if nothing was loaded ahead)",
    )
    s.add_argument(
        "--insecure",
        action="store_true",
        help="NO TLS, NO AUTHENTICATION: local experiments only",
    )
    s.set_defaults(handler=serve)
    from fedanon.party import ledgercli  # the privacy officer's commands

    ledgercli.register(psub)
    h = sub.add_parser("health", help="check a party daemon's health (for HEALTHCHECK)")
    h.add_argument("--address", required=True, help="HOST:PORT")
    h.add_argument("--config", type=Path, required=True, help="party.toml (its cert is used)")
    h.add_argument(
        "--timeout", type=float, default=5.0, help="seconds to wait for the answer (default 5)"
    )
    h.set_defaults(handler=health_check)


def serve(args: argparse.Namespace) -> int:
    # imported here, not at the top: every CLI command registers the party commands, and
    # the config pulls in the table readers (numpy), which `leader run` wants to load later
    from fedanon.party.config import load_party_config
    from fedanon.party.server import PartyServer

    cfg = load_party_config(args.config)
    if args.insecure:
        from fedanon.security.tls import require_loopback

        require_loopback(cfg.listen, "[party] listen", cfg.source)
        log.warning(
            "*** --insecure: no TLS, no authentication (certificates only sign union keys). "
            "NEVER use this with real data. ***"
        )
    PartyServer(cfg, insecure=args.insecure, digest_file=args.digest_file).serve_forever(
        args.port_file
    )
    return 0


def health_check(args: argparse.Namespace) -> int:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from fedanon.net import rpc
    from fedanon.party.config import load_party_config
    from fedanon.security.tls import TlsMaterial

    cfg = load_party_config(args.config)
    tls = TlsMaterial.load(cfg.ca, cfg.cert, cfg.key)
    with tls.channel(args.address, expected_name=cfg.name) as chan:
        stub = health_pb2_grpc.HealthStub(chan)
        try:
            reply = rpc.call(
                stub.Check, health_pb2.HealthCheckRequest(service=""), timeout=args.timeout
            )
        except grpc.RpcError as exc:
            raise RunAborted(f"{cfg.name} at {args.address}: {exc.code().name}") from None
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        print(f"{cfg.name}: {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}")
        return 1
    print(f"{cfg.name}: SERVING")
    return 0


_PARSER: list[argparse.ArgumentParser] = []  # built once per process (forked daemons share it)


def parser() -> argparse.ArgumentParser:
    """The parser of the party commands alone, built on first use (about 4 ms of argparse
    and gettext work: `fedanon federate` builds it before it forks its daemons)."""
    if not _PARSER:
        top = argparse.ArgumentParser(prog="fedanon")
        top.add_argument("-v", "--verbose", action="store_true", help="debug logging")
        register(top.add_subparsers(dest="command", required=True))
        _PARSER.append(top)
    return _PARSER[0]


def main(argv: list[str] | None = None) -> int:
    """``python -m fedanon.party ...``: the party commands alone (`fedanon party ...` without
    importing every other command's modules first: a daemon starts faster)."""
    args = parser().parse_args(["party", *(argv if argv is not None else sys.argv[1:])])
    return run_command(args.handler, args)


__all__ = ["ConfigError", "main", "parser", "register"]
