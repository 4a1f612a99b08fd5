"""A new user's own data: a blood-transfusion table with free-text remarks (commas, quotes,
line breaks), non-ASCII labels, ';'-separated exports and diagnosis codes. Each test is a
defect found by running fedanon on such a table (it fails before its fix)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fedanon.api import Spec, anonymize
from fedanon.cli.main import main
from fedanon.errors import DataError

TABLE1 = Path(__file__).parent.parent.parent / "examples" / "table1"


def test_a_frame_error_names_the_row_when_a_cell_holds_a_line_break() -> None:
    # a free-text column with a line break in an earlier row: the CSV the reader sees has
    # more lines than rows, and the error said "<DataFrame> as CSV, line 5", not the row
    frame = pd.read_csv(TABLE1 / "table1.csv").set_index("ID", drop=False)
    frame["Surgery"] = frame["Surgery"].astype(object)
    frame.loc[2, "Surgery"] = "Plastic\nsecond line"
    frame.loc[4, "Surgery"] = "Vascular\r\nthird, line"
    frame.loc[7, "Job"] = "Astronaut"
    with pytest.raises(DataError) as err:
        anonymize(frame, Spec.from_toml(TABLE1 / "run.toml"))
    text = str(err.value)
    assert "<DataFrame> row 6 (index 7)" in text and "'Job'" in text, text


@pytest.mark.parametrize("copies", [1, 2000])  # Python's csv reader; Arrow's (over 64 KB)
def test_a_frame_cell_holding_a_bare_cr_is_kept_not_split(copies: int) -> None:
    # free text exported from an old system ends lines in a bare CR; the frame was written
    # to the reader unquoted there, and the row was refused as 'row has 1 fields'
    frame = pd.read_csv(TABLE1 / "table1.csv")
    frame = pd.concat([frame] * copies, ignore_index=True)
    frame["Surgery"] = frame["Surgery"].astype(object)
    frame.loc[1, "Surgery"] = "Plastic\rrevision, 2nd"
    spec = Spec.from_toml(TABLE1 / "run.toml")
    release = anonymize(frame, spec)
    assert list(release.table["Surgery"]) == list(frame["Surgery"])
    frame.loc[len(frame) - 2, "Job"] = "Astronaut"
    with pytest.raises(DataError) as err:
        anonymize(frame, spec)
    # Arrow counts a bare CR's records, not lines (docs/anonymize.md): it names the record
    where = f"<DataFrame> row {len(frame) - 2} " if copies == 1 else f"record {len(frame) - 1} "
    assert where in str(err.value), str(err.value)


def _anonymize_cli(tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]) -> str:
    out = tmp_path / "released.csv"
    argv = ["anonymize", "--spec", str(TABLE1 / "run.toml"), "--input", str(data)]
    assert main([*argv, "--output", str(out)]) == 2
    assert not out.exists()
    return capsys.readouterr().err


@pytest.mark.parametrize("sep", [";", "\t"])
def test_a_table_separated_by_another_delimiter_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sep: str
) -> None:
    # an export from a German-locale spreadsheet: ';' between fields; the error said only
    # 'it has 1 fields, 0 of them declared column names'
    data = tmp_path / "export.csv"
    pd.read_csv(TABLE1 / "table1.csv").to_csv(data, sep=sep, index=False)
    err = _anonymize_cli(tmp_path, data, capsys)
    assert f"separated by {sep!r}" in err and "expected ','" in err, err
    assert "Janitor" not in err  # no record is echoed


def test_a_misspelt_column_names_the_declared_column_the_header_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "typo.csv"
    pd.read_csv(TABLE1 / "table1.csv").rename(columns={"Surgery": "Surgey"}).to_csv(
        data, index=False
    )
    err = _anonymize_cli(tmp_path, data, capsys)
    assert "'Surgey'" in err and "'Surgery'" in err, err


def test_a_kkm_spec_with_a_sensitive_column_says_what_to_declare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # docs/diagnosis-codes.md listed 'sensitive' among the roles of a kkm spec, and the
    # refusal called the LKC role 'unknown'
    spec = tmp_path / "kkm.toml"
    spec.write_text(
        '[privacy]\nmodel = "kkm"\nk = 2\nm = 1\ndelta = 1.0\nepsilon_suppress = 1.0\n'
        '[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\n'
        '[[attribute]]\nname = "hiv"\nrole = "sensitive"\n'
        '[[attribute]]\nname = "codes"\nrole = "qid"\ntype = "set"\n'
        'taxonomy = "builtin:icd9cm"\n'
    )
    data = tmp_path / "t.csv"
    data.write_text("age,hiv,codes\n30,Positive,401.9\n31,Negative,401.9\n")
    argv = ["anonymize", "--spec", str(spec), "--input", str(data)]
    assert main([*argv, "--output", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert "unknown role" not in err and "'hiv'" in err, err
    assert "role = 'other'" in err and "role = 'identifier'" in err, err
    assert "| sensitive" not in _roles_listed_in_diagnosis_codes_doc()


def _roles_listed_in_diagnosis_codes_doc() -> str:
    doc = Path(__file__).parent.parent.parent / "docs" / "diagnosis-codes.md"
    line = next(x for x in doc.read_text().splitlines() if "# role:" in x)
    return line.split("# role:", 1)[1]


BLOOD = ["O+;O;*", "A+;A;*", "B+;B;*", "AB+;AB;*", "O-;O;*", "A-;A;*", "B-;B;*", "AB-;AB;*"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("A-;AB;*", "line 9: duplicate label (value 'A-')"),  # a leaf under two parents
        ("O;O;*", "line 9: "),  # a row for the inner node O: it was silently ignored
        ("O;*", "line 9: "),
    ],
)
def test_an_arx_hierarchy_row_that_contradicts_another_is_named_by_line(
    tmp_path: Path, extra: str, message: str
) -> None:
    from fedanon.errors import TaxonomyError
    from fedanon.model.taxonomy import parse_taxonomy

    with pytest.raises(TaxonomyError) as err:
        parse_taxonomy("\n".join([*BLOOD, extra]) + "\n", "blood_group.csv")
    assert message in str(err.value), str(err.value)
    assert parse_taxonomy("\n".join(BLOOD) + "\n", "blood_group.csv").n_leaves == 8
