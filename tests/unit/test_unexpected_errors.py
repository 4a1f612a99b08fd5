"""An exception outside fedanon's error hierarchy raised inside a party RPC must not reach the
leader (or the hospital's log) with its text: gRPC's default answer is
``Exception calling application: <str(exc)>``, and that text may quote a record value."""

from __future__ import annotations

import logging
from typing import Any

import grpc
import pytest

from fedanon.party.callcap import CallCap
from fedanon.party.faults import is_abort, unexpected
from fedanon.party.service import PartyService

SECRET = "value-39-of-line-2"


class FakeContext:
    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None
        self.details = ""
        self.trailing: tuple[tuple[str, str], ...] = ()

    def set_trailing_metadata(self, md: tuple[tuple[str, str], ...]) -> None:
        self.trailing = md

    def time_remaining(self) -> float:  # within the daemon's maximum wait: not watched
        return 10.0

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code, self.details = code, details
        raise Exception()  # what grpc's _Context.abort raises


class Config:
    name = "hospital-a"


def _service() -> Any:
    svc = PartyService.__new__(PartyService)  # _guard needs only the config and the cap
    svc.config = Config()
    svc.cap = CallCap(600.0)
    return svc


def _boom() -> None:
    raise ValueError(f"could not convert {SECRET!r}")


def test_an_unexpected_exception_reaches_the_leader_without_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ctx = FakeContext()
    with caplog.at_level(logging.DEBUG), pytest.raises(Exception) as info:
        _service()._guard(ctx, "Instruct", _boom)
    assert is_abort(info.value)  # the status was set through abort, not gRPC's default
    assert ctx.code == grpc.StatusCode.INTERNAL
    assert SECRET not in ctx.details
    assert "hospital-a" in ctx.details and "Instruct" in ctx.details
    assert ("fedanon-party", "hospital-a") in ctx.trailing or any(
        v == "hospital-a" for _, v in ctx.trailing
    )
    assert SECRET not in caplog.text
    assert "ValueError" in caplog.text


def test_an_abort_inside_the_work_passes_through() -> None:
    ctx = FakeContext()

    def work() -> None:
        ctx.abort(grpc.StatusCode.NOT_FOUND, "no such run")

    with pytest.raises(Exception) as info:
        _service()._guard(ctx, "Status", work)
    assert is_abort(info.value)
    assert ctx.code == grpc.StatusCode.NOT_FOUND and ctx.details == "no such run"


def test_unexpected_names_type_and_place_only(caplog: pytest.LogCaptureFixture) -> None:
    try:
        _boom()
    except ValueError as exc:
        with caplog.at_level(logging.DEBUG):
            f = unexpected(exc, "hospital-b", "Collect")
    assert f.party == "hospital-b" and f.kind == "aborted"
    assert SECRET not in f.detail and SECRET not in caplog.text
    assert "test_unexpected_errors.py" in caplog.text
