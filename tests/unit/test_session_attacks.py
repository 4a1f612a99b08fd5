"""Attacks on the day's session changes (hostile leader, careless operator): the privacy
ledger's early budget check (57e0353) and the run-id refusal (3ca6321)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_ledger_attacks import _cfg, _policy, _prepare, _probe

from fedanon.errors import FedanonError
from fedanon.ledger.daemon import DaemonLedger
from fedanon.party.faults import classify
from fedanon.party.ledgered import LedgerGate


def _table(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("age,y\n" + "".join(f"{20 + i},{'ny'[i % 2]}\n" for i in range(6)) + "71,y\n")
    return path


@pytest.mark.parametrize("budgets", [{"max_releases": 3}, {"max_total_epsilon": 5.0}, {}])
def test_a_data_file_gone_answers_the_leader_as_any_data_failure(
    tmp_path: Path, budgets: dict[str, float]
) -> None:
    """Before: with a per-table budget, Prepare awaits the file's hash before the read
    (57e0353), and a hash that cannot be taken (the file moved away, unreadable, still being
    written) was refused as the *ledger's* failure, whose refusal quotes the error: the
    leader read 'its privacy ledger cannot record the run (data file
    /srv/hiv-clinic/patients.csv cannot be fingerprinted: No such file or directory)' -- the
    hospital's path and what became of its file, and a wrong cause (the ledger is fine).
    Without a budget the same Prepare answered the fixed data sentence.  Now both do."""
    data = _table(tmp_path / "hiv-clinic" / "patients.csv")
    pol = _policy(**budgets)
    cfg = _cfg(tmp_path, data, pol)
    led = DaemonLedger(tmp_path / "l.sqlite", pol, data)
    gate = LedgerGate(led, "leader")
    gate.ended(_prepare(gate, cfg, 1, _probe(80)), "finished")
    data.rename(tmp_path / "moved.csv")  # a careless operator moves the table away
    with pytest.raises(FedanonError) as err:
        _prepare(gate, cfg, 2, _probe(80))
    sent = classify(err.value, "hospital-b", "Prepare")
    assert "hiv-clinic" not in sent.detail and str(tmp_path) not in sent.detail, sent.detail
    assert sent.kind == "input", sent
    assert (
        sent.detail == "hospital-b's data does not fit the spec (the hospital's own log says why)"
    )
    rows = led.store.read(
        "SELECT event FROM entries WHERE run_id = ? ORDER BY seq", ((bytes([2]) * 16).hex(),)
    )
    assert rows == [("failed",)]  # ledgered, and counted as any data refusal
    led.close()


def test_a_broken_chain_names_a_command_that_runs(tmp_path: Path) -> None:
    """The daemon that refuses a broken chain (ac8e89e) told the operator to run `fedanon
    party ledger verify`, which argparse refuses: --config is required."""
    import sqlite3

    from fedanon.errors import LedgerError

    data = _table(tmp_path / "b.csv")
    path = tmp_path / "l.sqlite"
    DaemonLedger(path, _policy(), data).close()
    DaemonLedger(path, _policy(), data).close()  # two start rows
    with sqlite3.connect(path) as db:
        db.execute("UPDATE entries SET reason = 'edited' WHERE seq = 1")
    with pytest.raises(LedgerError, match=r"ledger verify --config party\.toml"):
        DaemonLedger(path, _policy(), data)
