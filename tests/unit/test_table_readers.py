"""The two CSV readers (csv module for small files, pandas for large ones) agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedanon.errors import DataError
from fedanon.io import csvread, table
from fedanon.model.spec import load_spec


@pytest.mark.parametrize("name", ["adult.csv.gz", "plain"])
def test_small_and_large_readers_agree(
    adult_dir: Path, adult_csv: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = adult_dir / name if name.endswith(".gz") else adult_csv
    spec, reader = load_spec(adult_dir / "run.toml")
    schema = table.build_schema(spec, reader)
    monkeypatch.setattr(csvread, "SMALL_INPUT_BYTES", 1 << 40)
    small = table.encode_table(schema, path)
    monkeypatch.setattr(csvread, "SMALL_INPUT_BYTES", 0)
    large = table.encode_table(schema, path)
    assert np.array_equal(small.qid_leaves, large.qid_leaves)
    assert np.array_equal(small.cls, large.cls) and np.array_equal(small.sens, large.sens)
    for k in small.kept:
        assert small.kept[k].tolist() == large.kept[k].tolist()


@pytest.mark.parametrize("threshold", [1 << 40, 0])
def test_ragged_rows_are_errors_in_both_readers(
    tmp_path: Path, threshold: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(csvread, "SMALL_INPUT_BYTES", threshold)
    f = tmp_path / "t.csv"
    f.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(DataError, match="field"):
        table.read_columns(f)
    f.write_text("a,b\n1,2\n3\n")
    with pytest.raises(DataError, match="field"):
        table.read_columns(f)
    f.write_text("a,b\n x , y\nx,y\n")
    header, cols = table.read_columns(f)
    assert header == ["a", "b"] and cols["a"].values == ("x",) and list(cols["a"].codes) == [0, 0]


@pytest.mark.parametrize("out_name", ["out.csv", "out.parquet"])
def test_reading_and_writing_through_arrow_never_loads_pandas(
    adult_dir: Path, tmp_path: Path, out_name: str
) -> None:
    """pyarrow imports pandas at its first conversion unless told it is absent (0.3 s and
    ~60 MB per CLI run or daemon); a full anonymize run must not load it, and pyarrow must
    still hand out pandas objects afterwards."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from fedanon.apispec import Spec\n"
        "from fedanon.centralized import anonymize_file\n"
        "d = Path(sys.argv[1])\n"
        "spec = Spec.from_toml(d / 'run.toml')\n"
        "anonymize_file(spec, d / 'adult.csv.gz', Path(sys.argv[2]), None, False)\n"
        "assert 'pandas' not in sys.modules, 'pandas was loaded'\n"
        "import pyarrow as pa\n"
        "df = pa.table({'a': [1, 2]}).to_pandas()\n"
        "assert type(df).__module__.startswith('pandas'), type(df)\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(adult_dir), str(tmp_path / out_name)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
