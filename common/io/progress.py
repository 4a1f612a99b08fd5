"""Progress of a long run: one plain line every few seconds (no carriage returns), so it
reads the same on a terminal, in a file and in journald.  Lines carry counts only -- records
read, round, groups, the specialization chosen (a taxonomy value, never a record value)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

log = logging.getLogger(__name__)
INTERVAL_S = 5.0


class Progress:
    """Throttled progress lines: none for a run shorter than ``interval`` seconds."""

    def __init__(
        self,
        emit: Callable[[str], None],
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.emit, self.clock = emit, clock
        self.interval = INTERVAL_S if interval is None else interval
        self.t0 = self.last = clock()

    def due(self) -> bool:
        return self.clock() - self.last >= self.interval

    def say(self, text: str) -> None:
        now = self.clock()
        self.emit(f"{text} ({now - self.t0:.0f} s)")
        self.last = now

    def rows(self, n: int) -> None:
        """A reader's callback: ``n`` records read so far."""
        if self.due():
            self.say(f"read {n:,} records")


def to_stderr(prefix: str = "fedanon") -> Callable[[str], None]:
    def emit(text: str) -> None:
        sys.stderr.write(f"{prefix}: {text}\n")
        sys.stderr.flush()

    return emit


def to_log(logger: logging.Logger, prefix: str) -> Callable[[str], None]:
    def emit(text: str) -> None:
        logger.info("%s: %s", prefix, text)

    return emit
