"""Party daemons forked from a warm `fedanon federate` process (the local start-up cost).

A daemon started as a new Python process spends about 0.5 CPU-seconds importing gRPC,
numpy and cryptography before it serves; three of them on two cores cost the local
federation about a second before its first round.  `fedanon federate` imports the daemon's
modules once (:func:`preload`) and forks one child per party: each child is an ordinary
party daemon (its own process, its own config, certificate and port, mutual TLS, tied to
the federate process by ``PR_SET_PDEATHSIG`` like :mod:`fedanon.leader.tethered`), it just starts
with the modules already loaded.

Fork is safe here because it happens before the federate process has created any gRPC
object or thread (gRPC must not be forked once it runs); the child ends with ``os._exit``
so none of the parent's clean-up runs twice.  Only the CLI uses it (a fresh process):
library callers and tests start daemons with ``subprocess`` as before.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from fedanon.leader import tethered
from fedanon.pandasgate import without_pandas

POLL_S = 0.01
# imported by the table reader when it reads, by Arrow's conversions to numpy (numpy.ma) and
# by the union's decoding (numpy.char): once here, not once per forked daemon
ARROW = ("pyarrow", "pyarrow.csv", "pyarrow.compute", "numpy.ma", "numpy.char")
# imported by a daemon as it starts (grpc.server, the same-table digest): about 6 ms each
LATER = ("grpc._server", "grpc._interceptor", "fedanon.io.sametable")


class Forked:
    """A forked daemon, with the :class:`subprocess.Popen` calls `federate` makes."""

    def __init__(self, pid: int, args: Sequence[str]) -> None:
        self.pid = pid
        self.args = list(args)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(POLL_S)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def preload() -> None:
    """Import what a party daemon runs, so that forked daemons start warm: the daemon's
    modules and the Arrow modules the table reader imports when it reads -- about 0.5
    CPU-seconds per daemon otherwise.  Not pandas: from here on this process and its
    children refuse it to Arrow (:func:`without_pandas`).  Arrow re-creates its thread
    pools in a forked child; the leader writes the release with the same modules."""
    import fedanon.party.cli
    import fedanon.party.server
    import fedanon.party.service  # (fedanon.party.server loads it lazily; here: before the fork)

    for name in ARROW + LATER:
        with contextlib.suppress(ImportError):  # optional: the daemon imports it if needed
            importlib.import_module(name)
    without_pandas()  # the children inherit it
    from fedanon.io.columns import use_system_allocator

    use_system_allocator()  # Arrow's memory pool and its pandas probe, once (no thread)
    fedanon.party.cli.parser()  # each daemon parses its arguments with the same parser


def can_fork() -> bool:
    """Fork only where it is safe: Linux, and no thread besides this one yet."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


def fork_daemon(argv: Sequence[str], log_path: Path) -> Forked:
    """``fedanon party ARGV`` in a forked child whose output goes to ``log_path``."""
    parent = os.getpid()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    gc.freeze()  # the child's collector then leaves the parent's objects (and pages) alone
    try:
        pid = os.fork()
    finally:
        if os.getpid() == parent:
            gc.unfreeze()
    if pid:
        return Forked(pid, ["party", *argv])
    code = 1
    try:  # the child: never returns into the parent's code
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        tethered.tie_to_parent(parent)
        from fedanon.party.cli import main

        code = main(list(argv))
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
