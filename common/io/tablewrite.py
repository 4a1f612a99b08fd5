"""Writing a released table fast: CSV (byte for byte what the csv module writes) or Parquet.

Released columns are few distinct values and a code per row (generalized QIDs, class and
other kept columns), so each distinct value is CSV-escaped once; rows are assembled by Arrow
in chunks (take + join in C++), which bounds memory by the chunk, not the table.
"""

from __future__ import annotations

import csv
import io
import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.io.columns import Column, use_system_allocator

ColumnData = Sequence[str] | Column
CHUNK_ROWS = 1 << 16  # rows assembled at a time: bounds the writer's memory
ROW_GROUP_ROWS = 1 << 20  # Parquet rows per row group (pyarrow's write_table default)
WRITER_THREADS = 2  # CSV chunks assembled at once (Arrow's take and join release the GIL)
AHEAD = 3  # CSV chunks assembled ahead of the one being written (bounds the memory)


def warm_up() -> threading.Thread:
    """Load what writing a table needs (Arrow and its compute functions: ~0.1 s of imports)
    in a background thread, for a process that is otherwise waiting -- the leader during the
    rounds, whose main thread waits on the network most of the time.  The writer itself then
    starts at once (an import in progress is waited for by Python's module lock)."""

    def load() -> None:
        use_system_allocator()
        import pyarrow.compute  # noqa: F401

    thread = threading.Thread(target=load, name="writer-warm-up", daemon=True)
    thread.start()
    return thread


def is_parquet_name(path: Path) -> bool:
    return path.name.lower().endswith((".parquet", ".pq"))


def as_coded(col: ColumnData) -> Column:
    """A column as distinct values + codes (lists of strings are dictionary-encoded)."""
    if isinstance(col, Column):
        return col
    import pyarrow as pa

    enc = pa.array(list(col), pa.string()).dictionary_encode()
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    return Column(None, codes, enc.dictionary)


def _escaped(values: Any, sole: bool, sep: str) -> Any:
    """Each distinct value as the csv module writes it in a row (QUOTE_MINIMAL), followed by
    ``sep``.  Only values holding a comma, quote or line break go through the csv module."""
    import pyarrow as pa
    import pyarrow.compute as pc

    special = pc.match_substring_regex(values, r'[,"\r\n]')
    if sole:
        special = pc.or_(special, pc.equal(values, ""))
    idx = np.flatnonzero(special.to_numpy(zero_copy_only=False))
    if idx.size:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        fixed = []
        for v in values.take(pa.array(idx)).to_pylist():
            if sole and v == "":
                fixed.append('""')  # the csv module's rendering of a row of one empty field
                continue
            buf.seek(0)
            buf.truncate()
            w.writerow([v, ""])
            fixed.append(buf.getvalue()[:-2])
        text = values.to_pylist()
        for i, f in zip(idx.tolist(), fixed, strict=True):
            text[i] = f
        values = pa.array(text, pa.string())
    return pc.binary_join_element_wise(values, pa.scalar(sep), "")


def write_csv(fh: Any, columns: list[str], coded: list[Column]) -> None:
    use_system_allocator()
    import pyarrow as pa
    import pyarrow.compute as pc

    head = io.StringIO()
    csv.writer(head, lineterminator="\n").writerow(columns)
    fh.write(head.getvalue().encode("utf-8"))
    if not coded:
        return
    n = len(coded[0])
    last = len(coded) - 1
    dicts = [
        _escaped(c.arrow_values(), last == 0, "\n" if j == last else ",")
        for j, c in enumerate(coded)
    ]

    def text(lo: int) -> memoryview:
        hi = min(n, lo + CHUNK_ROWS)
        parts = [d.take(pa.array(c.codes[lo:hi])) for d, c in zip(dicts, coded, strict=True)]
        lines = pc.binary_join_element_wise(*parts, "") if len(parts) > 1 else parts[0]
        lines = lines.cast(pa.large_string()) if len(lines) else lines
        offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)
        start, end = int(offsets[lines.offset]), int(offsets[lines.offset + len(lines)])
        return memoryview(lines.buffers()[2])[start:end]

    starts = range(0, n, CHUNK_ROWS)
    if len(starts) < 2:
        for lo in starts:
            fh.write(text(lo))
        return
    # Arrow assembles the next chunks in other threads (it releases the GIL) while this
    # one is written; at most AHEAD chunks wait, so memory stays bounded by the chunk
    with ThreadPoolExecutor(max_workers=WRITER_THREADS) as pool:
        pending: deque[Future[memoryview]] = deque()
        for lo in starts:
            pending.append(pool.submit(text, lo))
            if len(pending) > AHEAD:
                fh.write(pending.popleft().result())
        while pending:
            fh.write(pending.popleft().result())


def write_parquet(fh: Any, columns: list[str], coded: list[Column]) -> None:
    use_system_allocator()
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(coded[0]) if coded else 0
    values = [c.arrow_values() for c in coded]

    def rows(lo: int, hi: int) -> Any:
        arrays = [
            pa.DictionaryArray.from_arrays(pa.array(c.codes[lo:hi]), v)
            for c, v in zip(coded, values, strict=True)
        ]
        return pa.table(dict(zip(columns, arrays, strict=True)))

    first = rows(0, min(n, ROW_GROUP_ROWS))
    # larger write batches: the writer's per-batch statistics and level bookkeeping cost
    # ~30% less CPU at 64k rows than at its default 1k (the file is the same)
    with pq.ParquetWriter(fh, first.schema, compression="zstd", write_batch_size=CHUNK_ROWS) as w:
        w.write_table(first)  # one row group at a time: memory bounded by the row group
        for lo in range(ROW_GROUP_ROWS, n, ROW_GROUP_ROWS):
            w.write_table(rows(lo, min(n, lo + ROW_GROUP_ROWS)))
