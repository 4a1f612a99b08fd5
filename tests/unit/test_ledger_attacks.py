"""The privacy ledger under attack (attack-ledger findings): a free re-run is free only while
this hospital sends what it sent before, budgets that need no data refuse before the table is
read, a deleted ledger refuses runs, lockouts by identity, a repeated run id, the inode lock,
the chain head and release keys in ``ledger show``, and the careless-default checks."""

from __future__ import annotations

import io
import json
import logging
import os
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fedanon.errors import ConfigError, LedgerError, ProtocolError
from fedanon.io.sources import parse_source
from fedanon.ledger.daemon import DaemonLedger, open_ledger
from fedanon.ledger.records import Caller
from fedanon.ledger.show import rows, write_json, write_text
from fedanon.party.config import PartyConfig, parse_party_config
from fedanon.party.faults import DataRefused
from fedanon.party.ledgered import LedgerGate
from fedanon.party.prepare import Proposal, prepare_run
from fedanon.party.run import Peer
from fedanon.party.runs import RunRegistry
from fedanon.security.policy import PartyPolicy, PolicyRefused
from fedanon.security.policytoml import policy_to_toml
from fedanon.tds.state import Phase, Update

RING = ("hospital-a", "hospital-b", "hospital-c")


def _policy(**budgets: Any) -> PartyPolicy:
    return PartyPolicy(min_K=2, min_L=1, max_C=1.0, release_unchanged=("y",), **budgets)


class _Ctx:  # a call as gRPC shows it
    def __init__(self, peer: str = "ipv4:10.0.0.5:40000") -> None:
        self._peer = peer

    def peer(self) -> str:
        return self._peer

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}


def _lkc_run(i: int) -> SimpleNamespace:
    """What the gate reads of a prepared LKC run (the transcript is set on it)."""
    privacy = SimpleNamespace(model="lkc", describe=lambda: "L=1 K=2 C=1")
    return SimpleNamespace(
        run_id=bytes([i]) * 16,
        spec=SimpleNamespace(privacy=privacy, score="infogain"),
        dp=None,
        ring=[SimpleNamespace(name=n) for n in RING],
        party=SimpleNamespace(table=SimpleNamespace(n_rows=9)),
        stats_bytes_sent=64,
        status=lambda: SimpleNamespace(failure=None),
        transcript=None,
    )


def _start(gate: LedgerGate, i: int) -> Any:
    run = _lkc_run(i)
    with gate.prepare(_Ctx(), run.run_id) as admit:  # type: ignore[arg-type]
        admit(run, b"\x07" * 32)  # the same spec every time
    return run


def _drive(run: Any, bests: list[tuple[int, int]]) -> None:
    """The leader's instructions as the party applies them, and the statistics it sends."""
    t = run.transcript
    assert t is not None
    for r, best in enumerate(bests):
        t.sending(Phase.COUNTS.name, r, 40, b"\x01" * 32)
        t.applied(Update(round=r, best=best))
    t.sending(Phase.COUNTS.name, len(bests), 40, b"\x01" * 32)


HONEST = [(0, 1), (1, 4), (0, 3)]
HOSTILE = [(0, 1), (2, 5), (0, 3)]  # the leader takes another specialization in round 1


def test_a_free_rerun_that_leaves_the_released_path_is_a_new_release(tmp_path: Path) -> None:
    data = tmp_path / "x.csv"
    data.write_text("a\n1\n")
    led = DaemonLedger(tmp_path / "l.sqlite", _policy(max_releases=1), data)
    gate = LedgerGate(led, "leader")
    first = _start(gate, 1)  # a new release: charged at Prepare
    _drive(first, HONEST)
    gate.ended(first, "finished")
    again = _start(gate, 2)  # the same spec, ring, table: free while it sends the same
    _drive(again, HONEST)
    gate.ended(again, "finished")
    hostile = _start(gate, 3)
    with pytest.raises(PolicyRefused) as err:
        _drive(hostile, HOSTILE)
    assert err.value.rule == "max_releases"
    assert "left the path of the released runs" in str(err.value)
    assert "release 2 > max_releases = 1" in str(err.value)
    with pytest.raises(PolicyRefused):  # every later new send is refused too
        hostile.transcript.sending("SPLIT", 9, 1, b"")
    gate.ended(hostile, "aborted")
    events = [
        (e, p)
        for e, p in led.store.read("SELECT event, phase FROM entries ORDER BY seq")
        if e not in ("start", "lockout")
    ]
    assert events == [
        ("reserved", "Prepare"),
        ("released", None),
        ("reserved", "Prepare"),
        ("released", None),
        ("reserved", "Prepare"),
        ("refused", "statistics"),
        ("aborted", "aborted"),
    ]
    led.close()


def test_a_diverged_path_is_charged_once_then_free_for_its_own_rerun(tmp_path: Path) -> None:
    data = tmp_path / "x.csv"
    data.write_text("a\n1\n")
    led = DaemonLedger(tmp_path / "l.sqlite", _policy(max_releases=2), data)
    gate = LedgerGate(led, "leader")
    for i, path in enumerate((HONEST, HOSTILE, HOSTILE, HONEST), 1):
        run = _start(gate, i)
        _drive(run, path)
        gate.ended(run, "finished")
    diverged = led.store.read("SELECT run_id FROM entries WHERE event = 'diverged'")
    assert diverged == [((bytes([2]) * 16).hex(),)]  # only the first hostile run counted
    third = _start(gate, 5)
    with pytest.raises(PolicyRefused, match=r"release 3 > max_releases = 2"):
        _drive(third, [(0, 1), (3, 3)])
    led.close()


def _probe(hi: int) -> str:  # "is every age below hi?"
    return (
        "[privacy]\nL = 1\nK = 2\nC = 1.0\n"
        f'[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, {hi}]\n'
        '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["n", "y"]\n'
    )


def _cfg(tmp_path: Path, data: Path, policy: PartyPolicy) -> PartyConfig:
    return PartyConfig(
        name="hospital-b",
        listen="127.0.0.1:0",
        data=parse_source(str(data), None, None, tmp_path),
        ca=tmp_path / "ca.pem",
        cert=tmp_path / "b.pem",
        key=tmp_path / "b.key",
        policy=policy,
    )


def _prepare(gate: LedgerGate, cfg: PartyConfig, i: int, spec: str) -> Any:
    ring = tuple(Peer(n, f"{n}:1") for n in RING)
    run_id = bytes([i]) * 16
    with gate.prepare(_Ctx(), run_id) as admit:  # type: ignore[arg-type]
        p = Proposal(run_id, spec, {}, ring, 1)
        run, digest = prepare_run(cfg, p, before_read=admit.early)
        admit(run, digest)
    return run


def test_a_spent_budget_refuses_before_the_table_is_read(tmp_path: Path) -> None:
    data = tmp_path / "b.csv"
    data.write_text("age,y\n" + "".join(f"{20 + i},{'ny'[i % 2]}\n" for i in range(6)) + "71,y\n")
    pol = _policy(max_releases=1)
    cfg = _cfg(tmp_path, data, pol)
    path = tmp_path / "l.sqlite"
    led = DaemonLedger(path, pol, data)
    gate = LedgerGate(led, "leader")
    run = _prepare(gate, cfg, 1, _probe(80))  # fits: the one release
    gate.ended(run, "finished")
    # the budget is spent: a spec the data does not fit gets the budget's refusal, exactly as
    # one it fits -- no "does not fit" bit
    for i, hi in ((2, 50), (3, 90)):
        with pytest.raises(PolicyRefused) as err:
            _prepare(gate, cfg, i, _probe(hi))
        assert err.value.rule == "max_releases", err.value
    led.close()
    led = DaemonLedger(path, pol, data)  # restarted: the last ledgered fingerprint is known
    with pytest.raises(PolicyRefused, match="max_releases"):
        _prepare(LedgerGate(led, "leader"), cfg, 4, _probe(50))
    data.write_text(data.read_text() + "30,n\n")  # a changed table: its own budget; read
    with pytest.raises(DataRefused):
        _prepare(LedgerGate(led, "leader"), cfg, 5, _probe(50))
    failed = led.store.read("SELECT count(*) FROM entries WHERE event = 'failed'")[0][0]
    assert failed == 1  # only the changed table was read
    led.close()


def test_runs_per_day_refuse_before_the_table_is_read(tmp_path: Path) -> None:
    data = tmp_path / "b.csv"
    data.write_text("age,y\n" + "".join(f"{20 + i},{'ny'[i % 2]}\n" for i in range(6)))
    pol = _policy(max_runs_per_day=1)
    cfg = _cfg(tmp_path, data, pol)
    led = DaemonLedger(tmp_path / "l.sqlite", pol, data)
    gate = LedgerGate(led, "leader")
    _prepare(gate, cfg, 1, _probe(80))
    with pytest.raises(PolicyRefused, match="max_runs_per_day"):
        _prepare(gate, cfg, 2, _probe(50))  # would not fit: refused by the day's budget
    led.close()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_ledger_deleted_under_the_daemon_refuses_runs(tmp_path: Path, how: str) -> None:
    data = tmp_path / "x.csv"
    data.write_text("a\n1\n")
    path = tmp_path / "l.sqlite"
    led = DaemonLedger(path, _policy(max_releases=5), data)
    gate = LedgerGate(led, "leader")
    _start(gate, 1)
    for f in tmp_path.glob("l.sqlite*"):
        f.unlink()
    if how == "replaced":
        path.write_bytes(b"")
    with pytest.raises(PolicyRefused) as err:
        _start(gate, 2)
    assert err.value.rule == "ledger"
    assert "deleted or replaced while the daemon ran" in str(err.value)
    led.close()


def test_an_authenticated_peer_is_locked_out_by_identity_only(tmp_path: Path) -> None:
    led = DaemonLedger(tmp_path / "l.sqlite", _policy(max_refusals_per_hour=3), tmp_path / "x")
    other = Caller("hospital-b", "cd" * 32, "ipv4:10.0.0.5:41000")  # behind the leader's NAT
    leader = Caller("leader", "ab" * 32, "ipv4:10.0.0.5:40000")
    stranger = Caller("-", "-", "ipv4:10.0.0.5:42000")
    for _ in range(3):
        led.access.refused(other, "/fedanon.v1.Party/Prepare", "role party may not call it")
    assert led.access.locked(other) is not None
    assert led.access.locked(leader) is None  # same address, not locked out
    assert led.access.locked(stranger) is None  # others' refusals do not count for it
    for _ in range(3):
        led.access.refused(stranger, "/x/Unknown", "unknown method")
    assert led.access.locked(stranger) is not None  # no identity: by address
    assert led.access.locked(leader) is None  # an authenticated caller: its identity only
    led.close()


def test_refusal_rows_are_bounded_without_max_refusals_per_hour(tmp_path: Path) -> None:
    led = DaemonLedger(tmp_path / "l.sqlite", _policy(), tmp_path / "x")
    leader = Caller("leader", "ab" * 32, "ipv4:10.0.0.5:40000")
    n = 0
    while led.access.locked(leader) is None:
        assert n < 200, "never locked out"
        led.refused(leader, f"{n:032x}", "malformed spec")
        n += 1
    assert n == 100
    led.close()


def test_a_repeated_run_id_is_refused_before_it_is_charged(tmp_path: Path) -> None:
    data = tmp_path / "x.csv"
    data.write_text("a\n1\n")
    led = DaemonLedger(tmp_path / "l.sqlite", _policy(max_releases=5), data)
    gate = LedgerGate(led, "leader")
    runs = RunRegistry("hospital-b", 60.0)
    live = _lkc_run(1)
    with gate.prepare(_Ctx(), live.run_id) as admit, runs.loading(live.run_id):  # type: ignore[arg-type]
        admit(live, b"\x07" * 32)
        runs.add(live)  # type: ignore[arg-type]
    retry = _lkc_run(1)  # the same run id again (as the service nests them)
    with (
        pytest.raises(ProtocolError, match="already prepared"),
        gate.prepare(_Ctx(), retry.run_id) as admit,  # type: ignore[arg-type]
        runs.loading(retry.run_id),
    ):
        admit(retry, b"\x07" * 32)
    events = [e for (e,) in led.store.read("SELECT event FROM entries WHERE run_id IS NOT NULL")]
    assert events == ["reserved", "refused"]  # charged once; the live run is not aborted
    led.close()


def test_the_inode_is_locked_whatever_name_reaches_it(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    led = DaemonLedger(path, _policy(), tmp_path / "x")
    link = tmp_path / "link.sqlite"
    link.symlink_to(path)
    with pytest.raises(LedgerError, match="another daemon"):
        DaemonLedger(link, _policy(), tmp_path / "x")
    for lock in tmp_path.glob("*.lock"):  # a tmp cleaner: no lock file to remove
        lock.unlink()
    with pytest.raises(LedgerError, match="another daemon"):
        DaemonLedger(path, _policy(), tmp_path / "x")
    led.close()
    DaemonLedger(link, _policy(), tmp_path / "x").close()  # free again once closed


def test_show_has_release_keys_and_the_chain_head(tmp_path: Path) -> None:
    data = tmp_path / "x.csv"
    data.write_text("a\n1\n")
    led = DaemonLedger(tmp_path / "l.sqlite", _policy(max_releases=5), data)
    gate = LedgerGate(led, "leader")
    run = _start(gate, 1)
    _drive(run, HONEST)
    gate.ended(run, "finished")
    out = io.StringIO()
    write_json(out, rows(led.store))
    shown = json.loads(out.getvalue())
    reserved = next(r for r in shown if r["event"] == "reserved")
    released = next(r for r in shown if r["event"] == "released")
    assert reserved["release_key"] and released["release_key"] == reserved["release_key"]
    assert len(released["transcript"]) == 32 * 4  # the 4 sends of the run
    text = io.StringIO()
    write_text(text, rows(led.store), led.store)
    head = led.store.read("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1")[0]
    assert f"chain head: row {head[0]} hash {head[1]}" in text.getvalue()
    led.close()


PARTY_TOML = """
[party]
name = "hospital-b"
listen = "127.0.0.1:0"
data = "b.csv"
[policy]
min_K = 2
min_L = 1
max_C = 1.0
release_unchanged = ["y"]
max_epsilon = 1.0
{extra}
[tls]
ca = "ca.pem"
cert = "b.pem"
key = "b.key"
"""


def test_max_epsilon_needs_max_total_epsilon() -> None:
    with pytest.raises(ConfigError) as err:
        parse_party_config(PARTY_TOML.format(extra=""), "party.toml")
    assert "max_total_epsilon" in str(err.value) and err.value.exit_code == 2
    cfg = parse_party_config(PARTY_TOML.format(extra="max_total_epsilon = 2.0"), "party.toml")
    assert cfg.policy is not None and cfg.policy.max_total_epsilon == 2.0


def test_federate_dp_policy_round_trips_with_its_budget() -> None:
    from fedanon.dp.policy import dp_local_policy

    spec = SimpleNamespace(class_name="y", params=SimpleNamespace(epsilon=Fraction(1, 2)))
    pol = dp_local_policy(spec)  # type: ignore[arg-type]
    text = PARTY_TOML.replace(
        PARTY_TOML[PARTY_TOML.index("[policy]") : PARTY_TOML.index("[tls]")], policy_to_toml(pol)
    )
    cfg = parse_party_config(text, "party.toml")
    assert cfg.policy is not None and cfg.policy.max_total_epsilon == 0.5


def test_lkc_without_max_releases_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "b.csv"
    data.write_text("a\n1\n")
    cfg = SimpleNamespace(
        ledger=tmp_path / "l.sqlite", policy=_policy(), data=data, source="party.toml"
    )
    with caplog.at_level(logging.WARNING):
        open_ledger(cfg).close()
    lines = [r.getMessage() for r in caplog.records if "has no max_releases" in r.getMessage()]
    assert len(lines) == 1 and "set max_releases" in lines[0]
    assert "accepted" not in lines[0]  # a warning at start must not read like an accepted run


def test_party_serve_exits_2_on_a_ledger_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fedanon.party.cli import main
    from fedanon.security import certs

    certs.init_ca(tmp_path)
    certs.issue(tmp_path, "hospital-b", "party")
    (tmp_path / "b.csv").write_text("age,y\n30,n\n")
    cfg = tmp_path / "party.toml"
    toml = PARTY_TOML.format(extra="max_total_epsilon = 2.0")
    cfg.write_text(
        toml.replace('"b.pem"', '"hospital-b.pem"').replace('"b.key"', '"hospital-b.key"')
    )
    (tmp_path / "party.ledger.sqlite").write_bytes(b"not a database at all " * 200)
    code = main(["serve", "--config", str(cfg)])
    assert code == 2
    assert "privacy ledger" in capsys.readouterr().err
    assert os.path.getsize(tmp_path / "party.ledger.sqlite") == 22 * 200  # left as it was
