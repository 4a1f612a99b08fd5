"""Issue 24, item 11: a party's interceptor refusing the leader's (CA-signed) certificate is a
configuration matter the leader names -- exit 2, the party, "authorization failed" -- not a
party failure (exit 1) nor an ``_InactiveRpcError``."""

from __future__ import annotations

import grpc
import pytest
from test_links import LINK, FakeError, md

from fedanon.leader.links import LeaderNotAuthorized, PartyFailed


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
