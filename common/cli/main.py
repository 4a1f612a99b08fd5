"""The `fedanon` command line.  The only place (with the daemons' entry points) that
configures logging."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fedanon.process import run_command


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fedanon",
        description="Federated LKC-privacy anonymization (Mohammed et al., TKDD 2010).",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True)

    a = sub.add_parser("anonymize", help="centralized anonymization of one table")
    a.add_argument("--spec", type=Path, required=True, help="run spec (TOML)")
    a.add_argument(
        "--input",
        required=True,
        help="input table: CSV (optionally .gz), .parquet, or a postgresql://user@host/db URL "
        "(password from PGPASSWORD or ~/.pgpass) with --query or --table",
    )
    a.add_argument("--query", help="with a postgresql:// input: the SELECT to read")
    a.add_argument("--table", help="with a postgresql:// input: the table to read")
    a.add_argument(
        "--output", type=Path, required=True, help="released table: CSV, .gz or .parquet (atomic)"
    )
    a.add_argument("--report", type=Path, help="JSON report")
    a.add_argument("--quiet", action="store_true", help="no summary")
    a.add_argument(
        "--memory-budget",
        help='LKC runs: keep the per-row codes out of core above this size ("16GB"; "auto", '
        'the default: half the available memory; "off": never), as FEDANON_MEMORY_BUDGET',
    )
    a.add_argument("--seed", type=int, help="dp specs only: fixed seed (output NOT PRIVATE)")
    a.add_argument("--expand", action="store_true", help="dp specs only: one row per record")
    from fedanon.dp.cli import add_bound_options

    add_bound_options(a, "dp specs only: ")
    from fedanon.report.cli import add_html_option

    add_html_option(a)

    for register in _extensions():
        register(sub)
    return p


def _extensions() -> list[Callable[[Any], None]]:
    """The sub-commands of the other packages (imported here: the CLI is the top layer)."""
    modules = (
        "fedanon.cli.certs",
        "fedanon.party.cli",
        "fedanon.leader.cli",
        "fedanon.leader.federate",
        "fedanon.cli.evaluate",
        "fedanon.dp.cli",
        "fedanon.kkm.cli",
        "fedanon.cli.audit",
        "fedanon.report.cli",
    )
    return [importlib.import_module(m).register for m in modules]


def _anonymize(args: argparse.Namespace) -> int:
    from fedanon.report.cli import html_with_outputs

    reads = [] if "://" in args.input else [Path(args.input)]
    with html_with_outputs(args.html, args.spec, args.output, args.report, reads=reads):
        return _anonymize_run(args)


def _anonymize_run(args: argparse.Namespace) -> int:
    from fedanon.dp.cli import anonymize_if_dp

    if (code := anonymize_if_dp(args)) is not None:  # [privacy] model = "dp" (common/dp)
        return code
    from fedanon.kkm.spec import is_kkm_spec

    if is_kkm_spec(args.spec):  # [privacy] model = "kkm": (k, k^m)-anonymity (common/kkm)
        from fedanon.kkm.cli import anonymize_kkm

        args.input = Path(args.input)
        return anonymize_kkm(args)
    from fedanon.centralized import anonymize_file, summary_text
    from fedanon.io.sources import parse_source

    source = parse_source(args.input, args.query, args.table)
    rep, _ = anonymize_file(args.spec, source, args.output, args.report, True, args.memory_budget)
    if not args.quiet:
        print(summary_text(rep, args.output, args.report))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["party"]:  # a daemon starts with its own commands' modules only
        from fedanon.party.cli import main as party_main

        return party_main(words[1:])
    if words[:1] == ["leader"]:  # likewise the leader: its handshakes start sooner
        from fedanon.leader.cli import main as leader_main

        return leader_main(words[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    handler = _anonymize if args.command == "anonymize" else getattr(args, "handler", None)
    if handler is None:
        parser.error(f"unknown command {args.command}")
    return run_command(handler, args)


if __name__ == "__main__":
    sys.exit(main())
