"""A party daemon told to stop is gone within its shutdown limit, whatever hangs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time


def test_a_stuck_process_is_ended_by_the_shutdown_limit() -> None:
    # the main thread waits forever (as a daemon whose graceful stop hangs would), a
    # non-daemon thread blocks the interpreter's exit too: the limit still ends the process
    code = textwrap.dedent(
        """
        import threading
        from fedanon.party.server import _exit_after
        threading.Thread(target=threading.Event().wait).start()
        threading.Thread(target=_exit_after, args=(0.5,), daemon=True).start()
        threading.Event().wait()
        """
    )
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1, out.stderr
    assert time.monotonic() - t0 < 15
    assert "exiting now" in out.stderr
