"""The privacy ledger across daemon restarts and hostile re-runs (second ledger attack
round): what a daemon's memory forgets at a restart, the ledger must still know."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_ledger_attacks import HONEST, HOSTILE, _Ctx, _drive, _lkc_run, _policy, _start

from fedanon.errors import ProtocolError
from fedanon.ledger.daemon import DaemonLedger
from fedanon.party.ledgered import LedgerGate


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
