"""What the leader sends every party for one attempt of the sketch union: layout and key.

The leader draws a fresh key for every attempt and sends the parameters to each party
directly (an authenticated Instruction, never along the ring), so no predecessor can choose
the layout or the key another party sketches with.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from fedanon.union.keyed import KEY_BYTES
from fedanon.union.layout import Layout

__all__ = ["SketchParams"]


@dataclass(frozen=True)
class SketchParams:
    """Layout and key of the union sketch summed in one round."""

    layout: Layout
    key: bytes

    def __post_init__(self) -> None:
        if len(self.key) != KEY_BYTES:
            raise ValueError(f"a sketch key has {KEY_BYTES} bytes, not {len(self.key)}")
        if not self.layout.tables:
            raise ValueError("a sketch layout needs at least one table")

    @property
    def digest(self) -> bytes:
        """Names layout *and* key in the sum's header: every party checks it against the
        parameters it got from the leader, so the vector it adds to was built by parties
        that all used the same key.  (A leader that gave each party its own key could
        otherwise peel the sum once per key and tell whose records are whose.)"""
        h = hashlib.sha256(b"fedanon-sketch-params-v1\0")
        h.update(self.layout.digest)
        h.update(self.key)
        return h.digest()
