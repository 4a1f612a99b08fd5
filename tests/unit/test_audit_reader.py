"""`fedanon audit`'s reader of released tables (attack-user 06 and 08): an unterminated quote
is blamed on the line where it opens, fields as long as the input readers take are read, and a
Parquet release keeps a pandas index stored in the file as a column."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fedanon.cli.main import main
from fedanon.errors import DataError
from fedanon.privacy.audit import audit_lkc, read_release


@pytest.fixture
def released(table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """fedanon's own release of Table I (a header and 11 records; it holds)."""
    out = tmp_path / "released.csv"
    spec, data = str(table1_dir / "run.toml"), str(table1_dir / "table1.csv")
    assert main(["anonymize", "--spec", spec, "--input", data, "--output", str(out)]) == 0
    capsys.readouterr()
    return out


def audit_cli(
    capsys: pytest.CaptureFixture[str], table1_dir: Path, table: Path
) -> tuple[int, str, str]:
    code = main(["audit", "--spec", str(table1_dir / "run.toml"), "--released", str(table)])
    out, err = capsys.readouterr()
    return code, out, err


def with_line(path: Path, line: int, prefix: str, out: Path) -> Path:
    lines = path.read_text().splitlines(keepends=True)
    lines[line - 1] = prefix + lines[line - 1]
    out.write_text("".join(lines))
    return out


@pytest.mark.parametrize("run_on", [0, 200_000])
def test_unterminated_quote_names_the_line_it_opens(
    released: Path,
    table1_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    run_on: int,
) -> None:
    # a quote opening line 4 of 12 (and, over the csv module's 128 KB limit, running on)
    bad = with_line(released, 4, '"' + "z" * run_on, tmp_path / "unterm.csv")
    with pytest.raises(DataError) as err:
        read_release(bad)
    assert err.value.line == 4
    assert "unterminated quoted field" in str(err.value)
    code, _, msg = audit_cli(capsys, table1_dir, bad)
    assert code == 2
    assert "unterm.csv, line 4: unterminated quoted field" in msg and "expected" in msg


def test_unterminated_quote_in_a_row_of_the_right_width(tmp_path: Path) -> None:
    # 'x,"y' opens a quote on line 3 that swallows line 4: the record still has 2 fields
    path = tmp_path / "r.csv"
    path.write_text('a,b\n1,2\nx,"y\nc,d\n')
    with pytest.raises(DataError, match="unterminated quoted field") as err:
        read_release(path)
    assert err.value.line == 3


def test_quoted_fields_spanning_lines_and_quotes_as_characters_still_read(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text('a,b\n"x\ny",5"\n"p""q",r"s\n')
    header, frame = read_release(path)
    assert header == ["a", "b"]
    assert frame.to_dict("list") == {"a": ["x\ny", 'p"q'], "b": ['5"', 'r"s']}


def test_a_field_over_128_kb_is_read(released: Path, tmp_path: Path) -> None:
    # a valid release with a long free-text column (the input readers take records of 64 MB)
    frame = pd.read_csv(released, dtype=str)
    frame["Note"] = ""
    frame.loc[2, "Note"] = "n" * 3_000_000
    path = tmp_path / "big.csv"
    frame.to_csv(path, index=False)
    header, got = read_release(path, ["Job", "Note"])
    assert header[-1] == "Note"
    assert len(got["Note"][2]) == 3_000_000 and list(got["Job"]) == list(frame["Job"])


def test_parquet_with_a_pandas_index_keeps_it_as_a_column(
    released: Path, table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = pd.read_csv(released, dtype=str)
    path = tmp_path / "job_index.parquet"
    frame.set_index("Job").to_parquet(path)
    header, got = read_release(path, ["Job", "Sex"])
    assert "Job" in header and sorted(got["Job"]) == sorted(frame["Job"])
    code, out, err = audit_cli(capsys, table1_dir, path)
    assert (code, err) == (0, "")
    assert "LKC-privacy holds" in out


def test_missing_column_names_the_file_and_what_is_valid() -> None:
    frame = pd.DataFrame({"a": ["1", "2"]})
    with pytest.raises(DataError) as err:
        audit_lkc(frame, ["a", "b"], None, [], 1, 1, 1.0, source="rel.parquet")
    msg = str(err.value)
    assert "rel.parquet" in msg and "'b'" in msg and "columns named a, b" in msg
