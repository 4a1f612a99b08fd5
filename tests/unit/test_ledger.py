"""The privacy ledger (fedanon.ledger): chain, budgets, reservation races, and nothing lost
(a corrupt, locked, read-only or full ledger refuses; never a run without it)."""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import pytest

from fedanon.errors import LedgerError
from fedanon.ledger.access import unlock
from fedanon.ledger.budgets import Budgets, epsilon_refusal, release_refusal, reserve
from fedanon.ledger.daemon import DaemonLedger
from fedanon.ledger.fingerprint import DataFingerprint, Fingerprints
from fedanon.ledger.records import Caller, RunFacts
from fedanon.ledger.show import check_chain
from fedanon.ledger.store import Store
from fedanon.party.ledgered import LedgerGate
from fedanon.security.policy import PartyPolicy, PolicyRefused

LEADER = Caller("leader", "ab" * 32, "ipv4:10.0.0.5:40000")
DATA = DataFingerprint("d" * 64, "{}")


def _policy(**budgets: object) -> PartyPolicy:
    return PartyPolicy(min_K=2, min_L=1, max_C=1.0, max_epsilon=1.0, **budgets)  # type: ignore[arg-type]


def _dp(i: int, eps: str = "1", data: DataFingerprint = DATA) -> RunFacts:
    return RunFacts(f"{i:032x}", ("a", "b", "c"), "5" * 64, "dp", "e", Fraction(eps), data, 9)


def _lkc(i: int, spec: str) -> RunFacts:
    return RunFacts(f"{i:032x}", ("a", "b", "c"), spec * 64, "lkc", "K=2", None, DATA, 9)


def test_epsilon_refusal_names_budget_spent_and_runs() -> None:
    spent = [("7" * 32, Fraction(1)), ("9" * 32, Fraction(1))]
    r = epsilon_refusal(2.0, Fraction(1), spent)
    assert r is not None and r.rule == "max_total_epsilon"
    assert r.message == (
        "epsilon 1.0 would bring this table's total to 3.0 > max_total_epsilon = 2.0 "
        "(spent 2.0 in runs 77777777, 99999999)"
    )
    assert epsilon_refusal(2.0, Fraction(1), spent[:1]) is None
    # exact decimals: 0.1 + 0.2 is 0.3, not more
    assert epsilon_refusal(0.3, Fraction("0.2"), [("1" * 32, Fraction("0.1"))]) is None


def test_same_release_costs_nothing_a_new_one_counts() -> None:
    released = {"k1": "1" * 32, "k2": "2" * 32}
    assert release_refusal(2, "k1", released) is None
    r = release_refusal(2, "k3", released)
    assert r is not None and "release 3 > max_releases = 2" in r.message


def test_budget_keys_are_validated() -> None:
    for bad in ({"max_total_epsilon": -1}, {"max_releases": 0}, {"lockout_minutes": 5}):
        with pytest.raises(Exception, match="invalid"):
            _policy(**bad)


def test_ledger_reserves_until_the_budget_is_spent(tmp_path: Path) -> None:
    led = DaemonLedger(tmp_path / "l.sqlite", _policy(max_total_epsilon=2.0), tmp_path / "x")
    assert led.admit(LEADER, _dp(1)) is None
    assert led.admit(LEADER, _dp(2)) is None
    r = led.admit(LEADER, _dp(3))
    assert r is not None and "total to 3.0 > max_total_epsilon = 2.0" in r.message
    other = DataFingerprint("e" * 64, "{}")  # another table: its own budget
    assert led.admit(LEADER, _dp(4, data=other)) is None
    events = [e for (e,) in led.store.read("SELECT event FROM entries ORDER BY seq")]
    assert events == ["start", "reserved", "reserved", "refused", "reserved"]
    led.close()


def test_runs_per_day_per_leader(tmp_path: Path) -> None:
    led = DaemonLedger(tmp_path / "l.sqlite", _policy(max_runs_per_day=2), tmp_path / "x")
    assert led.admit(LEADER, _lkc(1, "a")) is None
    assert led.admit(LEADER, _lkc(2, "a")) is None
    r = led.admit(LEADER, _lkc(3, "a"))
    assert r is not None and r.rule == "max_runs_per_day"
    led.close()


def test_fifty_concurrent_reservations_for_the_last_epsilon(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    budgets = Budgets(max_total_epsilon=2.0)
    Store(path).close()
    first = Store(path)
    with first.transaction() as txn:
        assert reserve(txn, budgets, LEADER, _dp(0, "1.5")) is None
    first.close()
    start = threading.Barrier(50)
    results: list[object] = ["did not finish"] * 50

    def race(i: int) -> None:
        store = Store(path)  # a connection of its own, as another process would have
        start.wait()
        try:
            with store.transaction() as txn:
                results[i] = reserve(txn, budgets, LEADER, _dp(i + 1, "0.5"))
        except LedgerError as exc:
            results[i] = exc
        finally:
            store.close()

    threads = [threading.Thread(target=race, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r is None for r in results) == 1
    refused = [r for r in results if r is not None]
    assert [getattr(r, "rule", r) for r in refused] == ["max_total_epsilon"] * 49
    check = Store(path)
    assert check.read("SELECT count(*) FROM entries WHERE event = 'reserved'")[0][0] == 2
    assert check_chain(check)[1] is None
    check.close()


def test_chain_finds_edited_deleted_and_reordered_rows(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    led = DaemonLedger(path, _policy(), tmp_path / "x")
    for i in range(1, 6):
        led.admit(LEADER, _dp(i, "0.1"))
    led.close()
    assert check_chain(Store(path))[1] is None
    for sql, bad in (
        ("UPDATE entries SET epsilon = '1/100' WHERE seq = 3", 3),
        ("DELETE FROM entries WHERE seq = 4", 5),
        (
            "UPDATE entries SET seq = seq + 100 WHERE seq IN (2, 3); "
            "UPDATE entries SET seq = 3 WHERE seq = 102; "
            "UPDATE entries SET seq = 2 WHERE seq = 103",
            2,
        ),
    ):
        copy = tmp_path / f"c{bad}.sqlite"
        copy.write_bytes(path.read_bytes())
        db = sqlite3.connect(copy)
        db.executescript(sql)
        db.commit()
        db.close()
        _, broken = check_chain(Store(copy))
        assert broken is not None and broken.seq == bad, (sql, broken)


def test_corrupt_ledger_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    path.write_bytes(b"this is no database" * 100)
    with pytest.raises(LedgerError, match="corrupt"):
        DaemonLedger(path, _policy(), tmp_path / "x")


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE schema_version SET version = 99")
    db.commit()
    db.close()
    with pytest.raises(LedgerError, match="newer fedanon"):
        Store(path)


def test_ledger_locked_by_another_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    led = DaemonLedger(path, _policy(), tmp_path / "x")
    with pytest.raises(LedgerError, match="another daemon"):
        DaemonLedger(path, _policy(), tmp_path / "x")
    led.close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program holds the file
    import fedanon.ledger.store as store_mod

    old, store_mod.BUSY_TIMEOUT_MS = store_mod.BUSY_TIMEOUT_MS, 200
    try:
        with pytest.raises(LedgerError, match="locked"):
            DaemonLedger(path, _policy(), tmp_path / "x")
    finally:
        store_mod.BUSY_TIMEOUT_MS = old
        holder.execute("ROLLBACK")
        holder.close()


class _Ctx:
    def peer(self) -> str:
        return "ipv4:10.0.0.5:40000"

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}


def _run(i: int) -> SimpleNamespace:
    dp = SimpleNamespace(epsilon=Fraction(1), specializations=3, score="max")
    return SimpleNamespace(
        run_id=bytes.fromhex(f"{i:032x}"),
        spec=None,
        dp=dp,
        ring=[SimpleNamespace(name=n) for n in "abc"],
        party=SimpleNamespace(table=SimpleNamespace(n_rows=9)),
        stats_bytes_sent=123,
        status=lambda: SimpleNamespace(failure=None),
    )


def _prepare(gate: LedgerGate, i: int) -> None:
    with gate.prepare(_Ctx(), bytes.fromhex(f"{i:032x}")) as admit:  # type: ignore[arg-type]
        admit(_run(i), b"\x05" * 32)  # type: ignore[arg-type]


@pytest.mark.parametrize("how", ["full", "readonly"])
def test_full_or_readonly_ledger_refuses_the_run(tmp_path: Path, how: str) -> None:
    data = tmp_path / "x.csv"
    data.write_text("a\n1\n")
    led = DaemonLedger(tmp_path / "l.sqlite", _policy(), data)
    gate = LedgerGate(led, "leader")
    _prepare(gate, 1)
    db = led.store._db
    if how == "full":  # the disk is full: SQLite's own SQLITE_FULL
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        filler = "x" * 40
        with pytest.raises(LedgerError, match="full"):
            for _ in range(100_000):  # fill the last free pages
                with led.store.transaction() as txn:
                    txn.append("start", reason=filler)
    else:
        db.execute("PRAGMA query_only = ON")  # as a read-only file or directory answers
    with pytest.raises(PolicyRefused) as info:
        _prepare(gate, 2)
    assert info.value.rule == "ledger"
    assert "privacy ledger cannot record the run" in str(info.value)
    assert "no run without it" in str(info.value)


def test_outcome_and_aborted_after_restart(tmp_path: Path) -> None:
    path, data = tmp_path / "l.sqlite", tmp_path / "x.csv"
    data.write_text("a\n1\n")
    led = DaemonLedger(path, _policy(max_total_epsilon=1.5), data)
    gate = LedgerGate(led, "leader")
    _prepare(gate, 1)
    gate.ended(_run(1), "finished")  # type: ignore[arg-type]
    led.close()
    led = DaemonLedger(path, _policy(max_total_epsilon=1.5), data)
    rows = led.store.read("SELECT event, bytes FROM entries WHERE run_id = ?", (f"{1:032x}",))
    assert rows == [("reserved", 0), ("released", 123)]
    with pytest.raises(PolicyRefused, match=r"total to 2\.0 > max_total_epsilon = 1\.5"):
        _prepare(LedgerGate(led, "leader"), 2)
    led.close()


def test_lockout_after_refusals_and_unlock(tmp_path: Path) -> None:
    now = [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)]
    path = tmp_path / "l.sqlite"
    pol = _policy(max_refusals_per_hour=3, lockout_minutes=10)
    led = DaemonLedger(path, pol, tmp_path / "x", clock=lambda: now[0])
    stranger = Caller("-", "-", "ipv4:192.0.2.9:5555")
    for _ in range(2):
        led.access.refused(stranger, "/fedanon.v1.Party/Prepare", "no client certificate")
    assert led.access.locked(stranger) is None
    led.access.refused(stranger, "/x/Unknown", "unknown method")
    why = led.access.locked(Caller("-", "-", "ipv4:192.0.2.9:6000"))  # any port
    assert why is not None and "192.0.2.9 is locked out" in why
    assert led.access.locked(LEADER) is None
    now[0] += dt.timedelta(minutes=11)
    assert led.access.locked(stranger) is None  # the lockout ended
    for _ in range(3):
        led.access.refused(stranger, "/x/Unknown", "unknown method")
    assert led.access.locked(stranger) is not None
    assert unlock(Store(path, clock=lambda: now[0]), "192.0.2.9")  # the officer, another process
    assert led.access.locked(stranger) is None
    led.close()


def test_file_fingerprint_follows_content_not_mtime(tmp_path: Path) -> None:
    data = tmp_path / "x.csv"
    data.write_text("a\n1\n")
    fps = Fingerprints(data)
    first = fps.start()
    assert first is not None
    a = first.result()
    data.write_text("a\n1\n")  # touched, same content
    b = fps.start().result()  # type: ignore[union-attr]
    data.write_text("a\n2\n")
    c = fps.start().result()  # type: ignore[union-attr]
    assert a.digest == b.digest != c.digest
    fps.close()
