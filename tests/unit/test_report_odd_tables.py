"""`fedanon report` on tables unlike Adult: a kept free-text column whose quoted cells span
lines (as every other reader accepts them), and a ragged row whose values stay out of the
message (the table read may be the original)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.errors import DataError
from fedanon.report.load import read_coded


def test_a_quoted_cell_spanning_lines_is_one_cell(tmp_path: Path) -> None:
    # past Arrow's 1 MB block: a block boundary falls inside a quoted field
    n = 120_000
    path = tmp_path / "released.csv"
    path.write_text("Age,Note,Result\n" + '[20-45),"multi\nline",pos\n[45-80),"a, ""b""",neg\n' * n)
    t = read_coded(path, ["Age", "Note", "Result"])
    assert t.n_rows == 2 * n
    assert t.labels["Note"] == ('a, "b"', "multi\nline")
    assert t.column("Result")[:2].tolist() == ["pos", "neg"]


def test_a_ragged_row_is_refused_without_its_values(tmp_path: Path) -> None:
    path = tmp_path / "original.csv"
    path.write_text("Age,Diagnosis\n34,Anemia\n35,SECRETVALUE,extra\n")
    with pytest.raises(DataError) as err:
        read_coded(path, ["Age", "Diagnosis"])
    msg = str(err.value)
    assert "Expected 2 columns, got 3" in msg and "original.csv" in msg
    assert "SECRETVALUE" not in msg and "35" not in msg
