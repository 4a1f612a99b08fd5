"""Out-of-core storage of a party's per-row codes: when the table does not fit in memory.

In memory a run needs about :data:`BYTES_PER_ROW` bytes per record at its peak (the codes,
the TIPS row order, and the temporaries of a statistics pass over every row).  When the
table's rows times that exceed the memory budget, the per-row integer codes (leaf code per
QID, class, sensitive, the TIPS row order and the released node codes) live in
memory-mapped files instead, and every pass over rows works on chunks of
:attr:`Spill.chunk_rows` rows, so temporaries stay bounded whatever the table's size.  The
release is byte-identical: counts are exact integer sums, whatever order they are added in.

The files hold integer codes only, never a record's values, but codes are the table
(with the taxonomies they decode), so they are treated as sensitive: each is an unnamed file
(``O_TMPFILE``, mode 0600) in the temporary directory, which no other process can open by
name and whose blocks the kernel frees when the last mapping goes -- at the end of a run,
on an exception, and also when the process is killed.

The budget: ``memory_budget`` (bytes, or "4GB", "512MB"; "auto": half the memory available
when the table is read; "off": never spill).  Environment variable FEDANON_MEMORY_BUDGET
sets it for a process (the CLI and a party daemon); chunk rows: FEDANON_CHUNK_ROWS.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from fedanon.errors import OutputError, SpecError

BYTES_PER_ROW = 80  # measured in-memory peak per row (30M-row Adult blow-up: 2.41 GB)
CHUNK_ROWS = 1 << 21  # rows per chunk of a pass when spilled (temporaries: ~0.5 GB at most)
AUTO_SHARE = 0.5  # "auto": this share of MemAvailable when the table is read

_UNITS = {"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
_lock = threading.Lock()
_disk = [0, 0]  # bytes mapped now, peak (all spills of this process)


def parse_budget(text: str) -> int | None:
    """A memory budget in bytes ("4GB", "512 MB", "1073741824"); "auto" -> -1; "off" -> None."""
    t = text.strip().upper()
    if t == "AUTO":
        return -1
    if t in ("OFF", "NONE"):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?B?)", t)
    if m is None or not float(m.group(1)) > 0:
        raise SpecError(
            "memory budget: not a size", value=text, expected='e.g. "4GB", "512MB", "auto", "off"'
        )
    unit = m.group(2) if m.group(2).endswith("B") or not m.group(2) else m.group(2) + "B"
    return int(float(m.group(1)) * _UNITS[unit])


def available_bytes() -> int:
    """MemAvailable of /proc/meminfo (physical pages otherwise)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


@dataclass(frozen=True)
class Spill:
    """Where spilled arrays go and how many rows a pass handles at a time."""

    chunk_rows: int = CHUNK_ROWS
    directory: str | None = None  # None: the system's temporary directory

    def __post_init__(self) -> None:
        if self.chunk_rows < 1:
            raise ValueError("chunk_rows must be positive")

    def array(self, shape: tuple[int, ...], dtype: Any) -> npt.NDArray[Any]:
        """A zero-filled array backed by an unnamed temporary file."""
        try:
            with tempfile.TemporaryFile(dir=self.directory) as fh:
                return _mapped(fh, shape, dtype, "w+")
        except OSError as exc:
            raise self.refused(exc) from None

    def refused(self, exc: OSError) -> OutputError:
        """The spill directory cannot take the codes (missing, read-only, full): a
        configuration the user fixes (exit 2), not a bug."""
        where = self.directory or tempfile.gettempdir()
        return OutputError(
            f"cannot write the out-of-core spill file ({exc.strerror or type(exc).__name__})",
            file=where,
            expected="a writable directory with room for the spilled codes (TMPDIR or "
            "FEDANON_SPILL_DIR), or a larger memory budget",
        )

    def appender(self, dtype: Any) -> Appender:
        return Appender(self, dtype)


class Appender:
    """One code column written batch by batch to an unnamed file, then mapped."""

    def __init__(self, spill: Spill, dtype: Any) -> None:
        self.spill = spill
        try:
            self._fh = tempfile.TemporaryFile(dir=spill.directory)  # noqa: SIM115 -- until finish
        except OSError as exc:
            raise spill.refused(exc) from None
        self.dtype = np.dtype(dtype)
        self.n = 0

    def add(self, arr: npt.NDArray[Any]) -> None:
        try:
            self._fh.write(np.ascontiguousarray(arr, dtype=self.dtype).tobytes())
        except OSError as exc:  # e.g. the disk is full
            self._fh.close()
            raise self.spill.refused(exc) from None
        self.n += int(arr.shape[0])

    def finish(self) -> npt.NDArray[Any]:
        try:
            self._fh.flush()
        except OSError as exc:
            self._fh.close()
            raise self.spill.refused(exc) from None
        if self.n == 0:
            self._fh.close()
            return np.zeros(0, dtype=self.dtype)
        return _mapped(self._fh, (self.n,), self.dtype, "r+")


def _mapped(
    fh: Any, shape: tuple[int, ...], dtype: Any, mode: Literal["r+", "w+"]
) -> npt.NDArray[Any]:
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if size == 0:
        fh.close()
        return np.zeros(shape, dtype=dtype)
    arr: npt.NDArray[Any] = np.memmap(fh, dtype=np.dtype(dtype), mode=mode, shape=shape)
    fh.close()  # the mapping keeps the unnamed file alive; its blocks go with the mapping
    _account(size)  # until the base mapping goes with the last view of it
    weakref.finalize(getattr(arr, "_mmap"), _account, -size)  # noqa: B009
    return arr


def _account(delta: int) -> None:
    with _lock:
        _disk[0] += delta
        _disk[1] = max(_disk[1], _disk[0])


def disk_bytes() -> tuple[int, int]:
    """(bytes of spilled arrays mapped now, peak) in this process."""
    with _lock:
        return _disk[0], _disk[1]


def budget_from_env() -> int | None:
    """FEDANON_MEMORY_BUDGET, "auto" when unset (-1: auto; None: never spill)."""
    return parse_budget(os.environ.get("FEDANON_MEMORY_BUDGET", "auto"))


def choose(n_rows: int, budget: int | None) -> Spill | None:
    """The spill to use for a table of ``n_rows`` rows under ``budget`` (-1: auto), or None
    when it fits in memory."""
    if budget is None:
        return None
    limit = int(available_bytes() * AUTO_SHARE) if budget < 0 else budget
    if n_rows * BYTES_PER_ROW <= limit:
        return None
    chunk = int(os.environ.get("FEDANON_CHUNK_ROWS", CHUNK_ROWS))
    return Spill(chunk_rows=chunk, directory=os.environ.get("FEDANON_SPILL_DIR") or None)


class Sink:
    """One per-row code column being read: batches in memory, or in an unnamed file once
    the table is known to be spilled (:meth:`to_disk`)."""

    def __init__(self, dtype: Any) -> None:
        self.dtype = np.dtype(dtype)
        self._parts: list[npt.NDArray[Any]] = []
        self._file: Appender | None = None

    def add(self, arr: npt.NDArray[Any]) -> None:
        if self._file is not None:
            self._file.add(arr)
        else:
            self._parts.append(arr)

    def to_disk(self, spill: Spill) -> None:
        self._file = spill.appender(self.dtype)
        for part in self._parts:
            self._file.add(part)
        self._parts.clear()

    def finish_into(self, out: npt.NDArray[Any], chunk_rows: int) -> None:
        """Write the column into ``out`` (a row of the QID matrix) and free it."""
        if self._file is None:
            if self._parts:
                np.concatenate(self._parts, out=out)
            self._parts.clear()
            return
        col = self._file.finish()
        for lo in range(0, col.shape[0], chunk_rows):
            out[lo : lo + chunk_rows] = col[lo : lo + chunk_rows]

    def finish(self) -> npt.NDArray[Any]:
        if self._file is not None:
            return self._file.finish()
        out = np.concatenate(self._parts) if self._parts else np.zeros(0, dtype=self.dtype)
        self._parts.clear()
        return out


def converted(
    spill: Spill | None, arr: npt.NDArray[Any], dtype: Any, lut: npt.NDArray[Any] | None = None
) -> npt.NDArray[Any]:
    """``arr`` (or ``lut[arr]``) as ``dtype``: in memory, or chunk by chunk into a spilled
    array."""
    if spill is None:
        return lut[arr] if lut is not None else arr.astype(dtype)
    out = spill.array(arr.shape, lut.dtype if lut is not None else dtype)
    for lo in range(0, arr.shape[0], spill.chunk_rows):
        part = arr[lo : lo + spill.chunk_rows]
        out[lo : lo + part.shape[0]] = lut[part] if lut is not None else part
    return out
