"""``python -m fedanon.leader.tethered PARENT_PID -- CMD ...``: run CMD so that it is sent SIGTERM
when the process that started it dies, even by SIGKILL (Linux ``PR_SET_PDEATHSIG``).

`fedanon federate` starts its party daemons through this, so a killed federate never leaves
daemons serving (and reading patient data) behind.  The death signal survives ``exec``; it
fires when the *thread* that forked exits, which for federate is its main thread.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1


def tie_to_parent(parent: int) -> bool:
    """Ask the kernel for SIGTERM when our parent dies; False where that is unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)  # this process's symbols: libc's prctl
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent:  # the parent died before prctl: nobody will signal us
        os._exit(1)
    return True


def command(parent: int, cmd: Sequence[str]) -> list[str]:
    """The argv that runs ``cmd`` tied to ``parent``."""
    return [sys.executable, "-m", "fedanon.leader.tethered", str(parent), "--", *cmd]


def main(argv: Sequence[str]) -> None:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        sys.exit("usage: python -m fedanon.leader.tethered PARENT_PID -- CMD ...")
    tie_to_parent(int(argv[0]))
    cmd = list(argv[2:])
    os.execvp(cmd[0], cmd)  # noqa: S606 (our own argv from federate, no shell)


if __name__ == "__main__":
    main(sys.argv[1:])
