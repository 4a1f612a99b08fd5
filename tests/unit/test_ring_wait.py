"""The leader waiting for a sum's calls: returns when all succeeded, probes every party's status
while they are outstanding, and prefers what a probe finds to the failure of a call that may
only have waited for someone else."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest

from fedanon.errors import FedanonError, RunAborted
from fedanon.leader.links import Link, PartyFailed
from fedanon.leader.watch import Call, wait_all
from fedanon.net import rpc


def _call(name: str) -> Call:
    link = Link(name, "-", None, None, frozenset({"a", "b", "c"}))  # type: ignore[arg-type]
    return Call(link, f"round 0 counts sum ({name})", Future())


class Probe:
    def __init__(self, answers: list[FedanonError | None]) -> None:
        self.answers = answers
        self.times: list[float] = []

    def __call__(self) -> FedanonError | None:
        self.times.append(time.monotonic())
        return self.answers.pop(0) if self.answers else None


def _later(fut: Future[Any], delay: float, value: Any = None, exc: Exception | None = None):  # type: ignore[no-untyped-def]
    def go() -> None:
        time.sleep(delay)
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(value)

    threading.Thread(target=go, daemon=True).start()


def test_returns_when_every_call_succeeded_without_probing() -> None:
    calls = [_call("a"), _call("c")]
    for i, c in enumerate(calls):
        _later(c.future, 0.05 * (i + 1))
    probe = Probe([])
    wait_all(calls, probe, rpc.Deadline(10), probe_s=5.0)
    assert probe.times == []


def test_a_late_sum_is_probed_until_a_party_is_named() -> None:
    calls = [_call("a"), _call("c")]  # "c" (the Collect) never answers
    _later(calls[0].future, 0.01)
    probe = Probe([None, PartyFailed("b", "round 0 counts sum", "unreachable")])
    t0 = time.monotonic()
    with pytest.raises(PartyFailed) as err:
        wait_all(calls, probe, rpc.Deadline(10), probe_s=0.2)
    assert err.value.party == "b"
    assert len(probe.times) == 2 and 0.3 < time.monotonic() - t0 < 2.0


def test_a_failed_call_asks_everyone_first() -> None:
    calls = [_call("a"), _call("c")]
    timeout = PartyFailed("c", "round 0 counts sum (collect)", "DEADLINE_EXCEEDED")
    _later(calls[1].future, 0.01, exc=timeout)
    with pytest.raises(PartyFailed) as err:  # the probe finds the party that really failed
        wait_all(calls, Probe([PartyFailed("b", "x", "unreachable")]), rpc.Deadline(10), 5.0)
    assert err.value.party == "b"
    calls = [_call("a"), _call("c")]
    _later(calls[1].future, 0.01, exc=timeout)
    with pytest.raises(PartyFailed) as err:  # nobody else failed: the call's own failure
        wait_all(calls, Probe([None]), rpc.Deadline(10), 5.0)
    assert err.value is timeout


def test_the_run_deadline_bounds_the_wait() -> None:
    with pytest.raises(RunAborted, match="deadline"):
        wait_all([_call("c")], Probe([]), rpc.Deadline(0.3), probe_s=5.0)
