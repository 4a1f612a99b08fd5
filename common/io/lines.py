"""Where each record of a CSV starts, learnt from the byte stream as it is read.

Records are counted the way a CSV parser counts them: a newline inside a quoted field does not
end a record (RFC 4180: a newline is inside quotes iff an odd number of quote characters came
before it, escaped quotes ``""`` counting twice), and blank lines are skipped.  Record ``r``
(0-based, header excluded) usually starts on physical line ``r + 2``; only blank lines and
multi-line fields move later records down, so the map stores just the records where that
offset changes.  Blocks without quotes or blank lines (the common case) cost one ``count``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

NL, CR, QUOTE = 10, 13, 34


class LineMap:
    """Feed every byte of the input (BOM removed) in order; then ``line_of(record)``."""

    def __init__(self) -> None:
        self.records = 0  # complete records seen (header excluded)
        self.header_done = False
        self._line = 1  # physical line of the next byte
        self._in_quote = False
        self._cur_start = 1  # physical line where the current (unfinished) logical line began
        self._cur_len = 0  # bytes of it so far
        self._cur_first = 0  # its first byte (a line that is just "\r" is blank)
        self._bp_rec: list[int] = [0]  # records from which ...
        self._bp_off: list[int] = [0]  # ... line = record + 2 + offset
        self.exact = True  # False once a lone carriage return was seen (a line break to Arrow)
        self._cr_end = False

    # feeding ----------------------------------------------------------------------------------
    def feed(self, block: bytes) -> None:
        if not block:
            return
        if self._cr_end or b"\r" in block:
            self._check_cr(block)
        if self._fast(block):
            return
        self._slow(block)

    def finish(self) -> None:
        """End of input: an unterminated last line is a record too."""
        if self._cur_len and not (self._cur_len == 1 and self._cur_first == CR):
            self._end_lines(np.array([self._cur_start], dtype=np.int64))
        self._cur_len = 0

    def _check_cr(self, block: bytes) -> None:
        if self._cr_end and block[0] != NL:
            self.exact = False
        end = block[-1] == CR
        if block.count(b"\r") - block.count(b"\r\n") - int(end) > 0:
            self.exact = False
        self._cr_end = end

    def _fast(self, block: bytes) -> bool:
        """Blocks without quotes and blank lines: every newline ends a non-blank line."""
        if self._in_quote or b'"' in block or b"\n\n" in block or b"\n\r\n" in block:
            return False
        if self._cur_len == 0 and block[0] in (NL, CR):
            return False
        if self._cur_len == 1 and self._cur_first == CR and block[0] == NL:
            return False
        c = block.count(b"\n")
        if c == 0:
            self._grow(block)
            return True
        starts = [self._cur_start]
        if c > 1:  # lines 1..c-1 of the block start right after a newline: one offset suffices
            starts.append(self._line + 1)
        self._end_run(starts, c)
        self._line += c
        self._cur_start = self._line
        tail = len(block) - 1 - block.rindex(b"\n")
        self._cur_len = tail
        self._cur_first = block[-tail] if tail else 0
        return True

    def _slow(self, block: bytes) -> None:
        buf = np.frombuffer(block, dtype=np.uint8)
        nl = np.flatnonzero(buf == NL)
        quotes = np.flatnonzero(buf == QUOTE) if (self._in_quote or b'"' in block) else None
        if quotes is not None:
            before = np.searchsorted(quotes, nl) + int(self._in_quote)
            term_idx = np.flatnonzero((before & 1) == 0)
            in_quote_after = (quotes.size + int(self._in_quote)) % 2 == 1
        else:
            term_idx = np.arange(nl.size)
            in_quote_after = self._in_quote
        if term_idx.size == 0:
            self._grow(block)
            self._line += int(nl.size)
            self._in_quote = in_quote_after
            return
        term = nl[term_idx]
        term_line = self._line + term_idx  # physical line each terminator ends
        starts_pos = np.concatenate(([0], term[:-1] + 1))
        lengths = term - starts_pos
        lengths[0] += self._cur_len
        start_line = np.concatenate(([self._cur_start], term_line[:-1] + 1))
        first = buf[np.minimum(starts_pos, buf.size - 1)].astype(np.int64)
        if self._cur_len:
            first[0] = self._cur_first
        blank = (lengths == 0) | ((lengths == 1) & (first == CR))
        self._end_lines(start_line, blank)
        self._line += int(nl.size)
        self._in_quote = in_quote_after
        last = int(term[-1])
        self._cur_start = int(term_line[-1]) + 1
        self._cur_len = len(block) - 1 - last
        self._cur_first = block[last + 1] if self._cur_len else 0

    def _grow(self, block: bytes) -> None:
        if self._cur_len == 0:
            self._cur_first = block[0]
        self._cur_len += len(block)

    def _end_run(self, starts: list[int], count: int) -> None:
        """``count`` non-blank lines end; the first starts on ``starts[0]``, the others on
        consecutive lines from ``starts[1]``."""
        lines = np.array(starts, dtype=np.int64)
        if not self.header_done:
            self.header_done = True
            if count == 1:
                return
            # the header is line 0; records start at starts[1] on consecutive lines
            self._add(self.records, int(lines[1]) - (self.records + 2))
            self.records += count - 1
            return
        self._add(self.records, int(lines[0]) - (self.records + 2))
        if count > 1:
            self._add(self.records + 1, int(lines[1]) - (self.records + 3))
        self.records += count

    def _end_lines(
        self, start_line: npt.NDArray[np.int64], blank: npt.NDArray[np.bool_] | None = None
    ) -> None:
        """Logical lines end; non-blank ones are records (the very first one is the header)."""
        lines = start_line if blank is None else start_line[~blank]
        if lines.size and not self.header_done:
            self.header_done = True
            lines = lines[1:]
        if lines.size == 0:
            return
        rec = self.records + np.arange(lines.size, dtype=np.int64)
        off = lines - (rec + 2)
        change = np.flatnonzero(np.diff(off, prepend=self._bp_off[-1]) != 0)
        for i in change.tolist():
            self._add(int(rec[i]), int(off[i]))
        self.records += int(lines.size)

    def _add(self, record: int, offset: int) -> None:
        if offset == self._bp_off[-1]:
            return
        if record == self._bp_rec[-1]:
            self._bp_off[-1] = offset
        else:
            self._bp_rec.append(record)
            self._bp_off.append(offset)

    # queries ----------------------------------------------------------------------------------
    def line_of(self, record: int) -> int:
        """Physical line on which record ``record`` (0-based, header excluded) starts."""
        i = int(np.searchsorted(np.asarray(self._bp_rec), record, side="right")) - 1
        return record + 2 + self._bp_off[max(i, 0)]

    @property
    def regular(self) -> bool:
        """Record r starts on line r + 2 for every record (no blank or multi-line rows)."""
        return len(self._bp_rec) == 1 and self._bp_off[0] == 0
