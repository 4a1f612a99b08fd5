"""All-or-nothing file writes: a temp file in the same folder, fsync, then rename."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def atomic_write(
    path: Path, write: Callable[[IO[Any]], object], *, binary: bool = False, mode: int | None = None
) -> None:
    """Call ``write`` on a temp file next to ``path`` and rename it into place; a failure
    leaves no file behind.  ``mode`` sets permissions independently of the umask."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        kwargs: dict[str, Any] = {} if binary else {"newline": "", "encoding": "utf-8"}
        with os.fdopen(fd, "wb" if binary else "w", **kwargs) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
