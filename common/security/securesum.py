"""Additive masking for the ring secure sum (TKDD 2010, Sec. 5.2), arithmetic mod 2^64.

The leader draws a fresh uniform mask per sum, every party adds its statistics to the masked
vector it receives (numpy uint64 addition wraps), and the leader subtracts the mask from
what the last party delivers.  A party only ever sees a uniformly random vector.
"""

from __future__ import annotations

import secrets

import numpy as np

from fedanon.arrays import IntArray, U64Array

__all__ = ["add_share", "draw_mask", "unmask"]


def draw_mask(size: int) -> U64Array:
    """``size`` uniform 64-bit words from the OS CSPRNG (a read-only view of the bytes: the
    leader only sends and subtracts it; no copy of a vector that may be hundreds of MB)."""
    if size < 0:
        raise ValueError(f"negative mask size {size}")
    words = np.frombuffer(secrets.token_bytes(8 * size), dtype="<u8")
    return words if words.dtype == np.uint64 else words.astype(np.uint64)


def add_share(masked: U64Array, stats: IntArray, *, in_place: bool = False) -> U64Array:
    """``masked + stats`` mod 2^64 (negative statistics wrap like two's complement).

    One pass over the vectors, no temporary copies; ``in_place`` writes the sum into
    ``masked`` (a party's received vector, which nothing else uses) instead of a new array
    when ``masked`` is writable.
    """
    if masked.shape != stats.shape:
        raise ValueError(f"shape mismatch: {masked.shape} vs {stats.shape}")
    if masked.dtype != np.uint64:
        raise ValueError(f"a masked vector is uint64, not {masked.dtype}")
    words = (
        stats.view(np.uint64) if stats.dtype == np.int64 else stats.astype(np.int64).view(np.uint64)
    )
    if in_place and masked.flags.writeable:
        return np.add(masked, words, out=masked)
    return np.add(masked, words)


def unmask(total: U64Array, mask: U64Array, *, in_place: bool = False) -> IntArray:
    """Remove the mask: ``(total - mask) mod 2^64`` viewed as signed 64-bit integers.
    ``in_place``: into ``total`` (the leader's collected vector) when it is writable."""
    if total.shape != mask.shape:
        raise ValueError(f"shape mismatch: {total.shape} vs {mask.shape}")
    if in_place and total.flags.writeable:
        return np.subtract(total, mask, out=total).view(np.int64)
    diff: U64Array = np.subtract(total, mask)  # one pass, one new array
    return diff.view(np.int64)
