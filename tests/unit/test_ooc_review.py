"""Large-table review: Parquet batches of a row group carry the row group's whole dictionary,
so a batch's dictionary may hold values none of its rows has (another batch's, or a pandas
categorical's unused categories)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedanon.errors import DataError
from fedanon.io import table
from fedanon.io.sources import parquet
from fedanon.model.spec import load_spec


def _table1(table1_dir: Path, n: int) -> pa.Table:
    rows = [r.split(",") for r in (table1_dir / "table1.csv").read_text().splitlines()]
    head, body = rows[0], rows[1:]
    body = [body[i % len(body)] for i in range(n)]
    return pa.table({h: [r[j] for r in body] for j, h in enumerate(head)})


@pytest.mark.parametrize(
    ("column", "value", "why"),
    [
        ("Job", "Astronaut", "value not allowed"),  # a taxonomy leaf
        ("Transfuse", "maybe", "value not allowed"),  # a declared class value
        ("Age", "abc", "not a number"),
        ("Age", "150", "number outside the declared domain"),
    ],
)
def test_bad_value_in_a_later_batch_of_a_row_group_is_named_at_its_row(
    table1_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    column: str,
    value: str,
    why: str,
) -> None:
    monkeypatch.setattr(parquet, "BATCH_ROWS", 4)  # 3 batches of the one row group
    spec, reader = load_spec(table1_dir / "run.toml")
    schema = table.build_schema(spec, reader)
    t = _table1(table1_dir, 12)
    vals = t.column(column).to_pylist()
    vals[9] = value  # row 10: the third batch; the first two see it in their dictionary
    t = t.set_column(t.schema.get_field_index(column), column, pa.array(vals))
    pq.write_table(t, tmp_path / "bad.parquet", row_group_size=100)
    for budget in ("off", "1B"):  # in memory and out of core
        with pytest.raises(DataError) as err:
            table.encode_table(schema, tmp_path / "bad.parquet", memory_budget=budget)
        assert err.value.column == column and "row 10:" in str(err.value), str(err.value)
        assert why in str(err.value) and repr(value) in str(err.value)


def test_unusable_spill_directory_is_exit_2_naming_it(table1_dir: Path, tmp_path: Path) -> None:
    """Out of core with FEDANON_SPILL_DIR missing (or a full disk): a configuration the user
    fixes, exit 2 naming the directory, nothing published; it was an internal error (exit 1,
    FileNotFoundError traceback)."""
    missing = tmp_path / "no-such-dir"
    out = tmp_path / "released.csv"
    env = {**os.environ, "FEDANON_MEMORY_BUDGET": "1B", "FEDANON_SPILL_DIR": str(missing)}
    args = ["--spec", str(table1_dir / "run.toml"), "--input", str(table1_dir / "table1.csv")]
    proc = subprocess.run(
        [sys.executable, "-m", "fedanon.cli", "anonymize", *args, "--output", str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "cannot write the out-of-core spill file" in proc.stderr and str(missing) in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
