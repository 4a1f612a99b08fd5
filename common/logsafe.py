"""Make a string that came from a peer safe to put into a log line or an error message.

A peer (the leader, a ring neighbour) chooses the text of an Abort reason, the names in a
spec, an error it reports.  Written to a log as is, a newline in it would forge a second log
line and a terminal escape would rewrite the operator's screen.  :func:`safe` turns every
control or format character (newlines, escapes, bidirectional overrides, line separators)
into a visible ``\\xNN`` / ``\\uNNNN`` escape and bounds the length.
"""

from __future__ import annotations

import unicodedata

MAX_CHARS = 300


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _unsafe(ch: str) -> bool:
    # Cc control, Cf format (bidi overrides), Cs/Co/Cn; Zl/Zp line and paragraph separators
    return unicodedata.category(ch)[0] == "C" or unicodedata.category(ch) in ("Zl", "Zp")


def safe(text: object, limit: int = MAX_CHARS) -> str:
    """One printable line of at most ``limit`` characters (plus a note of what was cut)."""
    s = str(text)
    cut = len(s) - limit
    head = s[: max(limit, 0)]
    out = "".join(_escape(ch) if _unsafe(ch) else ch for ch in head)
    if cut > 0:
        out += f"...[{cut} more characters]"
    return out
