"""Compile the checkout's modules to bytecode before a benchmark times any process.

An installed fedanon (pip, the wheel) has its ``.pyc`` files written at install; a checkout run
with ``PYTHONDONTWRITEBYTECODE=1`` (as on this project's machines) has none, so every process
would compile every fedanon module from source first: about 0.1 CPU-seconds and 0.3-0.5 s of
wall time per process at load 4, in the leader and in each daemon.  The benches time the
program as installed, so they compile once, here (the files stay valid until a source changes).
"""

from __future__ import annotations

import compileall
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compile_checkout() -> None:
    for folder in ("common", "party", "leader"):
        compileall.compile_dir(ROOT / folder, quiet=1, workers=1)
