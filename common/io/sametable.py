"""Whether two input tables hold the same records, whatever their encoding.

``fedanon federate`` refuses two parties with the same table (the records would count twice
towards K).  Comparing bytes misses a gzip, CRLF or Parquet copy, so tables are compared by a
digest of their content as the run reads it: the columns the run reads (given as
:class:`Compared`: the spec's non-identifier columns; every column when none is given) and
the multiset of records (in any order) on those columns, each value compared as the text the
readers give it (gzip and byte order mark removed, quoting and line endings -- LF, CRLF, CR --
resolved, surrounding blanks stripped, a Parquet value as its text, a missing value as an
empty cell), a numeric column's numbers as numbers (34, 34.0 and 034 agree).  A column the run
never reads (an identifier renumbered, an extra column) makes no difference.  Two tables are
"the same" exactly when those agree; a copy with one record more, less or changed (on a
column the run reads) is a different table.

Vectorised: each distinct value of a column is hashed once (pandas' SipHash of an object
array), records combine their columns' hashes by column name, and the sorted record hashes
are digested (SHA-256) -- no Python loop over rows.

:func:`column_digest` is the cheap first test: the column names and the multiset of one
column's values (the first name in sorted order; only that column is decoded, no hashing of
values: Arrow counts them).  Two tables that differ there differ; only tables that agree
there need the full :func:`content_digest` (which reads every column).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fedanon.io.encoders import CSV_NUMBER
from fedanon.io.sources import open_batches

if TYPE_CHECKING:
    from fedanon.io.table import EncodedTable

_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: combines a record's column hashes in name order
_NUMBER = f"^{CSV_NUMBER}$"  # a decimal the numeric readers take (one syntax for both)


@dataclass(frozen=True)
class Compared:
    """What two tables are compared on: ``columns`` (None: every column of the file) and,
    among them, the ``numeric`` ones (compared as numbers)."""

    columns: tuple[str, ...] | None = None
    numeric: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of_spec(cls, spec: Any) -> Compared:
        """A run spec's columns: every declared attribute but the identifiers (never read),
        its numeric QIDs as numbers."""
        read = [a for a in spec.attributes if a.role != "identifier"]
        numeric = frozenset(a.name for a in read if a.role == "qid" and a.type == "numeric")
        return cls(tuple(a.name for a in read), numeric)

    def names(self, header: Sequence[str]) -> list[str]:
        """The compared columns of a file with ``header``, sorted (a declared column the file
        lacks is left out: the run refuses that file anyway)."""
        if self.columns is None:
            return sorted(header)
        return sorted(set(self.columns) & set(header))


EVERY_COLUMN = Compared()


def _text(col: Any, numeric: bool = False) -> Any:
    """A column as the text the readers give it: strings, blanks stripped, null as "";
    ``numeric``: every decimal as the shortest text of its number (34.0, 034 -> 34)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    text = pc.utf8_trim_whitespace(pc.fill_null(col.cast(pa.string()), ""))
    if not numeric:
        return text
    number = pc.match_substring_regex(text, _NUMBER)
    value = pc.add(pc.cast(pc.if_else(number, text, "0"), pa.float64()), 0.0)  # -0 is 0
    return pc.if_else(number, pc.cast(value, pa.string()), text)


def _header(path: Path, compared: Compared) -> list[str]:
    b = open_batches(path, None, ())
    try:
        return compared.names(b.header)
    finally:
        b.close()


def column_digest(path: Path, compared: Compared = EVERY_COLUMN) -> str:
    """SHA-256 (hex) of the compared column names and the multiset of the first one's (in
    sorted name order) values: equal for two tables with equal :func:`content_digest`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = _header(path, compared)
    digest = hashlib.sha256(b"column\x01" + "\x00".join(names).encode("utf-8", "surrogateescape"))
    if not names:
        return digest.hexdigest()
    b = open_batches(path, None, names[:1])
    parts: list[Any] = []
    try:
        for batch in b.batches:
            col = batch.columns[names[0]]
            vc = pc.value_counts(_text(col, names[0] in compared.numeric))
            parts.append(pa.table({"v": vc.field("values"), "c": vc.field("counts")}))
    finally:
        b.close()
    if parts:
        t = pa.concat_tables(parts).group_by("v").aggregate([("c", "sum")])
        t = t.take(pc.sort_indices(t["v"])).combine_chunks()
        values = t["v"].chunk(0) if t.num_rows else pa.array([], pa.string())
        counts = t["c_sum"].to_numpy() if t.num_rows else np.zeros(0, dtype=np.int64)
        lengths = pc.binary_length(values).to_numpy(zero_copy_only=False)
        digest.update(lengths.astype("<i8").tobytes())
        digest.update(counts.astype("<i8").tobytes())
        _, offsets, data = values.buffers()
        if data is not None and len(values):
            wide = np.int64 if pa.types.is_large_string(values.type) else np.int32
            off = np.frombuffer(offsets, dtype=wide)[
                values.offset : values.offset + len(values) + 1
            ]
            digest.update(memoryview(data)[int(off[0]) : int(off[-1])])
    return digest.hexdigest()


def content_digest(path: Path, compared: Compared = EVERY_COLUMN) -> str:
    """SHA-256 (hex) of the compared column names and the multiset of the records on them."""
    from fedanon.pandasgate import allow_pandas

    allow_pandas()  # its hash of strings (only for tables that agree on column_digest)
    from pandas.util import hash_array

    names = _header(path, compared)
    b = open_batches(path, None, names)
    rows: list[np.ndarray[Any, np.dtype[np.uint64]]] = []
    try:
        for batch in b.batches:
            h = np.zeros(batch.rows, dtype=np.uint64)
            for name in names:
                enc = _text(batch.columns[name], name in compared.numeric).dictionary_encode()
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


def loaded_digest(table: EncodedTable) -> str:
    """SHA-256 (hex) of a table as a daemon loaded it for a run: the multiset of every QID's
    leaf codes, the class codes and the sensitive codes, column by column (no row linkage).
    A function of the records as the run reads them, so equal for two text (CSV) tables with
    equal :func:`content_digest` under the same spec; two tables that differ here differ.  Not
    trusted for a Parquet table (its typed numbers reach the encoder by another path than a
    CSV's text; see :func:`fedanon.leader.federateinputs.check_distinct_tables`).  Cheap
    (one ``bincount`` per column): `fedanon federate` compares the daemons' digests of the
    tables they loaded anyway instead of reading every table a second time
    (:func:`column_digest`), and reads the files only for tables that agree here."""
    digest = hashlib.sha256(b"loaded\x01")
    columns = [*np.asarray(table.qid_leaves), np.asarray(table.cls), np.asarray(table.sens)]
    for codes in columns:
        wide = codes.astype(np.int64, copy=False)
        low = int(wide.min()) if wide.size else 0
        digest.update(np.int64(low).astype("<i8").tobytes())
        digest.update(np.bincount(wide - low).astype("<i8").tobytes())
        digest.update(b"\x00")
    return digest.hexdigest()
