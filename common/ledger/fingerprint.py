"""The data fingerprint a ledger row names: which table a run's statistics came from.

Budgets (``max_total_epsilon``, ``max_releases``) are kept per fingerprint, so two runs over
the same table add up while a changed table starts afresh.

* A file: its size, modification time and the SHA-256 of its content.  The content hash is
  computed in a background thread while Prepare reads and encodes the table
  (:func:`start_file_fingerprint`; a file whose identity changed is hashed before the read
  when a per-table budget is set, :mod:`fedanon.party.ledgered`), and kept for the file's
  identity (path, size, mtime, inode, device and the inode's change time, which every write
  sets even when the mtime is put back: the stamp the table cache keys on, plus the device),
  so the next run of an unchanged file does not read it again.  The identity is taken
  before and after hashing; a file that changed meanwhile is hashed again.
* PostgreSQL: the source without credentials (the URL never holds a password), the query or
  table, and the row count read; a database cannot be hashed cheaply, so the fingerprint is
  the SHA-256 of those three.
"""

from __future__ import annotations

import hashlib
import json
import stat as stat_mode
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from fedanon.errors import LedgerError
from fedanon.io.sources import DataSource

CHUNK = 1 << 20
_Stamp = tuple[str, int, int, int, int, int]  # path, size, mtime_ns, inode, device, ctime_ns


@dataclass(frozen=True)
class DataFingerprint:
    """``digest`` keys the budgets; ``describe`` is what a privacy officer reads (JSON)."""

    digest: str
    describe: str


def _stamp(path: Path) -> _Stamp:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev, st.st_ctime_ns)


def _is_regular(path: Path) -> bool:
    try:
        return stat_mode.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def _hash_file(path: Path) -> tuple[_Stamp, str]:
    for _ in range(3):
        before = _stamp(path)
        h = hashlib.sha256()
        with path.open("rb") as fh:
            while block := fh.read(CHUNK):
                h.update(block)
        if _stamp(path) == before:
            return before, h.hexdigest()
    raise LedgerError(f"data file {path} keeps changing while it is fingerprinted")


def _file_fp(st: _Stamp, content: str) -> DataFingerprint:
    path, size, mtime_ns, ino, dev, ctime_ns = st
    desc = {"file": path, "size": size, "mtime_ns": mtime_ns, "sha256": content}
    # the file's identity: a restarted daemon's last known hash
    desc.update(ino=ino, dev=dev, ctime_ns=ctime_ns)
    digest = hashlib.sha256(f"file\0{content}\0{size}".encode()).hexdigest()
    return DataFingerprint(digest, json.dumps(desc, sort_keys=True))


def pg_fingerprint(url: str, query: str | None, table: str | None, rows: int) -> DataFingerprint:
    desc = {"source": url, "query": query, "table": table, "rows": rows}
    text = json.dumps(desc, sort_keys=True)
    return DataFingerprint(hashlib.sha256(text.encode()).hexdigest(), text)


class Fingerprints:
    """The fingerprint of the daemon's data source; the last file hash is kept."""

    def __init__(self, source: DataSource) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._kept: tuple[_Stamp, str] | None = None
        self._seeded: tuple[_Stamp, str] | None = None  # from the ledger: known() only
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fingerprint")

    def start(self) -> Future[DataFingerprint] | None:
        """For a file: its fingerprint, computed in the background from now (None for a
        database: its fingerprint needs the row count, :meth:`database`)."""
        if not isinstance(self.source, Path):
            return None
        return self._pool.submit(self._file, self.source)

    def _file(self, path: Path) -> DataFingerprint:
        try:
            if not _is_regular(path):  # a pipe: what was read cannot be read again
                return _file_fp(_stamp(path), "unhashable: not a regular file")
            now = _stamp(path)
            with self._lock:
                kept = self._kept
            if kept is not None and kept[0] == now:
                return _file_fp(*kept)
            st, content = _hash_file(path)
        except OSError as exc:
            raise LedgerError(f"data file {path} cannot be fingerprinted: {exc.strerror}") from None
        with self._lock:
            self._kept = (st, content)
        return _file_fp(st, content)

    def known(self) -> DataFingerprint | None:
        """The fingerprint of the file *before* it is read: the last one computed (or, after
        a restart, the last one ledgered: :meth:`seed`) while the file's identity (path,
        device, inode, size, mtime, change time) is unchanged; None when not known (or a
        database).  Only for refusing early: a reservation always waits for :meth:`start`'s
        hash."""
        if not isinstance(self.source, Path):
            return None
        try:
            now = _stamp(self.source)
        except OSError:
            return None
        with self._lock:
            for kept in (self._kept, self._seeded):
                if kept is not None and kept[0] == now:
                    return _file_fp(*kept)
        return None

    def seed(self, describe: str) -> None:
        """The ``data`` column of the last ledgered run (a file's identity and hash)."""
        try:
            d = json.loads(describe)
            st = (
                str(d["file"]),
                int(d["size"]),
                int(d["mtime_ns"]),
                int(d["ino"]),
                int(d["dev"]),
                int(d.get("ctime_ns", -1)),  # a row of an older fedanon: never matches
            )
            content = str(d["sha256"])
        except (ValueError, KeyError, TypeError):
            return  # a database, or a row of an older fedanon
        with self._lock:
            self._seeded = (st, content)

    def database(self, rows: int) -> DataFingerprint:
        src = self.source
        if isinstance(src, Path):
            raise ValueError("not a database source")
        return pg_fingerprint(src.url, src.query, src.table, rows)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
