"""The end of a centralized DiffGen run, relational or over diagnosis codes: the random source
it draws from (a seed is logged as NOT PRIVATE) and the publication of its table and report
(both or neither), with the read / anonymize / write timings."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from fedanon.dp.randomness import NOT_PRIVATE, RandomSource
from fedanon.io.fsutil import Pending
from fedanon.methods.publish import publish_release

log = logging.getLogger(__name__)


def run_source(seed: int | None) -> RandomSource:
    """The run's randomness: the OS's, or a fixed seed (tests only, warned)."""
    rng = RandomSource(seed)
    if not rng.private:
        log.warning("%s %d: the output is NOT differentially private", NOT_PRIVATE, seed)
    return rng


def publish_timed(
    pending: Pending,
    rows: int,
    rep: dict[str, Any],
    report_path: Path | None,
    times: tuple[float, float, float],
) -> dict[str, Any]:
    """Publish the table and the report (written after the table, so its write time is
    known); ``times``: when reading started, when it ended, when the run ended."""
    t0, t1, t2 = times
    rep["release"]["rows_written"] = rows
    rep["timings"] = {"read": t1 - t0, "anonymize": t2 - t1}

    def final() -> dict[str, Any]:
        rep["timings"]["write"] = time.perf_counter() - t2
        return rep

    publish_release(pending, report_path, final)
    rep["timings"].setdefault("write", time.perf_counter() - t2)
    return rep
