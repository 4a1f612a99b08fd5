"""The worker threads of the hot numpy paths (numpy releases the GIL in its loops, so on a
multi-core machine independent passes over the rows run side by side)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

PARALLEL_ROWS = 1 << 20  # below this many rows the threads' overhead outweighs the gain
_POOL: ThreadPoolExecutor | None = None


def workers() -> int:
    return min(4, os.cpu_count() or 1)


def pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="fedanon-np")
    return _POOL
