"""Every `fedanon ...` command a privacy-ledger message tells the operator to type is one the
CLI accepts: the ledger commands need --config (argparse refuses them without it).  Found by
the docs review: the broken-chain refusal said "what `fedanon party ledger show` says the old
one spent", the lockout warning "`fedanon party ledger unlock ADDRESS` lifts it", and the
report page "`fedanon party ledger show` has it" -- each exits 2 as written."""

from __future__ import annotations

import datetime as dt
import logging
import re
import sqlite3
from pathlib import Path

import pytest

from fedanon.cli.main import _parser
from fedanon.errors import LedgerError
from fedanon.ledger.daemon import DaemonLedger
from fedanon.ledger.records import Caller
from fedanon.report.ledger import WITHHELD
from fedanon.security.policy import PartyPolicy


def _policy(**budgets: object) -> PartyPolicy:
    return PartyPolicy(min_K=2, min_L=1, max_C=1.0, **budgets)  # type: ignore[arg-type]


def _commands(text: str) -> list[str]:
    found = re.findall(r"`(fedanon [^`]*)`", text)
    assert found, text
    return found


def _accepted(command: str) -> None:
    words = command.split()[1:]
    try:
        _parser().parse_args(words)
    except SystemExit as exc:
        pytest.fail(f"argparse refuses `{command}` (exit {exc.code})")


def test_the_broken_chain_refusal_names_commands_that_run(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    DaemonLedger(path, _policy(), tmp_path / "x").close()
    DaemonLedger(path, _policy(), tmp_path / "x").close()  # two start rows
    with sqlite3.connect(path) as db:
        db.execute("UPDATE entries SET reason = 'edited' WHERE seq = 1")
    with pytest.raises(LedgerError) as err:
        DaemonLedger(path, _policy(), tmp_path / "x")
    commands = _commands(str(err.value))
    assert any(" show" in c for c in commands) and any(" verify" in c for c in commands)
    for command in commands:
        _accepted(command)


def test_the_lockout_warning_names_an_unlock_that_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    pol = _policy(max_refusals_per_hour=3, lockout_minutes=10)
    led = DaemonLedger(tmp_path / "l.sqlite", pol, tmp_path / "x", clock=lambda: now)
    stranger = Caller("-", "-", "ipv4:192.0.2.9:5555")
    with caplog.at_level(logging.WARNING, logger="fedanon.ledger"):
        for _ in range(3):
            led.access.refused(stranger, "/x/Unknown", "unknown method")
    led.close()
    lines = [r.getMessage() for r in caplog.records if "locking out" in r.getMessage()]
    assert lines, caplog.text
    for command in _commands(lines[0]):
        assert "unlock 192.0.2.9" in command
        _accepted(command)


def test_the_report_page_names_a_show_that_runs() -> None:
    for command in _commands(WITHHELD):
        _accepted(command)
