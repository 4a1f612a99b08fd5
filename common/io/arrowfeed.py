"""The bytes of a CSV input as Arrow's streaming reader reads them from Python.

Arrow's reader needs two things from a Python file that it does not check itself:

* A record may straddle one block boundary, never two ("straddling object straddles two block
  boundaries"): a field longer than a block would make a valid file unreadable.  Each block
  handed over therefore ends after its last line terminator outside double quotes (RFC 4180
  quote parity, from the start of the block), and a block without one grows until one comes,
  up to :data:`MAX_RECORD_BYTES`: memory stays bounded by the longest record.  Cutting a block
  early is always safe for Arrow (it joins records across one boundary), so a stray quote in
  an unquoted field (which Arrow reads as a character) costs a larger block, never a wrong
  record.  A record beyond the limit is handed over as it is and :attr:`ArrowFeed.oversized`
  names its line, for the refusal.
* Arrow's threads hold Python objects (the file, every block, the invalid-row handler) and drop
  them whenever they finish; one dropped after the interpreter began to exit ends the process
  with ``terminate called without an active exception`` (SIGABRT, exit 134).
  :meth:`ArrowFeed.release` waits until Arrow has let go of every one of them.  Whoever reads
  through a feed releases it as soon as the reading stops, whatever stopped it (the reader's
  own error, or its consumer's: :func:`fedanon.io.csvarrow.large_batches` closes its generator
  when its batches are closed); once the interpreter is exiting, Arrow's threads can no longer
  take the GIL to drop anything, so a release left until then does not wait (it would wait in
  vain, and delay a daemon's exit past its bound).
"""

from __future__ import annotations

import io
import logging
import sys
import time
import weakref
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

MAX_RECORD_BYTES = 64 << 20  # the longest record (header excluded) a CSV input may hold
RELEASE_TIMEOUT_S = 10.0
NL, CR, QUOTE = 10, 13, 34


class ArrowFeed:
    """Hands ``stream``'s bytes to Arrow (``feed.file``) in blocks that end at a record
    boundary; remembers everything handed over so that :meth:`release` can wait for it."""

    def __init__(self, stream: Any, max_record: int | None = None) -> None:
        self._stream = stream
        self.limit = MAX_RECORD_BYTES if max_record is None else max_record
        self._pending = b""
        self._eof = False
        self._line = 1  # physical line (counting line feeds) on which the next block starts
        self.oversized: int | None = None  # line of a record longer than max_record
        self._held: dict[int, weakref.ref[Any]] = {}  # what Arrow may still hold, by id
        self.file = _File(self)
        self._watch(self.file)

    # what Arrow holds ---------------------------------------------------------------------------
    def _watch(self, obj: Any) -> None:
        held = self._held

        def gone(ref: weakref.ref[Any]) -> None:
            held.pop(id(ref), None)  # runs in whichever thread drops the object (GIL held)

        ref = weakref.ref(obj, gone)
        held[id(ref)] = ref

    def watch(self, obj: Any) -> None:
        """Also wait for ``obj`` (e.g. the invalid-row handler given to Arrow)."""
        self._watch(obj)

    def release(self, timeout: float = RELEASE_TIMEOUT_S) -> bool:
        """Wait (without the GIL) until Arrow holds none of our objects; the caller dropped
        its reader first.  False if ``timeout`` passed (logged)."""
        self.file = None  # type: ignore[assignment]
        if self._held and sys.is_finalizing():  # Arrow's threads cannot run any more
            log.warning("Arrow's reader still holds %d input blocks at exit", len(self._held))
            return False
        end = time.monotonic() + timeout
        while self._held:
            if time.monotonic() > end:
                log.warning("Arrow's reader still holds %d input blocks", len(self._held))
                return False
            time.sleep(0.001)
        return True

    # reading ------------------------------------------------------------------------------------
    def read(self, n: int | None = -1) -> Any:
        if n is None or n < 0:
            n = 1 << 22
        data = self._fill(self._pending, n)
        self._pending = b""
        cut, odd = _cut(data, 0, False)
        while cut < 0 and not self._eof and len(data) < self.limit:  # the record goes on
            start = len(data)
            data = self._fill(data, start + n)
            cut, odd = _cut(data, start, odd)
        if self._eof:  # the rest (Arrow reads a quote left open as running to the end)
            cut = len(data)
        elif cut < 0:  # longer than the limit: Arrow decides, the refusal names its line
            if self.oversized is None:
                self.oversized = self._line
            cut = len(data)
        self._pending = data[cut:]
        return self._hand(data, cut)

    def _fill(self, data: bytes, n: int) -> bytes:
        parts = [data]
        have = len(data)
        while have < n and not self._eof:
            chunk = self._stream.read(n - have)
            if not chunk:
                self._eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        return b"".join(parts) if len(parts) > 1 else data

    def _hand(self, data: bytes, cut: int) -> Any:
        view = memoryview(data)[:cut]
        self._line += data.count(b"\n", 0, cut)
        self._watch(view)
        return view


class _File(io.RawIOBase):
    """The file object Arrow reads (only ``read``): a separate object, so that Arrow's release
    of it can be watched.  ``read`` is the feed's bound method (an instance attribute): a
    traceback through a read (a corrupt gzip) keeps the feed's frame, never this object."""

    def __init__(self, feed: ArrowFeed) -> None:
        super().__init__()
        self.read = feed.read  # type: ignore[method-assign]

    def readable(self) -> bool:
        return True


def _cut(data: bytes, start: int, odd: bool) -> tuple[int, bool]:
    """The position after the last line terminator of ``data[start:]`` outside quotes (-1 if
    none) and whether the quotes of ``data[:start]`` (``odd`` before) and of the new bytes leave
    a quoted field open.  A terminator is a line feed, or a carriage return not followed by
    one (not the last byte: its line feed may come next)."""
    if not odd and data.find(b'"', start) < 0:
        lf = data.rfind(b"\n", start)
        cr = data.rfind(b"\r", max(start, lf + 1), len(data) - 1)
        last = max(lf, cr)
        return (last + 1 if last >= 0 else -1), False
    buf = np.frombuffer(data, dtype=np.uint8)[start:]
    quotes = np.flatnonzero(buf == QUOTE)
    terms = np.flatnonzero(buf == NL)
    crs = np.flatnonzero(buf[:-1] == CR)
    if crs.size:
        crs = crs[buf[crs + 1] != NL]
        terms = np.union1d(terms, crs)
    after = bool((quotes.size + int(odd)) % 2)
    if terms.size == 0:
        return -1, after
    before = np.searchsorted(quotes, terms) + int(odd)
    outside = terms[(before & 1) == 0]
    return (start + int(outside[-1]) + 1 if outside.size else -1), after
