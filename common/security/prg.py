"""The pseudorandom generator of the pairwise masks: AES-256 in counter mode (`cryptography`).

The mask of one pair in sum ``t`` is the AES-CTR keystream of the pair's 32-byte seed with
the 128-bit counter block ``t`` (8 bytes, big-endian) || ``block`` (8 bytes, big-endian),
read as little-endian uint64 words.  Word ``w`` of a sum's mask is bytes ``8w .. 8w + 7``
of that keystream, so any chunk of a vector gets its mask straight from its offset (the
CTR offset), and no (seed, counter block) is ever used twice within a run: ``t`` grows by
one per sum and a vector never reaches 2^64 blocks.  Never numpy's generators, never
``random``.
"""

from __future__ import annotations

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from fedanon.arrays import U64Array

__all__ = ["SEED_BYTES", "keystream"]

SEED_BYTES = 32
_WORDS_PER_BLOCK = 2  # 16-byte AES block = two uint64 words
_MAX_SUM = (1 << 64) - 1


def keystream(seed: bytes, sum_no: int, offset: int, count: int) -> U64Array:
    """Words ``offset .. offset + count - 1`` of the mask stream of ``seed`` in sum ``sum_no``
    (a new read-only uint64 array)."""
    if len(seed) != SEED_BYTES:
        raise ValueError(f"a pair seed is {SEED_BYTES} bytes, not {len(seed)}")
    if not 0 <= sum_no <= _MAX_SUM or offset < 0 or count < 0:
        raise ValueError(f"invalid keystream position: sum {sum_no}, offset {offset}, {count}")
    block, skip = divmod(offset, _WORDS_PER_BLOCK)
    nonce = sum_no.to_bytes(8, "big") + block.to_bytes(8, "big")
    enc = Cipher(algorithms.AES(seed), modes.CTR(nonce)).encryptor()
    raw = enc.update(bytes(8 * (count + skip)))
    words = np.frombuffer(raw, dtype="<u8")[skip:]
    return words if words.dtype == np.uint64 else words.astype(np.uint64)
