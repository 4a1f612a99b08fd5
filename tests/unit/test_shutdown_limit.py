"""A party daemon told to stop is gone within its shutdown limit, whatever hangs."""

from __future__ import annotations

import signal
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


def test_a_hang_in_the_interpreters_exit_is_ended_too() -> None:
    # once the interpreter exits (its last garbage collection, finalizers) no other Python
    # thread runs, the watchdog's included: a finalizer that hangs there is still bounded
    code = textwrap.dedent(
        """
        import gc
        import time
        from fedanon.party.server import limit_shutdown

        gc.disable()  # the cycle is collected at the interpreter's exit, not by an earlier
        # collection while the watchdog thread still runs (which would end it first, exit 1)

        class Stuck:
            def __del__(self):
                print("finalizer hangs", flush=True)
                time.sleep(120)

        s = Stuck()
        s.cycle = s  # collected at the interpreter's exit
        del s
        limit_shutdown(1.0)
        """
    )
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGALRM, out.stderr  # the kernel's clock ended it
    assert "finalizer hangs" in out.stdout
    assert time.monotonic() - t0 < 10, "the limit did not end a hang in the interpreter's exit"


def test_the_limit_logs_before_it_ends_a_stuck_process() -> None:
    code = textwrap.dedent(
        """
        import threading
        from fedanon.party.server import limit_shutdown
        limit_shutdown(1.0)
        threading.Event().wait()
        """
    )
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1, out.stderr
    assert time.monotonic() - t0 < 5
    assert "exiting now" in out.stderr
