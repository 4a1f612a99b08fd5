"""Issue 24 attack, finding 2: data refusals count towards ``max_refusals_per_hour``.

A refusal that depends on the data tells the leader one bit (the data fits the spec or not).
Counted only for policy, protocol and authorization refusals, 21 runs binary-searched the
federation's largest fnlwgt with no lockout.  Every refused or failed Prepare counts now."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.io.sources import parse_source
from fedanon.ledger.daemon import DaemonLedger
from fedanon.party.config import PartyConfig
from fedanon.party.faults import DataRefused
from fedanon.party.ledgered import LedgerGate
from fedanon.party.prepare import Proposal, prepare_run
from fedanon.party.run import Peer
from fedanon.security.policy import PartyPolicy

RING = ("hospital-a", "hospital-b", "hospital-c")
POLICY = PartyPolicy(
    min_K=2,
    min_L=1,
    max_C=1.0,
    release_unchanged=("y",),
    max_refusals_per_hour=2,
    lockout_minutes=60,
)


class _Ctx:  # a leader's call as gRPC shows it
    def peer(self) -> str:
        return "ipv4:10.0.0.5:40000"

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}

    def set_trailing_metadata(self, md: tuple[tuple[str, str], ...]) -> None:
        self.trailing = dict(md)  # a lockout's: what the leader names (test_leader_denied)


def _probe(hi: int) -> str:  # "is every age below hi?": refused when a record is not
    return (
        "[privacy]\nL = 1\nK = 2\nC = 1.0\n"
        f'[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, {hi}]\n'
        '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["n", "y"]\n'
    )


def test_the_third_data_refused_probe_is_locked_out(tmp_path: Path) -> None:
    data = tmp_path / "b.csv"
    data.write_text("age,y\n" + "".join(f"{20 + i},{'ny'[i % 2]}\n" for i in range(6)) + "71,y\n")
    cfg = PartyConfig(
        name="hospital-b",
        listen="127.0.0.1:0",
        data=parse_source(str(data), None, None, tmp_path),
        ca=tmp_path / "ca.pem",
        cert=tmp_path / "b.pem",
        key=tmp_path / "b.key",
        policy=POLICY,
    )
    led = DaemonLedger(tmp_path / "l.sqlite", POLICY, data)
    gate = LedgerGate(led, "leader")
    ring = tuple(Peer(n, f"{n}:1") for n in RING)
    for i, hi in enumerate((50, 70)):  # two probes: the oldest record is 50 or older, 70 or older
        assert gate.locked(_Ctx()) is None  # type: ignore[arg-type]
        run_id = bytes([i + 1]) * 16
        with pytest.raises(DataRefused), gate.prepare(_Ctx(), run_id) as admit:  # type: ignore[arg-type]
            run, digest = prepare_run(cfg, Proposal(run_id, _probe(hi), {}, ring, 1))
            admit(run, digest)
    ctx = _Ctx()
    why = gate.locked(ctx)  # type: ignore[arg-type]  # the third probe is refused at the door
    assert why is not None and "locked out" in why, why
    assert ctx.trailing == {"fedanon-locked-out": "leader", "fedanon-lockout-minutes": "60"}
    rows = led.store.read("SELECT event, phase FROM entries WHERE event IN ('failed', 'lockout')")
    assert [r[0] for r in rows] == ["failed", "failed", "lockout"]  # the identity (not address)
    led.close()
