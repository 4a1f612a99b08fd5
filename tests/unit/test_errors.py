"""Bad input gets a clear error (file, line, column, value, what is valid) and exit code 2;
inputs are never modified and a failed run publishes nothing."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedanon.cli", *args], capture_output=True, text=True, check=False
    )


@pytest.fixture()
def case(table1_dir: Path, tmp_path: Path) -> Path:
    for f in table1_dir.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def _anonymize(case: Path, spec: str = "run.toml", data: str = "table1.csv"):
    out = case / "out.csv"
    proc = _run(
        "anonymize",
        "--spec",
        str(case / spec),
        "--input",
        str(case / data),
        "--output",
        str(out),
        "--report",
        str(case / "rep.json"),
    )
    return proc, out


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("target", "old", "new", "needles"),
    [
        ("table1.csv", "ID,Job", "ID,Jobb", ["Jobb", "not declared"]),
        ("table1.csv", "Lawyer,F,58", "Pilot,F,58", ["line 3", "'Job'", "'Pilot'", "leaf"]),
        ("table1.csv", "Mover,M,58", "Mover,M,5x8", ["line 4", "'Age'", "'5x8'", "number"]),
        ("table1.csv", "Mover,M,58", "Mover,M,120", ["line 4", "'Age'", "'120'", "[1, 99)"]),
        ("job.txt", "      Mover", "      Janitor", ["job.txt", "duplicate label", "Janitor"]),
        ("job.txt", "      Mover", "     Mover", ["job.txt", "line ", "indentation", "Mover"]),
        ("run.toml", "L = 2", "L = 0", ["L must be an integer >= 1"]),
        ("run.toml", "K = 2", "K = 0", ["K must be an integer >= 1"]),
        ("run.toml", "C = 0.5", "C = 1.5", ["C must be a number in (0, 1]"]),
        ("run.toml", 'role = "class"', 'role = "other"', ["infogain", "class"]),
        ("run.toml", "K = 2", "K = 12", ["11 records", "fewer than K = 12"]),
        ("run.toml", "C = 0.5", "C = 0.1", ["'Transgender'", "above C = 0.1"]),
    ],
)
def test_input_errors(case: Path, target: str, old: str, new: str, needles: list[str]) -> None:
    _edit(case / target, old, new)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in case.iterdir()}
    proc, out = _anonymize(case)
    assert proc.returncode == 2, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)
    assert not out.exists() and not (case / "rep.json").exists()
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in case.iterdir()}
    assert before == after  # inputs untouched, nothing published


def test_missing_column_and_empty_input(case: Path) -> None:
    lines = (case / "table1.csv").read_text().splitlines()
    (case / "nosurgery.csv").write_text(
        "\n".join(",".join(line.split(",")[:-1]) for line in lines) + "\n"
    )
    proc, _ = _anonymize(case, data="nosurgery.csv")
    assert proc.returncode == 2 and "'Surgery' is missing" in proc.stderr
    (case / "empty.csv").write_text("")
    proc, _ = _anonymize(case, data="empty.csv")
    assert proc.returncode == 2 and "empty" in proc.stderr
    (case / "header.csv").write_text(lines[0] + "\n")
    proc, _ = _anonymize(case, data="header.csv")
    assert proc.returncode == 2 and "no records" in proc.stderr


def test_sensitive_value_that_never_occurs(case: Path) -> None:
    _edit(case / "run.toml", '["Transgender"]', '["Transgender", "Appendix"]')
    proc, out = _anonymize(case)
    assert proc.returncode == 2, proc.stderr
    assert "'Appendix' never occurs" in proc.stderr and "allow_absent_sensitive" in proc.stderr
    assert not out.exists()
    _edit(case / "run.toml", "C = 0.5", "C = 0.5\nallow_absent_sensitive = true")
    proc, out = _anonymize(case)
    assert proc.returncode == 0, proc.stderr
    assert "'Appendix' never occurs" in proc.stderr  # still a warning
    assert out.exists()


def test_usage_error_exit_2() -> None:
    proc = _run("anonymize", "--spec")
    assert proc.returncode == 2
    proc = _run("--help")
    assert proc.returncode == 0 and "anonymize" in proc.stdout


def test_refuses_to_overwrite_an_input(case: Path) -> None:
    data = case / "table1.csv"
    before = data.read_bytes()
    proc = _run(
        "anonymize", "--spec", str(case / "run.toml"), "--input", str(data), "--output", str(data)
    )
    assert proc.returncode == 2 and "refusing to overwrite" in proc.stderr
    assert data.read_bytes() == before


def test_a_long_value_is_quoted_short_and_escaped() -> None:
    """A 20 MB field must not become a 20 MB error line; control characters are escaped."""
    from fedanon.errors import InputError

    text = str(InputError("value not allowed", file="d.csv", value="\x1b" + "J" * 20_000_000))
    assert len(text) < 1000
    assert "20,000,001 characters" in text and "\x1b" not in text and "\\x1b" in text
    assert str(InputError("x", value="it's")) == 'x (value "it\'s")'


def test_a_file_name_is_escaped() -> None:
    from fedanon.errors import InputError

    text = str(InputError("bad", file="e\x1b[31mvil.csv"))
    assert text == "e\\x1b[31mvil.csv: bad"
