"""Input sources of a table: CSV (optionally gzip), Parquet, PostgreSQL.

A source is named by a path or by a ``postgresql://`` URL plus a query or a table name; see
:func:`parse_source`.  :func:`open_batches` reads any of them as :class:`Batches`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

from fedanon.io.batches import Batch, Batches, Location
from fedanon.io.sources.postgres import PgSource, is_pg_url

DataSource = Path | PgSource
RowsRead = Callable[[int], None]  # called with the number of records read so far

__all__ = [
    "Batch",
    "Batches",
    "DataSource",
    "Location",
    "PgSource",
    "RowsRead",
    "is_parquet",
    "open_batches",
    "parse_source",
]

PARQUET_MAGIC = b"PAR1"


def parse_source(
    text: str, query: str | None = None, table: str | None = None, base: Path | None = None
) -> DataSource:
    """A command-line / party.toml data reference: a path (relative to ``base``) or a
    PostgreSQL URL with exactly one of ``query`` and ``table``."""
    if is_pg_url(text):
        return PgSource.from_parts(text, query, table)
    if query is not None or table is not None:
        from fedanon.errors import ConfigError

        raise ConfigError(
            "query / table apply only to a postgresql:// data source",
            expected='data = "postgresql://user@host/db" with query = "SELECT ..."',
        )
    path = Path(text)
    return path if base is None or path.is_absolute() else base / path


def is_parquet(path: Path) -> bool:
    """A Parquet file: by its name, or by its magic bytes when it is a regular file."""
    if path.name.lower().endswith((".parquet", ".pq")):
        return True
    try:
        if path.is_file():
            with path.open("rb") as fh:
                return fh.read(4) == PARQUET_MAGIC
    except OSError:
        return False
    return False


def open_batches(
    source: DataSource,
    declared: Collection[str] | None,
    include: Collection[str] | None,
    optional: Collection[str] = (),
) -> Batches:
    """Header checked against ``declared`` (the spec's column names; ``optional``: those it
    may lack) and batches of the ``include`` columns only (None: all); other columns are
    never decoded."""
    if isinstance(source, PgSource):
        from fedanon.io.sources.postgres import read_postgres

        return read_postgres(source, declared, include, optional)
    if is_parquet(source):
        from fedanon.io.sources.parquet import read_parquet

        return read_parquet(source, declared, include, optional)
    from fedanon.io.csvread import read_batches

    return read_batches(source, declared, include, optional)
