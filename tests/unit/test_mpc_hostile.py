"""A hostile or stalled MPC peer must not hold a hospital's daemon past a check's deadline
(m-privacy review): the daemon's side of the worker (party/mpc.py, MpcSession.check)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np

from fedanon.errors import ProtocolError
from fedanon.party.faults import TimedOut
from fedanon.party.mpc import MpcSession


def _stalled_session() -> MpcSession:
    """A worker that never reads its stdin: what a real one is while it waits, without a
    deadline, for a peer that never inputs its record count (the honest workers' opening of
    N waits for every hospital's share)."""
    session = object.__new__(MpcSession)
    session.proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    return session


def test_a_check_larger_than_the_pipe_ends_at_its_deadline_when_the_worker_reads_nothing() -> None:
    session = _stalled_session()
    groups = np.ones((20_000, 3), dtype=np.int64)  # 480 kB: far more than a pipe's buffer
    got: list[object] = []

    def ask() -> None:
        try:
            got.append(session.check(groups, b"q" * 32, timeout=1.0))
        except (TimedOut, ProtocolError) as exc:
            got.append(exc)

    started = time.monotonic()
    t = threading.Thread(target=ask, daemon=True)
    t.start()
    t.join(10)
    try:
        assert got, "the check's write blocked past its deadline"
        assert isinstance(got[0], TimedOut)
        assert time.monotonic() - started < 5
        assert session.proc.poll() is not None  # the worker was killed
    finally:
        session.kill()


def test_a_small_check_still_times_out_and_a_dead_worker_is_a_protocol_error() -> None:
    session = _stalled_session()
    try:
        try:
            session.check(np.ones((2, 3), dtype=np.int64), b"q" * 32, timeout=0.5)
        except TimedOut:
            pass
        else:
            raise AssertionError("no timeout")
        try:
            session.check(np.ones((2, 3), dtype=np.int64), b"q" * 32, timeout=0.5)
        except ProtocolError as exc:
            assert "ended" in str(exc)
        else:
            raise AssertionError("a killed worker answered")
    finally:
        session.kill()
