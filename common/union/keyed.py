"""The keyed per-record hash of the sketch: a PRF, vectorised over all records.

For every record (its uint64 lanes) we need three cell indexes, one per sub-table, and a
64-bit checksum.  All four come from one pseudo-random function: AES-128 EMAC (CBC-MAC with
a length block first, then the CBC state encrypted under two further independent keys,
giving 256 output bits).  The three AES keys are derived from the 32-byte per-run key with
keyed BLAKE2b.  ECB mode is used only as the block-cipher primitive: each AES call encrypts
one 16-byte block of every record at once (C speed, AES-NI), so hashing a million records
costs a few tens of milliseconds instead of a Python loop over ``hashlib`` calls.

Why this is sound here: the records are fixed before the leader draws the key, so their
cell indexes and checksums are indistinguishable from independent uniform values.  Nobody
can choose records that force a peeling failure without the key, and a cell that is not
pure passes the checksum test with probability about 2^-64 per test.  Correctness never
depends on the hash: a peeled record is accepted only if the checksum confirms it and the
table is exactly zero at the end; a bad hash can only cause a :class:`PeelingFailed` retry.
"""

from __future__ import annotations

import hashlib

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from fedanon.arrays import U64Array

__all__ = ["KEY_BYTES", "RecordHash"]

KEY_BYTES = 32
_PERSON = b"fedanon-iblt-v1"
_DOMAIN = 0x66656461_6E6F6E31  # "fedanon1": second word of the length block
_LOW32 = np.uint64(0xFFFFFFFF)


def _aes_key(key: bytes, label: bytes) -> bytes:
    return hashlib.blake2b(label, key=key, digest_size=16, person=_PERSON).digest()


class RecordHash:
    """``RecordHash(key)(lanes)`` -> (checksums, raw 32-bit index words) of every record."""

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            raise ValueError(f"the sketch key must be {KEY_BYTES} bytes")
        self._keys = tuple(_aes_key(key, label) for label in (b"chain", b"out-1", b"out-2"))

    def __call__(self, lanes: U64Array) -> tuple[U64Array, U64Array]:
        """``lanes`` has shape (n, W): lane ``j`` of record ``i`` is ``lanes[i, j]``.

        Returns the 64-bit checksums, shape (n,), and three 32-bit words per record (as
        uint64), shape (3, n), to be reduced to cell indexes by :func:`cell_of`."""
        checksum, index, _ = self.with_spare(lanes)
        return checksum, index

    def with_spare(self, lanes: U64Array) -> tuple[U64Array, U64Array, U64Array]:
        """As calling it, and a fourth 32-bit word per record (as uint64, shape (n,)),
        independent of the other three: the part of a split union (:mod:`fedanon.union.parts`)."""
        n, width = lanes.shape
        if n == 0:
            empty = np.zeros(0, dtype=np.uint64)
            return empty, np.zeros((3, 0), dtype=np.uint64), empty
        chain, out1, out2 = (
            Cipher(algorithms.AES(k), modes.ECB()).encryptor()  # noqa: S305 - block primitive
            for k in self._keys
        )
        bufs = (bytearray(16 * n + 15), bytearray(16 * n + 15))
        state = np.empty((n, 2), dtype="<u8")
        state[:, 0] = width
        state[:, 1] = _DOMAIN
        words = lanes.astype("<u8", copy=False)
        for step in range((width + 1) // 2 + 1):
            if step:
                state[:, 0] ^= words[:, 2 * step - 2]
                if 2 * step - 1 < width:
                    state[:, 1] ^= words[:, 2 * step - 1]
            buf = bufs[step % 2]
            chain.update_into(state.data.cast("B"), buf)
            state = np.frombuffer(buf, dtype="<u8", count=2 * n).reshape(n, 2)
        tag = state.tobytes()
        first = np.frombuffer(out1.update(tag), dtype="<u8").reshape(n, 2)
        second = np.frombuffer(out2.update(tag), dtype="<u8").reshape(n, 2)
        checksum = first[:, 0].astype(np.uint64)
        index = np.empty((3, n), dtype=np.uint64)
        index[0] = first[:, 1] & _LOW32
        index[1] = first[:, 1] >> np.uint64(32)
        index[2] = second[:, 0] & _LOW32
        return checksum, index, second[:, 1] & _LOW32


def cell_of(word: U64Array, cells: int) -> U64Array:
    """Map uniform 32-bit words to ``[0, cells)`` by multiply-shift (bias <= cells / 2^32)."""
    if not 0 < cells < (1 << 32):
        raise ValueError(f"a sub-table has {cells} cells")
    return (word * np.uint64(cells)) >> np.uint64(32)
