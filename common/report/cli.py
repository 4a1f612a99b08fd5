"""``fedanon report``: the privacy officer's page for a release, and ``--html`` on the commands
that make one (``anonymize``, ``federate``, ``leader run``).

With ``--html`` the page is published together with the released table and the run report:
the run's writes to those two paths are held as temporaries (:func:`fedanon.io.fsutil.hold`),
the page is built from them, and the three files are renamed into place together -- a run or
a page that fails publishes none of them."""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fedanon.errors import InputError

log = logging.getLogger(__name__)
FROM_CONFIG = Path("\0party-config")  # --ledger without a path: party.toml's [ledger] path


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


def add_html_option(p: Any) -> None:
    """``--html`` on a command that publishes a release (needs its JSON report too)."""
    p.add_argument(
        "--html",
        type=Path,
        help="also write the privacy officer's HTML report of the release (published with "
        "the table and the JSON report, all or none; needs the JSON report)",
    )


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
    from fedanon.report.build import Inputs

    t0 = time.perf_counter()
    inputs = Inputs(
        args.spec,
        args.released,
        args.original,
        args.run_report,
        party_config=args.party_config,
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
    from fedanon.report.hospital import load_party

    path: Path = load_party(party_config).ledger
    return path


def render_page(inputs: Any) -> str:
    from fedanon.report.build import build
    from fedanon.report.html import render

    return render(build(inputs))


@contextmanager
def html_with_outputs(
    html: Path | None,
    spec: Path,
    output: Path,
    report: Path | None,
    *,
    report_flag: str = "--report",
    reads: Sequence[Path] = (),
) -> Iterator[None]:
    """Around a run that writes ``output`` and ``report``: with ``html``, hold both, build the
    page from what the run wrote and publish the three together (nothing without ``html``)."""
    if html is None:
        yield
        return
    from fedanon.io.fsutil import Pending, check_outputs, hold
    from fedanon.report.build import Inputs

    if report is None:
        raise InputError(
            f"--html needs the run's JSON report ({report_flag}): the page shows what it records",
            file=str(html),
            expected=f"{report_flag} PATH with --html",
        )
    check_outputs({"--html": html, "output": output, "report": report}, [spec, *reads])
    with hold([output, report]) as held:
        yield
        table, rep = held.temp_of(output), held.temp_of(report)
        if table is None or rep is None:
            raise InputError("the run published no table to report on", file=str(output))
        from fedanon.pandasgate import allow_pandas

        allow_pandas()  # the leader keeps Arrow from importing pandas; the page needs it
        page = render_page(
            Inputs(spec, table, None, rep, released_name=str(output), run_report_name=str(report))
        )
        held.publish([Pending(html, lambda fh: fh.write(page))])
    log.info("HTML report -> %s", html)
