"""Issue 24, item 11: a party's interceptor refusing the leader's (CA-signed) certificate is a
configuration matter the leader names -- exit 2, the party, "authorization failed" -- not a
party failure (exit 1) nor an ``_InactiveRpcError``."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import grpc
import pytest
from test_links import LINK, FakeError, md

from fedanon.leader.links import LeaderLockedOut, LeaderNotAuthorized, PartyFailed
from fedanon.ledger.daemon import DaemonLedger
from fedanon.party.ledgered import LedgerGate
from fedanon.security.policy import PartyPolicy


@pytest.mark.parametrize(
    "code", [grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED]
)
def test_a_denied_leader_is_a_usage_error_naming_the_party(code: grpc.StatusCode) -> None:
    err = LINK.failure("prepare", FakeError(code, "rogue may not call /fedanon.v1.Party/Prepare"))
    assert isinstance(err, LeaderNotAuthorized) and err.exit_code == 2 and err.party == "h1"
    assert str(err) == (
        "authorization failed: h1 does not authorize this leader (rogue may not call "
        "/fedanon.v1.Party/Prepare); h1's party.toml must name this leader in [peers] leader"
    )


def test_a_party_reporting_an_auth_failure_of_its_own_stays_a_party_failure() -> None:
    # a ring successor refusing a relay, reported with metadata: not the leader's certificate
    err = LINK.failure(
        "round 1", FakeError(grpc.StatusCode.PERMISSION_DENIED, "relay refused", md("h2", "auth"))
    )
    assert isinstance(err, PartyFailed) and err.party == "h2"


class _Ctx:  # the leader's call at the party's door, as gRPC shows it
    def __init__(self) -> None:
        self.trailing: tuple[tuple[str, str], ...] = ()

    def peer(self) -> str:
        return "ipv4:10.0.0.5:40000"

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}

    def set_trailing_metadata(self, md: tuple[tuple[str, str], ...]) -> None:
        self.trailing = md


def test_a_ledger_lockout_is_named_as_such_not_as_a_missing_authorization(tmp_path: Path) -> None:
    """A hospital whose ledger locked the leader out (repeated refusals) refuses its calls
    with PERMISSION_DENIED, like its authorization does; the leader must not send the user
    to [peers] leader but say it is locked out, for how long, and how the hospital lifts it."""
    now = [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)]
    policy = PartyPolicy(min_K=2, min_L=1, max_C=1.0, max_refusals_per_hour=2, lockout_minutes=30)
    led = DaemonLedger(tmp_path / "l.sqlite", policy, tmp_path / "x", clock=lambda: now[0])
    gate = LedgerGate(led, "leader")  # the caller's identity: "leader"
    for _ in range(2):
        assert gate.locked(_Ctx()) is None  # type: ignore[arg-type]
        gate.refused(_Ctx(), "/fedanon.v1.Party/Prepare", "refused by policy")  # type: ignore[arg-type]
    now[0] += dt.timedelta(minutes=10, seconds=30)
    ctx = _Ctx()
    why = gate.locked(ctx)  # type: ignore[arg-type]
    assert (
        why
        == "identity leader is locked out until 2026-01-01T00:30:00Z after too many refused calls"
    )
    err = LINK.failure(
        "prepare", FakeError(grpc.StatusCode.PERMISSION_DENIED, why, dict(ctx.trailing))
    )
    assert isinstance(err, LeaderLockedOut) and err.exit_code == 2 and err.party == "h1"
    assert str(err) == (
        "h1 has locked this leader out for 20 more minutes after repeated refused calls (its "
        "[policy] max_refusals_per_hour within an hour, default 100: identity leader is locked "
        "out until 2026-01-01T00:30:00Z after too many refused calls); the lockout ends by "
        "itself after its lockout_minutes, or the hospital lifts it with `fedanon party ledger "
        "unlock leader --config party.toml`"
    )
    assert led.access.unlock("leader")
    ctx = _Ctx()
    assert gate.locked(ctx) is None and ctx.trailing == ()  # type: ignore[arg-type]
    led.close()
