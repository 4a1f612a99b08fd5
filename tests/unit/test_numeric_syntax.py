"""A numeric QID reads a number as a CSV writes it (ASCII digits, sign, point, exponent):
Python's wider ``float`` syntax -- ``3_4``, full-width or Arabic-Indic digits -- is refused
with the file, line, column and value (it was read as 34, while `fedanon federate`'s
same-table check compared it as text: a copy could count twice towards K)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelp import anonymize_table1 as _anonymize

TABLE1 = Path(__file__).parent.parent.parent / "examples" / "table1"


def _with_age(tmp_path: Path, spell: str, copies: int = 1) -> Path:
    lines = (TABLE1 / "table1.csv").read_text().splitlines()
    header = lines[0].split(",")
    age = header.index("Age")
    rows = [ln.split(",") for ln in lines[1:]]
    rows[0][age] = spell
    p = tmp_path / "t.csv"
    p.write_text("\n".join([lines[0], *(",".join(r) for r in rows * copies)]) + "\n")
    return p


@pytest.mark.parametrize("spell", ["3_4", "\uff13\uff14", "\u0663\u0664", "34_"])
@pytest.mark.parametrize("copies", [1, 400])  # the csv module's path and Arrow's (> 64 KB)
def test_python_only_number_syntax_is_refused(tmp_path: Path, spell: str, copies: int) -> None:
    out = tmp_path / "out.csv"
    proc = _anonymize(_with_age(tmp_path, spell, copies), out)
    assert proc.returncode == 2, proc.stderr
    assert "line 2, column 'Age': not a number" in proc.stderr
    assert repr(spell) in proc.stderr and not out.exists()


@pytest.mark.parametrize("spell", ["34.0", "034", "+34", "3.4e1", "34."])
def test_csv_number_spellings_read_as_the_number(tmp_path: Path, spell: str) -> None:
    plain, other = tmp_path / "plain.csv", tmp_path / "other.csv"
    assert _anonymize(_with_age(tmp_path, "34"), plain).returncode == 0
    proc = _anonymize(_with_age(tmp_path, spell), other)
    assert proc.returncode == 0, proc.stderr
    assert other.read_bytes() == plain.read_bytes()
