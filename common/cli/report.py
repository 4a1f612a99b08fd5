"""``fedanon report``: the privacy officer's page for a release (:mod:`fedanon.report`).

The command lives in the CLI layer because ``--party-config`` is read as the hospital's daemon
reads it (:func:`fedanon.party.config.load_party_config`); the report itself is given the
loaded configuration and never imports the daemon."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from fedanon.errors import InputError
from fedanon.report.cli import render_page

FROM_CONFIG = Path("\0party-config")  # --ledger without a path: party.toml's [ledger] path


def _load_party(path: Path) -> Any:
    """party.toml, validated as the daemon reads it (its data source is parsed, never read)."""
    from fedanon.party.config import load_party_config

    if not path.is_file():
        raise InputError("--party-config: no such file", file=str(path), expected="party.toml")
    return load_party_config(path)


def register(sub: Any) -> None:
    r = sub.add_parser(
        "report",
        help="one self-contained HTML page on a release: risk, coarsening, utility, method",
        description="Write the privacy officer's report of --released (a release of --spec): "
        "audit verdict, group sizes and prosecutor risk, how each QID was coarsened, utility, "
        "and what the run report adds (DiffGen's epsilon ledger, (k,k^m)'s losses, a "
        "federation's traffic). One HTML file, nothing fetched from anywhere.",
    )
    r.add_argument("--spec", type=Path, required=True, help="run spec (TOML)")
    r.add_argument(
        "--released", type=Path, required=True, help="released table (CSV, .gz, Parquet)"
    )
    r.add_argument(
        "--original",
        type=Path,
        help="the table the release was made from (CE/BE/UE with a class column; none of its "
        "values appears on the page)",
    )
    r.add_argument("--run-report", type=Path, help="the run's JSON report (--report)")
    r.add_argument(
        "--party-config",
        type=Path,
        help="this hospital's party.toml: its [policy] on the page, every key, budgets "
        "included (nothing of its data source)",
    )
    r.add_argument(
        "--ledger",
        nargs="?",
        const=FROM_CONFIG,
        type=Path,
        metavar="LEDGER",
        help="this hospital's privacy ledger (read-only, also while the daemon runs): the "
        "run's rows, what its table's budgets have spent, the chain head; without a path, "
        "the one --party-config names ([ledger] path); needs --run-report",
    )
    r.add_argument("--html", type=Path, required=True, help="the page to write (atomically)")
    r.set_defaults(handler=report_cli)


def report_cli(args: argparse.Namespace) -> int:
    from fedanon.io.fsutil import atomic_write, check_outputs

    ledger = _ledger_path(args.ledger, args.party_config)
    reads = [
        p
        for p in (args.spec, args.released, args.original, args.run_report, args.party_config)
        if p
    ]
    if ledger is not None:
        reads += [ledger, *(ledger.with_name(ledger.name + s) for s in ("-wal", "-shm"))]
    check_outputs({"--html": args.html}, reads)
    for flag, path in (
        ("--released", args.released),
        ("--original", args.original),
        ("--run-report", args.run_report),
    ):
        if path is not None and not path.is_file():
            raise InputError(f"{flag}: no such file", file=str(path), expected="an existing file")
    from fedanon.apispec import Spec
    from fedanon.report.build import Inputs

    t0 = time.perf_counter()
    inputs = Inputs(
        Spec.from_toml(args.spec),  # the one spec
        args.released,
        args.original,
        args.run_report,
        party_config=args.party_config,
        party=None if args.party_config is None else _load_party(args.party_config),
        ledger=ledger,
    )
    page = render_page(inputs)
    atomic_write(args.html, lambda fh: fh.write(page))
    print(f"report -> {args.html} ({len(page.encode()):,} bytes, {time.perf_counter() - t0:.2f}s)")
    return 0


def _ledger_path(given: Path | None, party_config: Path | None) -> Path | None:
    """``--ledger PATH``, or with no path the ledger ``--party-config`` names."""
    if given != FROM_CONFIG:
        return given
    if party_config is None:
        raise InputError(
            "--ledger without a path reads the ledger --party-config names",
            expected="--ledger PATH, or --party-config party.toml --ledger",
        )
    path: Path = _load_party(party_config).ledger
    return path
