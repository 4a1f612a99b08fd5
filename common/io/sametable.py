"""Whether two input tables hold the same records, whatever their encoding.

``fedanon federate`` refuses two parties with the same table (the records would count twice
towards K).  Comparing bytes misses a gzip, CRLF or Parquet copy, so tables are compared by a
digest of their content: the column names (in any order) and the multiset of records (in any
order), each value compared as the text the readers give it (gzip and byte order mark removed,
quoting and line endings -- LF, CRLF, CR -- resolved, surrounding blanks stripped, a Parquet
value as its text, a missing value as an empty cell).  Two tables are "the same" exactly when
those agree; a copy with one record more, less or changed is a different table.

Vectorised: each distinct value of a column is hashed once (pandas' SipHash of an object
array), records combine their columns' hashes by column name, and the sorted record hashes
are digested (SHA-256) -- no Python loop over rows.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.io.sources import open_batches

_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: combines a record's column hashes in name order


def content_digest(path: Path) -> str:
    """SHA-256 (hex) of the table's column names and the multiset of its records."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pandas.util import hash_array

    b = open_batches(path, None, None)
    names = sorted(b.header)
    rows: list[np.ndarray[Any, np.dtype[np.uint64]]] = []
    try:
        for batch in b.batches:
            h = np.zeros(batch.rows, dtype=np.uint64)
            for name in names:
                col = batch.columns[name]
                if pa.types.is_dictionary(col.type):
                    col = col.cast(col.type.value_type)
                text = pc.utf8_trim_whitespace(pc.fill_null(col.cast(pa.string()), ""))
                enc = text.dictionary_encode()
                distinct = hash_array(enc.dictionary.to_numpy(zero_copy_only=False))
                codes = enc.indices.to_numpy(zero_copy_only=False)
                with np.errstate(over="ignore"):
                    h = h * _MIX + distinct[codes]
            rows.append(h)
    finally:
        b.close()
    every = np.sort(np.concatenate(rows)) if rows else np.zeros(0, dtype=np.uint64)
    digest = hashlib.sha256("\x00".join(names).encode("utf-8", "surrogateescape") + b"\x01")
    digest.update(every.astype("<u8").tobytes())
    return digest.hexdigest()
