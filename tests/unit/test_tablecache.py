"""The daemon's table cache: reused for the same spec and unchanged file, read again when
the file or the spec changes, never for a database, and read-only once shared."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from fedanon.io.sources import PgSource
from fedanon.io.table import build_schema, encode_table
from fedanon.model.spec import load_spec, run_hash
from fedanon.party.runs import round_down
from fedanon.party.tablecache import TableCache, stamp

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _schema():  # type: ignore[no-untyped-def]
    spec, reader = load_spec(EXAMPLES / "table1" / "run.toml")
    schema = build_schema(spec, reader)
    return schema, run_hash(spec, schema.files)


def _copy(tmp: Path) -> Path:
    data = tmp / "t.csv"
    data.write_bytes((EXAMPLES / "table1" / "table1.csv").read_bytes())
    return data


def test_same_spec_and_file_reuses_the_table(tmp_path: Path) -> None:
    schema, key = _schema()
    cache = TableCache(_copy(tmp_path))
    seen: list[int] = []
    first = cache.get(key, schema, seen.append)
    assert seen and seen[-1] == first.n_rows  # the reader's progress reached the caller
    assert cache.get(key, schema) is first and cache.hits == 1
    fresh = encode_table(schema, cache.source)
    assert np.array_equal(first.qid_leaves, fresh.qid_leaves)
    assert np.array_equal(first.cls, fresh.cls)
    with pytest.raises(ValueError):  # shared between runs: nobody may write into it
        first.qid_leaves[0, 0] = 1
    assert cache.get(b"another spec".ljust(32, b"\0"), schema) is not first


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    schema, key = _schema()
    data = _copy(tmp_path)
    cache = TableCache(data)
    first = cache.get(key, schema)
    lines = data.read_text(encoding="utf-8").splitlines()
    data.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")  # one record fewer
    st = data.stat()
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    second = cache.get(key, schema)
    assert second is not first and second.n_rows == first.n_rows - 1


def test_disabled_or_database_is_never_kept(tmp_path: Path) -> None:
    schema, key = _schema()
    off = TableCache(_copy(tmp_path), enabled=False)
    assert off.get(key, schema) is not off.get(key, schema)
    # a database has no identity saying whether its rows changed: read for every run
    assert stamp(PgSource("postgresql://nobody@127.0.0.1:1/x", None, "t")) is None
    assert stamp(tmp_path / "missing.csv") is None


def test_rows_read_are_rounded_down() -> None:
    assert [round_down(n) for n in (0, 7, 99, 1234, 1_234_567)] == [0, 7, 99, 1200, 1_200_000]


def test_a_failed_load_leaves_no_reference_cycle(tmp_path: Path) -> None:
    # The future keeps the load's exception (for a Prepare waiting on the same load), and its
    # traceback holds the loading frames: had those frames kept the future, the half-read
    # table and its reader would wait for the garbage collector (in a daemon: its exit).
    import gc

    from fedanon.errors import DataError
    from fedanon.io.batches import Batches

    schema, key = _schema()
    data = tmp_path / "t.csv"
    text = (EXAMPLES / "table1" / "table1.csv").read_text().splitlines()
    data.write_text("\n".join([text[0], ",".join(["x"] * len(text[0].split(",")))]) + "\n")
    cache = TableCache(data)
    gc.collect()
    gc.disable()
    try:
        for _ in range(2):
            with pytest.raises(DataError):
                cache.get(key, schema)
        left = [o for o in gc.get_objects() if isinstance(o, Batches)]
    finally:
        gc.enable()
    assert not left, f"{len(left)} failed loads kept alive by a reference cycle"
