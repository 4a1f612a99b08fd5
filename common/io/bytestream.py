"""A CSV input's bytes, read exactly once: gunzipped when the magic bytes say gzip, without a
UTF-8 byte order mark, every byte also fed to a :class:`fedanon.io.lines.LineMap` so that
records know the physical line they start on."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import Any

from fedanon.errors import DataError
from fedanon.io.lines import LineMap

BLOCK_BYTES = 4 << 20  # Arrow's read unit: one batch of records per block
GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"

__all__ = ["BLOCK_BYTES", "GZIP_MAGIC", "UTF8_BOM", "InputStream", "Prepend"]


class InputStream(io.RawIOBase):
    """The input's bytes, read once: gunzipped if gzip, without a byte order mark.  Every byte
    handed out also goes through a :class:`LineMap`."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.src = str(path)
        self.lines = LineMap()
        self.failure: DataError | None = None
        try:
            self._fh: Any = path.open("rb")
        except OSError as exc:
            raise DataError(f"cannot read input: {exc.strerror}", file=self.src) from exc
        head = self._fh.read(2)
        self._pending = b""
        if head == GZIP_MAGIC:
            self._fh = gzip.GzipFile(fileobj=Prepend(head, self._fh), mode="rb")
        elif path.name.lower().endswith(".gz"):
            self._fh.close()
            raise DataError(
                "the file is named .gz but is not gzip-compressed",
                file=self.src,
                expected="a gzip file, or a plain CSV without the .gz suffix",
            )
        else:
            self._pending = head
        first = self._pending + self._read_raw(4096)
        self._pending = first[len(UTF8_BOM) :] if first.startswith(UTF8_BOM) else first
        self.delivered = 0

    def _read_raw(self, n: int) -> bytes:
        try:
            return bytes(self._fh.read(n))
        except EOFError as exc:
            self.failure = DataError(
                "the gzip file is truncated (it ends inside the compressed stream)",
                file=self.src,
                expected="a complete .gz file (copy or download it again)",
            )
            raise self.failure from exc
        except (OSError, zlib.error) as exc:
            self.failure = DataError(
                f"corrupt gzip data ({exc})",
                file=self.src,
                expected="a valid .gz file (copy or download it again)",
            )
            raise self.failure from exc

    def prefix(self, n: int) -> bytes:
        """The first ``n`` bytes (fewer at end of input), still to be handed out by read()."""
        parts = [self._pending]
        have = len(self._pending)
        while have < n:
            chunk = self._read_raw(min(n - have, BLOCK_BYTES))
            if not chunk:
                break
            parts.append(chunk)
            have += len(chunk)
        self._pending = b"".join(parts)
        return self._pending[:n]

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        """Exactly ``n`` bytes unless the input ends (Arrow takes a short block for the end
        of a record that straddles blocks)."""
        if n is None or n < 0:
            out = self._pending + self._read_raw(-1)
            self._pending = b""
        else:
            if len(self._pending) < n:
                self.prefix(n)
            out, self._pending = self._pending[:n], self._pending[n:]
        if out:
            self.lines.feed(out)
        else:
            self.lines.finish()  # end of input: a last line without a newline is a record
        self.delivered += len(out)
        return out

    def readinto(self, buf: Any) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._fh.close()
        super().close()


class Prepend(io.RawIOBase):
    """A file object whose first bytes were already read (the gzip magic)."""

    def __init__(self, head: bytes, fh: Any) -> None:
        super().__init__()
        self._head, self._fh = head, fh

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        if self._head:
            n = min(len(buf), len(self._head))
            buf[:n], self._head = self._head[:n], self._head[n:]
            return n
        data = self._fh.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._fh.close()
        super().close()
