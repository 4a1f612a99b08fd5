"""The table a daemon encoded last, kept for the next run of the same spec.

Reading and encoding a hospital's table is most of what Prepare costs (0.1 s for 15k rows,
tens of seconds for millions), and a daemon serves run after run of the same spec over the
same file.  So the daemon keeps the last encoded table, keyed by the run hash (spec and
taxonomies: what the encoding depends on) and by the file's identity (path, size,
modification time, inode and the inode's change time, which every write sets and which no
tool puts back as ``touch -r`` or ``rsync --inplace --times`` put back the mtime): a changed
file is read again; a database source is never kept (nothing says whether its rows
changed).  A daemon with a pinned spec loads its table as it starts
(:meth:`TableCache.preload`), so its first Prepare does not read either.

The cached arrays are made read-only: a run that wrote into its table would fail loudly
instead of corrupting the next run's statistics.  ``[party] keep_table = false`` turns the
cache off (the table is then freed with its run).
"""

from __future__ import annotations

import logging
import stat as stat_mode
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedanon.io.sources import DataSource, RowsRead
from fedanon.io.table import EncodedTable, Schema, encode_table

log = logging.getLogger(__name__)
Stamp = tuple[str, int, int, int, int]  # resolved path, size, mtime_ns, inode, ctime_ns


def stamp(source: DataSource) -> Stamp | None:
    """The identity of a file source now; None for a database (never cached) or no file."""
    if not isinstance(source, Path):
        return None
    try:
        st = source.stat()
    except OSError:
        return None
    if not stat_mode.S_ISREG(st.st_mode):  # a pipe or device: read once, nothing to compare
        return None
    return (str(source.resolve()), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def freeze(table: EncodedTable) -> EncodedTable:
    """Make the table's code arrays read-only (shared between runs)."""
    arrays = [table.qid_leaves, table.cls, table.sens, *table.kept_codes.values()]
    arrays += [c.codes for c in table.kept.values()]
    for arr in arrays:
        if isinstance(arr, np.ndarray):
            arr.flags.writeable = False
    return table


@dataclass(frozen=True)
class _Entry:
    key: bytes
    stamp: Stamp
    table: Future[EncodedTable]


class TableCache:
    """One entry: the last table encoded from ``source`` (thread-safe)."""

    def __init__(
        self, source: DataSource, enabled: bool = True, memory_budget: str | None = None
    ) -> None:
        self.source = source
        self.enabled = enabled
        self.memory_budget = memory_budget  # [party] memory_budget
        self._lock = threading.Lock()
        self._entry: _Entry | None = None
        self.hits = 0

    def get(self, key: bytes, schema: Schema, progress: RowsRead | None = None) -> EncodedTable:
        """The table for run hash ``key``: kept (or being loaded), else read now."""
        now = stamp(self.source) if self.enabled else None
        if now is None:
            return encode_table(schema, self.source, progress, self.memory_budget, federated=True)
        with self._lock:
            entry = self._entry
            mine = entry is None or entry.key != key or entry.stamp != now
            if mine:
                entry = self._entry = _Entry(key, now, Future())
            else:
                self.hits += 1
        assert entry is not None
        # the future holds a failed load's exception, whose traceback holds this frame: no
        # local keeps the future when that exception leaves (a reference cycle would keep the
        # half-read table, and Arrow's reader, until the garbage collector runs)
        if not mine:
            waited = entry.table
            del entry
            try:
                return waited.result()  # a load in progress raises its own error here
            finally:
                del waited
        try:
            table = freeze(
                encode_table(schema, self.source, progress, self.memory_budget, federated=True)
            )
        except BaseException as exc:
            entry.table.set_exception(exc)
            self._forget(entry)
            del entry
            raise
        entry.table.set_result(table)
        if stamp(self.source) != now:  # the file changed while it was read: keep nothing
            self._forget(entry)
        return table

    def _forget(self, entry: _Entry) -> None:
        with self._lock:
            if self._entry is entry:
                self._entry = None

    def preload(
        self,
        key: bytes,
        schema: Schema,
        done: Callable[[EncodedTable | None], None] | None = None,
    ) -> bool:
        """Load in the background (a failure is logged; the next Prepare reports it);
        ``done`` is then called with the table (None: the load failed).  False if nothing is
        loaded ahead (a database, no cache): ``done`` is not called."""

        def load() -> None:
            table: EncodedTable | None = None
            try:
                table = self.get(key, schema)
                log.info("table loaded ahead of the first run: %d records", table.n_rows)
            except Exception as exc:
                log.warning(
                    "loading the table ahead of the first run failed: %s", type(exc).__name__
                )
            if done is not None:
                done(table)

        if not (self.enabled and stamp(self.source) is not None):
            return False
        threading.Thread(target=load, name="table-preload", daemon=True).start()
        return True
