"""A Parquet file as an input source (pyarrow).

Only the columns the run uses are read (an identifier column is never decoded); text columns
are read dictionary-encoded, batch by batch, so memory follows the batch, not the file.
Records are named by their row (1-based) in error messages.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from fedanon.errors import DataError
from fedanon.io.batches import Batch, Batches, Location
from fedanon.io.columns import use_system_allocator

BATCH_ROWS = 1 << 16


def read_parquet(
    path: Path,
    declared: Collection[str] | None,
    include: Collection[str] | None,
    optional: Collection[str] = (),
) -> Batches:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fedanon.io.csvread import check_header

    use_system_allocator()
    src = str(path)
    if not path.is_file():
        raise DataError(
            "cannot read input: no such regular file",
            file=src,
            expected="a Parquet file (a pipe cannot be read as Parquet)",
        )
    try:
        meta = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"not a readable Parquet file ({type(exc).__name__})", file=src) from None
    schema = meta.schema_arrow
    header = list(schema.names)
    if declared is not None:
        check_header(header, declared, src, schema=True, optional=optional)
    dup = {h for h in header if header.count(h) > 1}
    if dup:
        raise DataError("two columns have the same name", file=src, column=sorted(dup)[0])
    wanted = [h for h in header if include is None or h in include]
    text = [h for h in wanted if pa.types.is_string(schema.field(h).type)]
    meta.close()
    pf = pq.ParquetFile(path, read_dictionary=text)

    def locate(record: int) -> Location:
        return Location(row=f"row {record + 1}")

    return Batches(src, header, _batches(pf, wanted, src), locate, "parquet", pf.close)


def _batches(pf: Any, wanted: list[str], src: str) -> Iterator[Batch]:
    import pyarrow as pa

    total = 0
    try:
        for rb in pf.iter_batches(batch_size=BATCH_ROWS, columns=wanted, use_threads=True):
            cols = {name: rb.column(i) for i, name in enumerate(wanted)}
            yield Batch(total, cols, rb.num_rows)
            total += rb.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"corrupt Parquet data ({type(exc).__name__})", file=src) from None
    finally:
        pf.close()
    if total == 0:
        raise DataError("the file has no rows", file=src)
