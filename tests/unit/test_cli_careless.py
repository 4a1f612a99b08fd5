"""The command line used carelessly (the CLI review): signals whose exception Python
swallowed, option values of the wrong range, output paths no command may write."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import weakref
from pathlib import Path

import pytest

from fedanon.io.fsutil import atomic_write
from fedanon.process import run_command


class _Box:
    pass


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_swallowed_in_a_finalizer_publishes_nothing(
    tmp_path: Path, signum: int, code: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal whose handler runs inside a weakref callback (Arrow dropping an input
    block): Python prints 'Exception ignored' and goes on; the run published its table with
    exit 0.  Now: nothing published, exit 128 + N."""
    out = tmp_path / "released.csv"
    swallowed: list[type[BaseException]] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: swallowed.append(u.exc_type))

    def handler(_args: argparse.Namespace) -> int:
        def gone(_ref: object) -> None:
            os.kill(os.getpid(), signum)
            for _ in range(1000):  # the handler runs here, between two bytecodes
                pass

        box = _Box()
        ref = weakref.ref(box, gone)
        del box  # the callback runs now; its exception is printed and dropped
        assert ref() is None
        atomic_write(out, lambda fh: fh.write("a\n1\n"))
        return 0

    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert run_command(handler, argparse.Namespace(quiet=True)) == code
    finally:
        signal.signal(signal.SIGINT, previous)
    assert list(tmp_path.iterdir()) == []
    assert swallowed and issubclass(swallowed[0], KeyboardInterrupt)  # the case at hand


def test_no_signal_no_change(tmp_path: Path) -> None:
    out = tmp_path / "released.csv"
    assert (
        run_command(
            lambda _a: atomic_write(out, lambda fh: fh.write("a\n")) or 0,
            argparse.Namespace(quiet=True),
        )
        == 0
    )
    assert out.read_text() == "a\n"
