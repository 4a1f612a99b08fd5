"""The privacy ledger across daemon restarts and hostile re-runs (second ledger attack
round): what a daemon's memory forgets at a restart, the ledger must still know."""

from __future__ import annotations

import os
import sqlite3
from fractions import Fraction
from pathlib import Path

import pytest
from test_ledger_attacks import (
    HONEST,
    HOSTILE,
    RING,
    _cfg,
    _Ctx,
    _drive,
    _lkc_run,
    _policy,
    _prepare,
    _probe,
    _start,
)

from fedanon.errors import LedgerError, ProtocolError
from fedanon.ledger.daemon import DaemonLedger
from fedanon.ledger.fingerprint import DataFingerprint
from fedanon.ledger.records import Caller, RunFacts
from fedanon.party.ledgered import LedgerGate
from fedanon.security.policy import PolicyRefused


def test_a_run_id_reused_after_a_restart_is_refused(tmp_path: Path) -> None:
    """Before: the run ids a daemon had seen lived in its memory only, so after a restart a
    leader could reuse the run id of a re-run that left the released path; that release is
    keyed by the run id, so every such re-run -- each a new path, a new release of this
    table's statistics -- was free, past max_releases (and `ledger show` counted 2)."""
    data = tmp_path / "x.csv"
    data.write_text("a\n1\n")
    path = tmp_path / "l.sqlite"
    led = DaemonLedger(path, _policy(max_releases=2), data)
    gate = LedgerGate(led, "leader")
    for i, bests in ((1, HONEST), (2, HOSTILE)):  # release 1, then a diverged release 2
        run = _start(gate, i)
        _drive(run, bests)
        gate.ended(run, "finished")
    led.close()
    led = DaemonLedger(path, _policy(max_releases=2), data)  # restarted
    gate = LedgerGate(led, "leader")
    with pytest.raises(ProtocolError, match="was used before"):
        _start(gate, 2)  # the diverged run's id again
    with pytest.raises(ProtocolError, match="was used before"):  # refused before any read
        led.precheck(gate.caller(_Ctx()), None, (bytes([1]) * 16).hex())  # type: ignore[arg-type]
    run = _start(gate, 3)  # a new id: the third path is charged, and refused
    with pytest.raises(Exception, match=r"release 3 > max_releases = 2"):
        _drive(run, [(0, 1), (3, 3)])
    gate.ended(run, "aborted")
    rows = led.store.read(
        "SELECT event FROM entries WHERE run_id = ? ORDER BY seq", ((bytes([2]) * 16).hex(),)
    )
    assert [e for (e,) in rows] == ["reserved", "diverged", "released", "refused"]
    led.close()


def test_a_fresh_run_id_after_a_restart_is_accepted(tmp_path: Path) -> None:
    data = tmp_path / "x.csv"
    data.write_text("a\n1\n")
    path = tmp_path / "l.sqlite"
    led = DaemonLedger(path, _policy(max_releases=1), data)
    gate = LedgerGate(led, "leader")
    run = _start(gate, 1)
    _drive(run, HONEST)
    gate.ended(run, "finished")
    led.close()
    led = DaemonLedger(path, _policy(max_releases=1), data)
    gate = LedgerGate(led, "leader")
    assert led.precheck(gate.caller(_Ctx()), None, (bytes([4]) * 16).hex()) is None  # type: ignore[arg-type]
    run = _start(gate, 4)  # the same spec, a new id: free while it sends the same
    _drive(run, HONEST)
    gate.ended(run, "finished")
    assert _lkc_run(4).run_id.hex() in {r for (r,) in led.store.read("SELECT run_id FROM entries")}
    led.close()


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE entries SET epsilon = '1/10' WHERE event = 'reserved'",  # "fix" a spend
        "DELETE FROM entries WHERE seq <= 2",  # a retention job: the oldest rows
        "DELETE FROM entries WHERE seq = 3",
    ],
)
def test_a_ledger_whose_rows_were_edited_does_not_start(tmp_path: Path, sql: str) -> None:
    """Before: the daemon started on an edited ledger and enforced what the edited rows
    added up to (budget given back silently; only `ledger verify` would have said so)."""
    path = tmp_path / "l.sqlite"
    data = tmp_path / "x.csv"
    data.write_text("a\n1\n")
    pol = _policy(max_epsilon=1.0, max_total_epsilon=0.75)
    led = DaemonLedger(path, pol, data)
    caller = Caller("leader", "ab" * 32, "ipv4:10.0.0.5:40000")
    fp = DataFingerprint("d" * 64, "{}")
    for i in (1, 2, 3):  # rows 2-4
        facts = RunFacts(f"{i:032x}", RING, "5" * 64, "dp", "e", Fraction("0.25"), fp, 9)
        assert led.admit(caller, facts) is None
    led.close()
    db = sqlite3.connect(path)
    db.executescript(sql)
    db.commit()
    db.close()
    with pytest.raises(LedgerError, match="hash chain is broken"):
        DaemonLedger(path, pol, data)
    with pytest.raises(LedgerError, match="hash chain is broken"):
        DaemonLedger(path, pol, data)  # the failed start wrote nothing that hides the edit


def test_a_ledger_emptied_of_its_rows_is_named_as_new(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every row deleted (the file kept): the chain cannot show it, so it is said at start as
    for a new file (before: a daemon started on it without a word, budgets back to zero)."""
    path = tmp_path / "l.sqlite"
    DaemonLedger(path, _policy(), tmp_path / "x").close()
    db = sqlite3.connect(path)
    db.execute("DELETE FROM entries")
    db.commit()
    db.close()
    caplog.clear()
    DaemonLedger(path, _policy(), tmp_path / "x").close()
    assert "a new, empty ledger" in caplog.text


def test_a_touched_table_with_a_spent_budget_never_answers_does_not_fit(tmp_path: Path) -> None:
    """Before: once the file's identity changed (a touch, a backup tool rewriting the same
    bytes) its fingerprint was not known before the read, so the first probe after it was
    answered "does not fit" or the budget's refusal depending on the data -- one bit. Now
    the file's hash is awaited before the read when a per-table budget is set."""
    data = tmp_path / "b.csv"
    data.write_text("age,y\n" + "".join(f"{20 + i},{'ny'[i % 2]}\n" for i in range(6)) + "71,y\n")
    pol = _policy(max_releases=1)
    cfg = _cfg(tmp_path, data, pol)
    led = DaemonLedger(tmp_path / "l.sqlite", pol, data)
    gate = LedgerGate(led, "leader")
    gate.ended(_prepare(gate, cfg, 1, _probe(80)), "finished")  # the one release
    st = data.stat()
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # the same bytes, touched
    for i, hi in ((2, 50), (3, 90)):  # does not fit / fits: the same refusal
        with pytest.raises(PolicyRefused) as err:
            _prepare(gate, cfg, i, _probe(hi))
        assert err.value.rule == "max_releases", err.value
    assert not led.store.read("SELECT 1 FROM entries WHERE event = 'failed'")
    led.close()
