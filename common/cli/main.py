"""The `fedanon` command line.  The only place (with the daemons' entry points) that
configures logging.

``anonymize``, ``audit``, ``evaluate`` and ``experiment`` serve every method: the spec (or the
experiment's name) says which (:mod:`fedanon.methods.registry`); a method's own options are
refused for the others.  The prefixed commands of earlier releases (``dp-anonymize``,
``kkm-audit``, ...) are hidden aliases for one release: they print the new spelling on stderr
and run it.  Exit codes (:mod:`fedanon.process`): 0 ok, 1 internal error, 2 input or usage,
3 audit violated."""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fedanon.process import exit_process, run_command


def _parser() -> argparse.ArgumentParser:
    from fedanon.methods import registry

    p = argparse.ArgumentParser(
        prog="fedanon",
        description="Federated anonymization: LKC-privacy (Mohammed et al., TKDD 2010), "
        "DiffGen (epsilon-differential privacy) and (k, k^m)-anonymity.",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    a = sub.add_parser(
        "anonymize",
        help="centralized anonymization of one table (any method: the spec says which)",
    )
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
    a.add_argument("--quiet", action="store_true", help="no summary; log warnings and errors only")
    registry.add_options(a, "anonymize")
    from fedanon.report.cli import add_html_option

    add_html_option(a)
    a.set_defaults(handler=_anonymize)

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
        "fedanon.kkm.cli",
        "fedanon.dp.cli",
        "fedanon.cli.audit",
        "fedanon.cli.report",
    )
    return [importlib.import_module(m).register for m in modules]


def _anonymize(args: argparse.Namespace) -> int:
    from fedanon.apispec import Spec
    from fedanon.methods import registry
    from fedanon.report.cli import html_with_outputs

    method = registry.of_spec_lenient(args.spec)  # unreadable: the spec's reader says why
    registry.check_options(method, args, "anonymize", args.spec)
    spec = Spec.from_toml(args.spec)  # the one spec, parsed once
    reads = [] if "://" in args.input else [Path(args.input)]
    with html_with_outputs(args.html, spec, args.output, args.report, reads=reads):
        return spec.method.anonymize(args, spec)


def _respell(words: list[str]) -> list[str]:
    """A deprecated command's arguments in today's spelling, said on stderr."""
    at = next((i for i, w in enumerate(words) if not w.startswith("-")), None)
    if at is None:
        return words
    from fedanon.methods.registry import DEPRECATED, new_spelling

    if words[at] not in DEPRECATED:
        return words
    new = new_spelling(words[at], words[at + 1 :])
    assert new is not None
    now = [*words[:at], *new]
    print(
        f"fedanon: `fedanon {words[at]}` is deprecated and will be removed in the next "
        f"release; use: fedanon {shlex.join(now)}",
        file=sys.stderr,
    )
    return now


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["party"]:  # a daemon starts with its own commands' modules only
        from fedanon.party.cli import main as party_main

        return party_main(words[1:])
    if words[:1] == ["leader"]:  # likewise the leader: its handshakes start sooner
        from fedanon.leader.cli import main as leader_main

        return leader_main(words[1:])
    words = _respell(words)
    parser = _parser()
    args = parser.parse_args(words)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.error(f"unknown command {args.command}")
    return run_command(handler, args)


def entry() -> None:
    """The ``fedanon`` command (and ``python -m fedanon.cli``): :func:`main`, then the
    process ends without the interpreter's teardown (:func:`fedanon.process.exit_process`)."""
    code = main()
    exit_process(code)


if __name__ == "__main__":
    entry()
