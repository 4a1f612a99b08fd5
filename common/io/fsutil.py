"""All-or-nothing file writes: a temp file in the same folder, fsync, then rename; and the
checks every command makes on its output paths before it starts working."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from fedanon.errors import InputError, OutputError
from fedanon.logsafe import safe
from fedanon.process import raise_if_signalled

Writer = Callable[[IO[Any]], object]


@dataclass(frozen=True)
class Pending:
    """One file to publish: where, and how to write its content."""

    path: Path
    write: Writer
    binary: bool = False
    mode: int | None = None


def atomic_write(
    path: Path, write: Writer, *, binary: bool = False, mode: int | None = None
) -> None:
    """Call ``write`` on a temp file next to ``path`` and rename it into place; a failure
    leaves no file behind.  ``mode`` sets permissions independently of the umask."""
    atomic_write_all([Pending(path, write, binary, mode)])


def atomic_write_all(files: Sequence[Pending]) -> None:
    """Write every file to a temporary next to it first, then rename them all into place:
    if any write fails, none of the files is published (a rename failing after others
    removes those: both or neither).  A failure of the file system (file too large, disk
    full, read-only or denied location) is an :class:`OutputError` (exit 2) naming the file."""
    temps: list[tuple[str, Path]] = []
    published: list[Path] = []
    current = files[0].path if files else Path()
    try:
        for f in files:
            current = f.path
            temps.append((_write_temp(f), f.path))
        raise_if_signalled()  # Ctrl-C or SIGTERM came (its exception may have been lost)
        for tmp, path in temps:
            current = path
            if _HELD is not None and _HELD.covers(path):
                _HELD.keep(path, tmp)  # published later with the files written from them
            else:
                refuse_special("the output", path, OutputError)
                os.replace(tmp, path)
                published.append(path)
    except BaseException as exc:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        for path in published:
            path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise output_error(current, exc) from exc
        raise


def output_error(path: Path, exc: OSError) -> OutputError:
    """A write that the file system refused, as the exit-2 error naming the file."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return OutputError(
        f"cannot write the output: {reason}; nothing was published",
        file=str(path),
        expected="a writable location with enough space (and a file size limit that allows it)",
    )


class Held:
    """Outputs of a run kept as their temporaries (see :func:`hold`) until :meth:`publish`."""

    def __init__(self, paths: Iterable[Path]) -> None:
        self._paths = {os.path.abspath(p): Path(p) for p in paths}
        self._temps: dict[str, str] = {}

    def covers(self, path: Path) -> bool:
        return os.path.abspath(path) in self._paths

    def keep(self, path: Path, tmp: str) -> None:
        key = os.path.abspath(path)
        earlier = self._temps.get(key)
        if earlier is not None:  # written twice (a report with its timings): the last one
            Path(earlier).unlink(missing_ok=True)
        self._temps[key] = tmp

    def temp_of(self, path: Path) -> Path | None:
        """Where the run's content for ``path`` waits (None: the run wrote nothing there)."""
        tmp = self._temps.get(os.path.abspath(path))
        return None if tmp is None else Path(tmp)

    def publish(self, extra: Sequence[Pending] = ()) -> None:
        """Write ``extra`` to temporaries, then rename every held file and them into place."""
        global _HELD
        _HELD = None
        path = Path()
        published: list[Path] = []
        try:
            for f in extra:  # every temporary written before any rename
                path = f.path
                self.keep(f.path, _write_temp(f))
                self._paths.setdefault(os.path.abspath(f.path), f.path)
            raise_if_signalled()  # Ctrl-C or SIGTERM came (its exception may have been lost)
            for key, tmp in list(self._temps.items()):
                path = self._paths[key]
                refuse_special("the output", path, OutputError)
                os.replace(tmp, path)
                published.append(path)
                del self._temps[key]
        except OSError as exc:
            for done in published:  # both or neither
                done.unlink(missing_ok=True)
            self.discard()
            raise output_error(path, exc) from exc

    def discard(self) -> None:
        for tmp in self._temps.values():
            Path(tmp).unlink(missing_ok=True)
        self._temps.clear()


_HELD: Held | None = None


@contextmanager
def hold(paths: Iterable[Path]) -> Iterator[Held]:
    """Inside the block, what :func:`atomic_write_all` writes to one of ``paths`` stays in
    its temporary next to the path; :meth:`Held.publish` renames them (with files derived
    from them, e.g. an HTML report of the release) into place.  Leaving the block without
    publishing, or by an exception, deletes them: nothing is published."""
    global _HELD
    if _HELD is not None:
        raise RuntimeError("outputs are already held")
    held = Held(paths)
    _HELD = held
    try:
        yield held
    finally:
        _HELD = None
        held.discard()


def _write_temp(f: Pending) -> str:
    # never over a device, FIFO, socket or symlink; a missing folder is not created
    refuse_special("the output", f.path, OutputError)
    fd, tmp = tempfile.mkstemp(prefix=f".{f.path.name}.", suffix=".tmp", dir=f.path.parent)
    try:
        if f.mode is not None:
            os.fchmod(fd, f.mode)
        kwargs: dict[str, Any] = {} if f.binary else {"newline": "", "encoding": "utf-8"}
        with os.fdopen(fd, "wb" if f.binary else "w", **kwargs) as fh:
            f.write(fh)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (links, ``..`` and symlinks resolved)."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def check_outputs(outputs: Mapping[str, Path | None], inputs: Iterable[Path]) -> None:
    """Before any work: every output (by its flag or key, e.g. ``--output``) is a file we may
    create in an existing, writable folder, no two outputs coincide, and no output is a file
    the run reads.  Raises :class:`InputError` (exit 2) naming the flag."""
    reads = list(inputs)
    given = [(flag, p) for flag, p in outputs.items() if p is not None]
    for i, (flag, path) in enumerate(given):
        for src in reads:
            if same_file(path, src):
                raise InputError(
                    f"refusing to overwrite {safe(src, PATH_CHARS)}: "
                    f"{flag} names a file this run reads",
                    file=str(path),
                    expected="a new output path",
                )
        for other_flag, other in given[:i]:
            if same_file(path, other):
                raise InputError(
                    f"{flag} and {other_flag} are the same file",
                    file=str(path),
                    expected=f"different paths for {other_flag} and {flag}",
                )
        _check_writable(flag, path)
        if flag in TABLE_FLAGS:
            check_table_name(flag, path)


TABLE_FLAGS = frozenset({"--output", "output", "[run] output"})  # released tables
# suffixes naming a format fedanon does not write: a table is CSV, gzip CSV or Parquet
OTHER_FORMATS = frozenset(
    [
        ".tsv",
        ".tab",
        ".xlsx",
        ".xls",
        ".ods",
        ".json",
        ".jsonl",
        ".ndjson",
        ".xml",
        ".html",
        ".bz2",
        ".xz",
        ".zst",
        ".lz4",
        ".zip",
        ".7z",
        ".tar",
        ".tgz",
        ".parq",
        ".feather",
        ".arrow",
        ".ipc",
        ".orc",
        ".avro",
    ]
)


def check_table_name(flag: str, path: Path) -> None:
    """A released table's name says its format (CSV, .gz CSV or Parquet): a suffix of
    another format (``.tsv``, ``.xlsx``, ``.csv.bz2``, ...) is refused (exit 2) rather
    than written as comma-separated text under that name."""
    suffixes = [x.lower() for x in path.suffixes]
    if suffixes[-1:] == [".gz"]:
        suffixes = suffixes[:-1]
    if suffixes and suffixes[-1] in OTHER_FORMATS:
        raise InputError(
            f"{flag}: the suffix {safe(suffixes[-1])} names a format fedanon does not write",
            file=str(path),
            expected="a name ending in .csv, .csv.gz or .gz (CSV), .parquet or .pq (Parquet), "
            "or no suffix (CSV)",
        )


def _check_writable(flag: str, path: Path) -> None:
    if str(path) == "-":  # it wrote a file named '-' in the working folder
        raise InputError(
            f"{flag} - (standard output) is not supported: outputs are written to a file "
            "and published atomically",
            file=str(path),
            expected=f"a file path, e.g. {flag} released.csv",
        )
    refuse_special(flag, path, InputError)
    parent = path.parent
    if not parent.is_dir():
        blocker = next((a for a in (parent, *parent.parents) if os.path.lexists(a)), None)
        if blocker is not None and not blocker.is_dir():
            raise InputError(
                f"{flag}: {safe(blocker, PATH_CHARS)} is not a directory",
                file=str(path),
                expected="an output path in an existing folder",
            )
        raise InputError(
            f"{flag}: the folder does not exist",
            file=str(path),
            expected=f"an existing folder (create {safe(parent, PATH_CHARS)} first)",
        )
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(f"{flag}: not writable", file=str(path), expected="a writable location")


PATH_CHARS = 1000  # a path quoted in a message: escaped, at most this long

_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def refuse_special(flag: str, path: Path, error: type[InputError] = InputError) -> None:
    """An output is a new file or an existing regular file: a directory, symbolic link
    (not followed), device, FIFO or socket at ``path`` is refused (exit 2), since the
    rename that publishes the output would replace it."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError:  # e.g. a parent that is a file: reported by the folder check
        return
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise error(f"{flag} is a directory", file=str(path), expected="a file path")
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise error(
        f"{flag} is {kind}, not a regular file; it is not replaced",
        file=str(path),
        expected="a new file or an existing regular file",
    )
