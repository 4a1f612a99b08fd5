"""The leader attributes a failed call from the status and the fedanon-* trailing metadata,
never by parsing the message text; peer text is shown sanitized."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from fedanon.leader.links import Link, PartyFailed, PartyRejected
from fedanon.logsafe import safe
from fedanon.net import rpc


class FakeError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str, md: dict[str, str] | None = None):
        self._code, self._details = code, details
        self._items = [_Item(k, v) for k, v in (md or {}).items()]

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Any:
        return tuple(self._items)


class _Item:
    def __init__(self, key: str, value: str) -> None:
        self.key, self.value = key, value


LINK = Link("h1", "10.0.0.1:7443", None, None, frozenset({"h1", "h2", "h3"}))  # type: ignore[arg-type]


def md(party: str, kind: str, **extra: str) -> dict[str, str]:
    return {rpc.MD_PARTY: party, rpc.MD_KIND: kind, **extra}


def test_text_is_never_parsed_for_a_name() -> None:
    # the old leader took "party h3" out of such a text and blamed h3
    err = LINK.failure("prepare", FakeError(grpc.StatusCode.UNAVAILABLE, "party h3 unreachable"))
    assert isinstance(err, PartyFailed) and err.party == "h1"
    assert "unreachable at 10.0.0.1:7443" in str(err)
    err = LINK.failure("x", FakeError(grpc.StatusCode.INVALID_ARGUMENT, "party h2: bad value"))
    assert isinstance(err, PartyFailed) and err.party == "h1"


def test_metadata_names_the_party_and_the_kind() -> None:
    refusal = FakeError(
        grpc.StatusCode.FAILED_PRECONDITION,
        "K = 1 < min_K = 10",
        md("h2", "policy", **{rpc.MD_RULE: "min_K"}),
    )
    err = LINK.failure("prepare", refusal)
    assert isinstance(err, PartyRejected) and err.exit_code == 2
    assert (
        str(err) == "h2 refuses: K = 1 < min_K = 10" and err.party == "h2" and err.rule == "min_K"
    )
    bad = LINK.failure(
        "prepare", FakeError(grpc.StatusCode.INVALID_ARGUMENT, "line 3: no", md("h1", "input"))
    )
    assert (
        isinstance(bad, PartyRejected)
        and str(bad) == "party h1 rejected the run during prepare: line 3: no"
    )
    down = LINK.failure(
        "round 2", FakeError(grpc.StatusCode.UNAVAILABLE, "gone", md("h3", "unreachable"))
    )
    assert isinstance(down, PartyFailed) and down.party == "h3" and "unreachable" in str(down)


@pytest.mark.parametrize(
    ("party", "kind"), [("leader", "policy"), ("h9", "input"), ("h2", "weird")]
)
def test_metadata_outside_the_ring_or_of_unknown_kind_blames_the_link(
    party: str, kind: str
) -> None:
    err = LINK.failure(
        "prepare", FakeError(grpc.StatusCode.FAILED_PRECONDITION, "x", md(party, kind))
    )
    assert isinstance(err, PartyFailed) and err.party == "h1"


def test_peer_text_is_sanitized() -> None:
    err = LINK.failure(
        "prepare", FakeError(grpc.StatusCode.INTERNAL, "a\nfedanon: error: forged\x1b[31m")
    )
    assert "\n" not in str(err) and "\x1b" not in str(err) and "\\x0a" in str(err)


def test_failure_metadata_keeps_only_fedanon_keys() -> None:
    e = FakeError(grpc.StatusCode.ABORTED, "", {"fedanon-party": "h2", "user-agent": "x"})
    assert rpc.failure_metadata(e) == {"fedanon-party": "h2"}
    assert rpc.failure_metadata(FakeError(grpc.StatusCode.ABORTED, "")) == {}


def test_safe() -> None:
    assert safe("plain text: é ü 東京") == "plain text: é ü 東京"
    assert safe("a\nb\rc\x00d\u2028e\u202ef") == "a\\x0ab\\x0dc\\x00d\\u2028e\\u202ef"
    assert safe("x" * 10, limit=4) == "xxxx...[6 more characters]"
