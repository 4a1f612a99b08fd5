"""A daemon stops on a SIGTERM that the kernel hands to one of its other threads.

A signal sent to a process goes to any of its threads that does not block it.  Python runs
its handler in the main thread, at the next bytecode there; a main thread blocked in
``Event.wait()`` with no timeout is not woken by a signal another thread took, so the daemon
kept serving, SIGTERM lost (seen once in the test suite: ``party serve`` alive 20 s after
SIGTERM, stopped at once by a second one).  The kernel's choice is not ours; ``tgkill`` to a
gRPC thread reproduces it every time.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import serve_party

from fedanon.leader.localdaemons import party_toml
from fedanon.security import certs
from fedanon.security.policy import PartyPolicy

pytestmark = pytest.mark.slow
TABLE = Path(__file__).resolve().parents[2] / "examples" / "table1" / "table1.csv"
NAME = "hospital-a"
SYS_TGKILL = 234  # x86-64; the test is Linux-only (/proc, tgkill)


def _tgkill(pid: int, tid: int, sig: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(SYS_TGKILL, pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def _threads_taking(pid: int, sig: int) -> list[int]:
    """The threads of ``pid`` that do not block ``sig`` (the kernel may hand it to any)."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        blocked = int(
            next(ln for ln in status.splitlines() if ln.startswith("SigBlk:")).split()[1], 16
        )
        if not blocked >> (sig - 1) & 1:
            out.append(int(tid))
    return out


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.uname().machine != "x86_64",
    reason="tgkill by syscall number (x86-64 Linux)",
)
def test_sigterm_taken_by_another_thread_stops_the_daemon(tmp_path: Path) -> None:
    certdir = tmp_path / "certs"
    certs.init_ca(certdir)
    certs.issue(certdir, "leader", "leader")
    certs.issue(certdir, NAME, "party")
    cfg = tmp_path / f"{NAME}.toml"
    policy = PartyPolicy(min_K=2, min_L=1, max_C=1.0)
    cfg.write_text(party_toml(NAME, TABLE, certdir, None, policy))
    log = tmp_path / f"{NAME}.log"
    proc, _ = serve_party(cfg, tmp_path / "port", log)
    try:
        time.sleep(0.5)  # the main thread is now in its wait for the stop
        others = [t for t in _threads_taking(proc.pid, signal.SIGTERM) if t != proc.pid]
        assert others, "no other thread of the daemon takes SIGTERM"
        _tgkill(proc.pid, others[0], signal.SIGTERM)
        try:
            rc = proc.wait(8)
        except subprocess.TimeoutExpired:
            pytest.fail("still serving 8 s after a SIGTERM taken by another thread")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert rc == 0, log.read_text()[-3000:]
