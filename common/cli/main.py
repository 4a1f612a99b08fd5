"""The `fedanon` command line.  The only place (with the daemons' entry points) that
configures logging."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from fedanon.errors import FedanonError, Terminated

log = logging.getLogger("fedanon")


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
    )
    return [importlib.import_module(m).register for m in modules]


def _anonymize(args: argparse.Namespace) -> int:
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


def _terminate(signum: int, _frame: FrameType | None) -> None:
    signal.signal(signum, signal.SIG_IGN)  # a second signal must not cut the clean-up short
    raise Terminated(signum)


def _stdout_reader_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (poll reports an error
    on the write end of a pipe without readers)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _reader_gone() -> int:
    """The reader of our standard output closed it (``fedanon audit ... | head``): not an
    error of ours, nothing to log.  Further output goes to /dev/null (so the interpreter's
    final flush is quiet too); exit 141 = 128 + SIGPIPE, what a shell reports for ``yes | head``
    (the command's own exit code is lost with the rest of its output)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor behind sys.stdout
        pass
    return 128 + signal.SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["party"]:  # a daemon starts with its own commands' modules only
        from fedanon.party.cli import main as party_main

        return party_main(words[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    handler = _anonymize if args.command == "anonymize" else getattr(args, "handler", None)
    if handler is None:
        parser.error(f"unknown command {args.command}")
    on_main = threading.current_thread() is threading.main_thread()
    # SIGTERM cleans up (daemons, temporary keys, partial files) exactly as Ctrl-C does
    previous = signal.signal(signal.SIGTERM, _terminate) if on_main else None
    try:
        code = int(handler(args))
        sys.stdout.flush()  # a reader that went away (`| head`) shows here, not at exit
        return code
    except BrokenPipeError:
        if not _stdout_reader_gone():  # another pipe (a daemon's, a socket): ours to report
            log.exception("internal error")
            return 1
        return _reader_gone()
    except FedanonError as exc:
        print(f"fedanon: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Terminated as exc:
        print(f"fedanon: terminated by signal {exc.signum}", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print("fedanon: interrupted", file=sys.stderr)
        return 130
    except Exception:
        log.exception("internal error")
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
