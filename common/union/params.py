"""What the leader sends every party for one attempt of the sketch union: layout and key.

The leader draws a fresh key for every attempt and sends the parameters to each party
directly (an authenticated Instruction, never along the ring), so no predecessor can choose
the layout or the key another party sketches with.  A large union is summed in parts
(:class:`Split`, :mod:`fedanon.union.parts`): each part's parameters name the split too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from fedanon.union.keyed import KEY_BYTES
from fedanon.union.layout import Layout

__all__ = ["MAX_PARTS", "SketchParams", "Split"]

MAX_PARTS = 64
"""Parts a union sketch is split into at most."""


@dataclass(frozen=True)
class Split:
    """The union summed in ``parts`` sketches: this one holds the distinct records whose
    keyed hash under ``key`` (the first attempt's sketch key) falls in part ``part``."""

    key: bytes
    part: int
    parts: int

    def __post_init__(self) -> None:
        if len(self.key) != KEY_BYTES:
            raise ValueError(f"a split key has {KEY_BYTES} bytes, not {len(self.key)}")
        if not (2 <= self.parts <= MAX_PARTS and 0 <= self.part < self.parts):
            raise ValueError(f"part {self.part} of {self.parts} (2..{MAX_PARTS} parts)")


@dataclass(frozen=True)
class SketchParams:
    """Layout and key of the union sketch summed in one round (``split``: of one part)."""

    layout: Layout
    key: bytes
    split: Split | None = None

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
        if self.split is not None:  # every party sketches the same part of the same split
            h.update(b"\0split")
            h.update(self.split.key)
            h.update(f"{self.split.part}/{self.split.parts}".encode())
        return h.digest()
