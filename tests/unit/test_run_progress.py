"""A run's idle clock and the daemon's maximum wait (second review, R2): only progress keeps a
run (a call in progress, a repeat of an old call, does not), a run open longer than the
maximum age is dropped, every wait ends by the maximum, and the settings are validated."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from fedanon.errors import ConfigError
from fedanon.party.callcap import CallCap
from fedanon.party.config import DEFAULT_MAX_AGE_S, DEFAULT_MAX_WAIT_S, parse_party_config
from fedanon.party.faults import TimedOut, UnknownRun
from fedanon.party.relay import Vector
from fedanon.party.run import PartyRun, Peer
from fedanon.party.runs import RunRegistry
from fedanon.tds.state import Phase

PARTY = """
[party]
name = "alice"
listen = "0.0.0.0:7443"
data = "alice.csv"
spec = "run.toml"
[tls]
ca = "ca.pem"
cert = "alice.pem"
key = "alice.key"
"""


class Counting:  # a party's statistics: zeros of the size asked
    def stats(self, phase: Any, round_: int, size: int, digest: bytes) -> Any:
        return np.zeros(size, dtype=np.int64)


def _run(run_id: bytes = b"r" * 16) -> PartyRun:
    ring = tuple(Peer(f"h{i}", f"127.0.0.1:{i + 1}") for i in range(3))
    return PartyRun(run_id, "h2", None, Counting(), ring, 2, "leader")  # type: ignore[arg-type]


def test_the_settings_are_read_and_checked() -> None:
    cfg = parse_party_config(PARTY)
    assert (cfg.max_wait_s, cfg.max_age_s) == (DEFAULT_MAX_WAIT_S, DEFAULT_MAX_AGE_S)
    text = PARTY.replace("[tls]", "max_wait_seconds = 20\nrun_max_age_seconds = 7200\n[tls]")
    cfg = parse_party_config(text)
    assert (cfg.max_wait_s, cfg.max_age_s) == (20.0, 7200.0)
    for key, bad in (
        ("max_wait_seconds", "0"),
        ("max_wait_seconds", "86401"),
        ("max_wait_seconds", "true"),
        ("max_wait_seconds", '"10"'),
        ("run_max_age_seconds", "-1"),
        ("run_max_age_seconds", "2592001"),
    ):
        with pytest.raises(ConfigError, match=rf"\[party\] {key} is invalid") as err:
            parse_party_config(PARTY.replace("[tls]", f"{key} = {bad}\n[tls]"))
        assert (
            err.value.expected is not None and "a number of seconds in (0, " in err.value.expected
        )


def test_a_busy_run_with_no_progress_is_reaped_and_its_waits_end() -> None:
    reg = RunRegistry("h2", idle_timeout_s=10.0)
    run = _run()
    reg.add(run)
    ended: list[BaseException] = []

    def waiting() -> None:  # a call waiting for instruction 4 with a day's deadline
        with reg.use(run.run_id) as r, r.cond:
            try:
                r.wait(lambda: r.instructions >= 5, time.monotonic() + 86400, "instruction 4")
            except UnknownRun as exc:
                ended.append(exc)

    t = threading.Thread(target=waiting)
    t.start()
    time.sleep(0.1)
    t0 = run.progressed
    with reg.use(run.run_id):  # calls as such are no progress
        pass
    assert run.progressed == t0 and run.busy == 1
    assert reg.reap(now=t0 + 9) == []
    assert reg.reap(now=t0 + 11) == [run.run_id]  # busy, yet reaped
    t.join(5)
    assert not t.is_alive() and len(ended) == 1
    assert run.run_id not in reg


def test_progress_keeps_a_run_and_the_maximum_age_ends_it() -> None:
    reg = RunRegistry("h2", idle_timeout_s=10.0, max_age_s=100.0)
    run = _run()
    reg.add(run)
    opened = run.opened
    for t in range(8, 100, 8):  # the leader moves the run on every 8 s
        run.progressed = opened + t
        assert reg.reap(now=opened + t + 1) == []
    assert reg.reap(now=opened + 101) == [run.run_id]


def test_a_retried_ring_vector_is_no_progress() -> None:
    run = _run()
    run.progressed = 0.0
    vec = Vector(0, Phase.COUNTS, b"x", 0, np.zeros(8, np.uint64), time.monotonic() + 5, run.chain)
    sent: list[Vector] = []  # the last party of the ring: nothing forwarded
    run.relay(vec, sent.append)  # new statistics: progress
    assert run.progressed > 0
    run.progressed = 0.0
    run.relay(vec, sent.append)  # a retry, answered from the first computation: none
    assert run.progressed == 0.0
    assert run.done == 1 and not sent  # the last party keeps the one sum for Collect


def test_every_wait_ends_by_the_maximum_whatever_the_deadline() -> None:
    run = _run()
    run.max_wait_s = 0.3
    t0 = time.monotonic()
    with run.cond, pytest.raises(TimedOut, match="instruction 0 did not come"):
        run.wait(lambda: run.instructions >= 1, t0 + 86400, "instruction 0")
    assert 0.25 <= time.monotonic() - t0 < 2


class _Context:
    def __init__(self, left: float | None) -> None:
        self.left = left
        self.active = True
        self.callbacks: list[Any] = []

    def time_remaining(self) -> float | None:
        return self.left

    def is_active(self) -> bool:
        return self.active

    def cancel(self) -> None:
        self.active = False
        for cb in self.callbacks:
            cb()

    def add_callback(self, cb: Any) -> bool:
        self.callbacks.append(cb)
        return True


def test_the_watchdog_cancels_only_calls_past_the_maximum() -> None:
    cap = CallCap(0.2, grace_s=0.1)
    try:
        assert cap.deadline(_Context(86400.0), 30.0) - time.monotonic() <= 0.2  # type: ignore[arg-type]
        assert cap.deadline(_Context(None), 0.05) - time.monotonic() <= 0.05  # type: ignore[arg-type]
        short, long_, none, ended = _Context(0.25), _Context(86400.0), _Context(None), _Context(9e9)
        for ctx in (short, long_, none, ended):
            cap.arm(ctx)  # type: ignore[arg-type]
        assert cap.pending() == 3  # the short one ends at its own deadline (gRPC)
        ended.active = False  # ends by itself in time
        for cb in ended.callbacks:
            cb()
        time.sleep(0.6)
        assert (short.active, long_.active, none.active) == (True, False, False)
        assert cap.cancelled == 2 and cap.pending() == 0
    finally:
        cap.close()


class _Mpc:  # a run's MPC worker: how it was closed
    def __init__(self) -> None:
        self.closed: list[bool] = []

    def close(self, finished: bool = False) -> None:
        self.closed.append(finished)


@pytest.mark.parametrize(("why", "graceful"), [("finished", True), ("aborted", False)])
def test_only_a_finished_run_lets_its_mpc_worker_pass_the_shutdown(
    why: str, graceful: bool
) -> None:
    # an Abort (or a reap) kills the worker at once: waiting for MPyC's shutdown barrier,
    # which the other hospitals' workers may never reach, held the Abort call for seconds
    reg = RunRegistry("h2", 60.0)
    run = _run()
    mpc = run.mpc = _Mpc()  # type: ignore[assignment]
    reg.add(run)
    reg.drop(run.run_id, why)
    assert mpc.closed == [graceful]
