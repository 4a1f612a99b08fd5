"""A killed hospital during an m-private run: the others' MPC workers log one line, not a
traceback (MPyC re-raises a lost connection's error, and its last ``unset_protocol`` sets a
result a shutdown may have set already), and an orphaned worker whose daemon is gone ends
quietly when it answers (fedanon.party.mpcruntime.CheckedExchanger.connection_lost,
fedanon.party.mpc._answer).  MPyC runs in a child process: importing its runtime parses
this process's command line."""

from __future__ import annotations

import io
import logging
import subprocess
import sys

import pytest

from fedanon.party import mpc

SCRIPT = r"""
import asyncio, logging, sys
sys.argv = [sys.argv[0]]
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(message)s")
from mpyc.runtime import Runtime as MpycRuntime

from fedanon.party.mpcruntime import CheckedExchanger


class Peer:
    protocol = None

    def __init__(self, pid):
        self.pid = pid


class Runtime:  # what connection_lost touches of the run's SafeRuntime
    unset_protocol = MpycRuntime.unset_protocol  # MPyC's own

    def __init__(self):
        self._loop = asyncio.new_event_loop()
        self.pid = 0
        self.names = ["hospital-a", "hospital-b"]
        done = self._loop.create_future()
        done.set_result(None)  # a shutdown already set it
        self.parties = [Peer(0), Peer(1)]
        self.parties[0].protocol = done


rt = Runtime()
for exc in (ConnectionResetError("peer killed"), None):
    ex = CheckedExchanger(rt, peer_pid=1)
    ex.admitted = True
    rt.parties[1].protocol = ex
    ex.connection_lost(exc)  # raised before: the error, then InvalidStateError
    print("answered", ex.answered.result())
print("ok")
"""


def test_a_lost_peer_is_one_log_line_in_the_worker() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "WARNING MPC connection to hospital-b lost (ConnectionResetError)" in out
    assert "WARNING MPC connection to hospital-b lost (InvalidStateError)" in out
    assert out.count("answered False") == 2 and out.rstrip().endswith("ok")
    assert "Traceback" not in proc.stderr + out


class _Gone(io.RawIOBase):
    def write(self, b: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_an_answer_to_a_daemon_that_is_gone_ends_the_worker_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        assert mpc._answer(_Gone(), b"1") is False
    assert "the daemon is gone" in caplog.text
    out = io.BytesIO()
    assert mpc._answer(out, b"0") is True and out.getvalue() == b"0"
