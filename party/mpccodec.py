"""The wire form of secure-array shares in the MPC worker (m-privacy, :mod:`fedanon.party.mpc`).

MPyC sends the shares of a secure *array* with ``pickle`` (its numpy paths) unless told to
use its list paths (``mix32_64bit``), which are several times slower: one Python object per
share.  :func:`fedanon.party.mpcruntime.make_runtime` keeps the numpy paths and puts
:class:`ArrayCodec` where ``mpyc.runtime`` looks up ``pickle``; its only uses there on the
worker's path are these shares (one flat array of field elements per message; the pickled
``transfer`` is replaced by :meth:`~fedanon.party.mpcruntime.SafeRuntime.transfer`).

Format: ``FAa1``, the 64-bit words per element (1..8), the element count (uint32), then the
elements as little-endian 64-bit words, lowest word first (word-major).  Decoding makes
integers and nothing else: any other message is refused (nothing from a peer is
unpickled).  This module does not import MPyC (importing its runtime parses ``sys.argv``).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from fedanon.errors import ProtocolError

WORDS_MAX = 8  # field elements below 2**512: far above any modulus the check uses
HEADER = struct.Struct("<4sBI")  # magic, 64-bit words per element, elements
MAGIC = b"FAa1"
_MASK = (1 << 64) - 1


class ArrayCodec:
    """``dumps`` / ``loads`` of flat arrays of non-negative integers (field elements)."""

    @staticmethod
    def dumps(values: Any) -> bytes:
        a = np.asarray(values, dtype=object).reshape(-1)
        if a.size and min(a) < 0:
            raise ProtocolError("a share message with a negative field element")
        top = int(max(a)) if a.size else 0
        words = max(1, (top.bit_length() + 63) // 64)
        if words > WORDS_MAX or a.size >= 1 << 32:
            raise ProtocolError("a share message too large for its wire form")
        out = np.empty((words, a.size), dtype="<u8")
        for i in range(words):
            out[i] = (a >> (64 * i)) & _MASK
        return HEADER.pack(MAGIC, words, a.size) + out.tobytes()

    @staticmethod
    def loads(data: bytes | bytearray | memoryview) -> Any:
        data = bytes(data)
        if len(data) < HEADER.size:
            raise ProtocolError("a truncated share message from an MPC peer")
        magic, words, count = HEADER.unpack_from(data)
        if magic != MAGIC or not 1 <= words <= WORDS_MAX:
            raise ProtocolError("an MPC peer sent something else than shares")
        if len(data) != HEADER.size + 8 * words * count:
            raise ProtocolError("a share message of the wrong length from an MPC peer")
        raw = np.frombuffer(data, dtype="<u8", offset=HEADER.size).reshape(words, count)
        acc = raw[words - 1].astype(object)
        for i in range(words - 2, -1, -1):
            acc = (acc << 64) | raw[i].astype(object)
        return acc
