"""A PostgreSQL query or table as an input source (psycopg 3).

The hospital names its database by URL (``postgresql://fedanon@db.hospital.local/ehr``) and
what to read by ``query`` or ``table``.  Credentials never appear in the URL, on a command
line or in a log: a URL with a password is refused; libpq takes the password from
``PGPASSWORD`` or ``~/.pgpass`` (and host, port, user defaults from the other ``PG*``
variables).  The run opens a read-only transaction, describes the query's columns, checks
names and types against the spec, then streams only the columns the run uses with ``COPY
(SELECT ...) TO STDOUT`` into Arrow's CSV reader (typed: numbers stay numbers, NULLs stay
NULLs and are refused like a bad CSV cell, naming the row of the query result).

A text array (``text[]``, ``varchar[]``: a set-valued column, e.g. diagnosis codes) arrives
as an Arrow ``list<string>`` column: the server joins its elements with U+001F (the unit
separator) and also sends each array's cardinality, so an empty array, an array of one empty
string and a NULL array stay apart, and an element containing U+001F is refused (its split
would not match the cardinality).  A NULL element arrives as an empty item (refused by the
set reader, :mod:`fedanon.io.setvalued`).
"""

from __future__ import annotations

import io
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

from fedanon.errors import ConfigError, DataError
from fedanon.io.batches import Batch, Batches, Location
from fedanon.io.columns import use_system_allocator

URL_PREFIXES = ("postgresql://", "postgres://")
BLOCK_BYTES = 4 << 20
CONNECT_TIMEOUT_S = 15

# type OIDs (pg_type): what a column may hold
TEXT_TYPES = {25: "text", 1043: "varchar", 1042: "char", 19: "name"}
INT_TYPES = {20: "bigint", 21: "smallint", 23: "integer"}
FLOAT_TYPES = {700: "real", 701: "double precision", 1700: "numeric"}
ARRAY_TYPES = {1009: "text[]", 1015: "varchar[]", 1014: "char[]", 1003: "name[]"}
SECRET_PARAMS = {"password", "sslpassword"}  # refused in a URL: it is named in every message
UNIT_SEP = "\x1f"  # joins a text array's elements on the wire (see the module doc)


def is_pg_url(text: str) -> bool:
    return text.lower().startswith(URL_PREFIXES)


@dataclass(frozen=True)
class PgSource:
    """A database URL (no password) and either a query or a table name."""

    url: str
    query: str | None = None
    table: str | None = None

    def __post_init__(self) -> None:
        if not is_pg_url(self.url):
            raise ConfigError("a database source must be a postgresql:// URL")
        try:
            from psycopg.conninfo import conninfo_to_dict

            params = conninfo_to_dict(self.url)
        except Exception:  # a malformed URL: do not echo it (it may hold a secret)
            raise ConfigError(
                "the postgresql:// URL cannot be parsed",
                expected="postgresql://user@host:port/database",
            ) from None
        if SECRET_PARAMS & params.keys():  # the password, or the client key's passphrase
            raise ConfigError(
                "the postgresql:// URL contains a password; passwords never go on a command "
                "line or in a config file",
                expected="postgresql://user@host/database, with the password in PGPASSWORD "
                "or ~/.pgpass",
            )
        if (self.query is None) == (self.table is None):
            raise ConfigError(
                "a postgresql:// source needs exactly one of query and table",
                expected='query = "SELECT ... FROM encounters" or table = "encounters"',
            )
        if self.query is not None and not self.query.strip().rstrip(";").strip():
            raise ConfigError("the query is empty", expected="SELECT ... FROM ...")
        if self.table is not None and not re.fullmatch(r"[^.\s\"]+(\.[^.\s\"]+)?", self.table):
            raise ConfigError(
                "the table name is not a plain [schema.]name",
                value=self.table,
                expected="e.g. encounters or ehr.encounters",
            )

    @classmethod
    def from_parts(cls, url: str, query: str | None, table: str | None) -> PgSource:
        return cls(url, query, table)

    @property
    def display(self) -> str:
        what = f"table {self.table}" if self.table is not None else "query"
        return f"{self.url} ({what})"


def _relation(src: PgSource) -> Any:
    from psycopg import sql

    if src.table is not None:
        return sql.Identifier(*src.table.split("."))
    assert src.query is not None
    # the line break ends a trailing "-- comment", which would swallow the parenthesis
    return sql.SQL("({}\n) AS q").format(sql.SQL(src.query.strip().rstrip(";")))


def _db_error(src: PgSource, exc: Exception, what: str) -> DataError:
    """The server's message only for errors that cannot quote data (syntax, names, access,
    connection); a data error (SQLSTATE class 22, e.g. a bad cast) could echo a cell."""
    state = getattr(exc, "sqlstate", None) or ""
    detail = type(exc).__name__
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    if state[:2] in ("", "08", "28", "3D", "42") and (primary or not state):
        detail = primary or str(exc).strip().splitlines()[0]
    code = f"SQLSTATE {state}: " if state else ""
    return DataError(f"{what}: {code}{detail}", file=src.display)


def read_postgres(
    src: PgSource,
    declared: Collection[str] | None,
    include: Collection[str] | None,
    optional: Collection[str] = (),
) -> Batches:
    import psycopg

    from fedanon.io.csvread import check_header

    use_system_allocator()
    try:
        conn = psycopg.connect(src.url, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        raise _db_error(src, exc, "cannot connect to the database") from None
    try:
        conn.read_only = True
        header, types = _describe(conn, src)
        if declared is not None:
            check_header(header, declared, src.display, schema=True, optional=optional)
        dup = {h for h in header if header.count(h) > 1}
        if dup:
            raise DataError("the query returns two columns of the same name", file=src.display)
        wanted = [h for h in header if include is None or h in include]
        kinds = {h: _kind(src, h, types[h], conn) for h in wanted}
    except BaseException:
        conn.close()
        raise
    disp = src.display

    def locate(record: int) -> Location:
        return Location(row=f"row {record + 1} of the query result")

    return Batches(
        disp, header, _batches(conn, src, wanted, kinds), locate, "postgresql", conn.close
    )


def _describe(conn: Any, src: PgSource) -> tuple[list[str], dict[str, int]]:
    import psycopg
    from psycopg import sql

    try:
        with conn.cursor() as cur:
            cur.execute(sql.SQL("SELECT * FROM {} LIMIT 0").format(_relation(src)))
            desc = cur.description or []
    except psycopg.Error as exc:
        raise _db_error(src, exc, "the database refused the query") from None
    header = [d.name for d in desc]
    return header, {d.name: int(d.type_code) for d in desc}


def _type_name(conn: Any, oid: int) -> str:
    """The type's SQL name (an enum, date, uuid, ...), or its oid if the catalog will not say."""
    try:
        row = conn.execute("SELECT format_type(%s::oid, NULL)", (oid,)).fetchone()
    except Exception:  # a name is only a courtesy: the refusal stands without it
        return f"type oid {oid}"
    return f"type {row[0]}" if row and row[0] else f"type oid {oid}"


def _kind(src: PgSource, name: str, oid: int, conn: Any = None) -> str:
    if oid in TEXT_TYPES:
        return "text"
    if oid in INT_TYPES:
        return "integer"
    if oid in FLOAT_TYPES:
        return "float"
    if oid in ARRAY_TYPES:
        return "array"
    raise DataError(
        f"column has a type fedanon does not read "
        f"({_type_name(conn, oid) if conn is not None else f'type oid {oid}'})",
        file=src.display,
        column=name,
        expected="text, an integer, a number or a text array (cast it in the query, e.g. "
        "col::text)",
    )


class _CopyStream(io.RawIOBase):
    """The COPY output as a byte stream for Arrow (rows arrive one message each)."""

    def __init__(self, copy: Any) -> None:
        super().__init__()
        self._copy = copy
        self._buf = bytearray()
        self._done = False
        self.received = 0  # bytes the server sent

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        want = BLOCK_BYTES if n is None or n < 0 else n
        buf = self._buf
        read = self._copy.read
        while len(buf) < want and not self._done:
            data = read()
            if not data:
                self._done = True
                break
            buf += data
            self.received += len(data)
        out = bytes(buf[:want])
        del buf[:want]
        return out

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


def _as_list(src: PgSource, name: str, joined: Any, card: Any, start: int) -> Any:
    """A text array column: its joined text and cardinality -> Arrow list<string>."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    split = pc.split_pattern(joined, UNIT_SEP)
    lists = pc.if_else(pc.equal(card, 0), pa.scalar([], pa.list_(pa.string())), split)
    lens = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)
    want = card.fill_null(0).to_numpy(zero_copy_only=False)
    if (lens != want).any():
        row = start + int(np.flatnonzero(lens != want)[0])
        raise DataError(
            f"row {row + 1} of the query result: an array element contains the control "
            "character U+001F",
            file=src.display,
            column=name,
            expected="array elements without control characters",
        )
    return lists


def _batches(conn: Any, src: PgSource, wanted: list[str], kinds: dict[str, str]) -> Iterator[Batch]:
    import psycopg
    import pyarrow as pa
    import pyarrow.csv as pacsv
    from psycopg import sql

    from fedanon.io.arrowfeed import MAX_RECORD_BYTES, ArrowFeed

    types = {
        "text": pa.dictionary(pa.int32(), pa.string()),
        "integer": pa.int64(),
        "float": pa.float64(),
        "array": pa.string(),
    }
    arrays = [c for c in wanted if kinds[c] == "array"]
    names = [*wanted, *(f"{UNIT_SEP}{c}" for c in arrays)]  # + the arrays' cardinalities
    col_types = {c: types[kinds[c]] for c in wanted} | {n: pa.int64() for n in names[len(wanted) :]}
    exprs = [
        sql.SQL("array_to_string({}, {}, '')").format(sql.Identifier(c), sql.Literal(UNIT_SEP))
        if kinds[c] == "array"
        else sql.Identifier(c)
        for c in wanted
    ] + [sql.SQL("cardinality({})").format(sql.Identifier(c)) for c in arrays]
    select = sql.SQL("COPY (SELECT {} FROM {}) TO STDOUT WITH (FORMAT csv)").format(
        sql.SQL(", ").join(exprs), _relation(src)
    )
    total = 0
    stream: _CopyStream | None = None
    feed = None
    reader = None
    try:
        with conn.cursor() as cur, cur.copy(select) as copy:
            # blocks that end at a record boundary: a value longer than Arrow's block (a long
            # clinical note) would otherwise straddle two block boundaries, which Arrow refuses
            stream = _CopyStream(copy)
            feed = ArrowFeed(stream)
            try:
                reader = pacsv.open_csv(
                    feed.file,
                    read_options=pacsv.ReadOptions(
                        use_threads=True, block_size=BLOCK_BYTES, column_names=names
                    ),
                    parse_options=pacsv.ParseOptions(newlines_in_values=True),
                    convert_options=pacsv.ConvertOptions(
                        column_types=col_types,
                        null_values=[""],
                        strings_can_be_null=True,
                        quoted_strings_can_be_null=False,
                    ),
                )
                for rb in reader:
                    cols = {name: rb.column(i) for i, name in enumerate(wanted)}
                    for j, c in enumerate(arrays):
                        cols[c] = _as_list(src, c, cols[c], rb.column(len(wanted) + j), total)
                    yield Batch(total, cols, rb.num_rows)
                    total += rb.num_rows
            finally:
                if reader is not None:
                    reader.close()
                reader = None
                feed.release()  # Arrow's threads let go of every block before the COPY ends
    except psycopg.Error as exc:
        raise _db_error(src, exc, "reading from the database failed") from None
    except pa.ArrowInvalid:
        if stream is not None and stream.received == 0:  # Arrow: "Empty CSV file"
            raise _no_rows(src) from None
        if feed is not None and feed.oversized is not None:
            raise DataError(
                f"row {total + 1} of the query result or a later one is longer than "
                f"{MAX_RECORD_BYTES >> 20} MB",
                file=src.display,
                expected=f"rows of at most {MAX_RECORD_BYTES >> 20} MB (shorten long text in "
                "the query, e.g. left(note, 100000))",
            ) from None
        raise DataError(
            "the database returned a value Arrow cannot read as its declared type",
            file=src.display,
            expected="text, integers or numbers",
        ) from None
    finally:
        conn.close()
    if total == 0:
        raise _no_rows(src)


def _no_rows(src: PgSource) -> DataError:
    what = "the table has no rows" if src.table is not None else "the query returned no rows"
    return DataError(what, file=src.display, expected="at least one row")
