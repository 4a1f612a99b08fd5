"""`fedanon audit`'s column rule (issue 24, item 3), its escaped output (item 11) and the
(k, k^m) message for a table smaller than k (item 11)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest

from fedanon.api import Spec, audit
from fedanon.cli.main import main
from fedanon.errors import DataError

FIG1 = Path(__file__).parent / "kkm_fig1"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def released(table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """fedanon's own release of Table I (Job, Sex, Age, Transfuse, Surgery; it holds)."""
    out = tmp_path / "released.csv"
    spec, data = str(table1_dir / "run.toml"), str(table1_dir / "table1.csv")
    assert main(["anonymize", "--spec", spec, "--input", data, "--output", str(out)]) == 0
    capsys.readouterr()
    return out


def write(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False)
    return path


def audit_cli(
    capsys: pytest.CaptureFixture[str], spec: Path, table: Path, *extra: str
) -> tuple[int, str, str]:
    return run(capsys, "audit", "--spec", str(spec), "--released", str(table), *extra)


def test_identifier_column_is_a_violation(
    table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the paper's Table II keeps ID: its groups satisfy L=2, K=2, C=0.5, the table does not
    report = tmp_path / "a.json"
    spec = table1_dir / "run.toml"
    code, out, _ = audit_cli(capsys, spec, table1_dir / "table2.csv", "--json", str(report))
    assert code == 3
    assert "VIOLATED" in out and "holds" not in out
    assert "identifier column(s) released: 'ID'" in out
    assert "min group size 2 (K = 2)" in out  # the recount is still shown
    doc = json.loads(report.read_text())
    assert doc["ok"] is False
    assert (doc["identifier_columns"], doc["undeclared_columns"]) == (["ID"], [])
    assert (doc["groups_below_k"], doc["groups_above_c"]) == (0, 0)
    # the same table without ID holds
    no_id = write(
        pd.read_csv(table1_dir / "table2.csv", dtype=str).drop(columns=["ID"]), tmp_path / "t2.csv"
    )
    code, out, _ = audit_cli(capsys, spec, no_id)
    assert code == 0 and "LKC-privacy holds" in out and "column(s)" not in out


@pytest.mark.parametrize("extra", ["SSN", "id", "", "Unnamed: 0"])
def test_undeclared_column_is_a_violation(
    table1_dir: Path,
    released: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: str,
) -> None:
    # a raw column nobody declared ("id" is not the declared "ID"; "" and "Unnamed: 0" are
    # what a DataFrame index written along becomes)
    frame = pd.read_csv(released, dtype=str, keep_default_na=False)
    frame.insert(2, extra, [f"x{i}" for i in range(len(frame))])
    code, out, _ = audit_cli(capsys, table1_dir / "run.toml", write(frame, tmp_path / "t.csv"))
    assert code == 3
    assert f"undeclared column(s) released: '{extra}'" in out
    assert "x0" not in out  # a column is named, its cells are never shown


def test_identifier_and_undeclared_in_a_parquet_release(
    table1_dir: Path, released: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pyarrow")
    frame = pd.read_csv(released, dtype=str, keep_default_na=False)
    frame["ID"] = range(len(frame))
    frame["Zip"] = "12345"
    path = tmp_path / "r.parquet"
    frame.to_parquet(path)
    code, out, _ = audit_cli(capsys, table1_dir / "run.toml", path)
    assert code == 3
    assert "identifier column(s) released: 'ID'" in out
    assert "undeclared column(s) released: 'Zip'" in out


def test_column_order_does_not_matter(
    table1_dir: Path, released: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = pd.read_csv(released, dtype=str, keep_default_na=False)
    shuffled = write(frame[list(reversed(frame.columns))], tmp_path / "rev.csv")
    code, out, _ = audit_cli(capsys, table1_dir / "run.toml", shuffled)
    assert code == 0, out


@pytest.mark.parametrize("drop", ["Transfuse", "Surgery", "Age"])
def test_missing_released_column_is_bad_input(
    table1_dir: Path,
    released: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    drop: str,
) -> None:
    # a release of this spec has every non-identifier column: exit 2 naming the missing one
    frame = pd.read_csv(released, dtype=str, keep_default_na=False).drop(columns=[drop])
    code, out, err = audit_cli(capsys, table1_dir / "run.toml", write(frame, tmp_path / "t.csv"))
    assert code == 2 and out == ""
    assert "lacks a column" in err and f"column {drop!r}" in err
    assert 'role = "identifier"' in err  # how to audit a release that leaves it out


def test_duplicate_column_names_are_bad_input(table1_dir: Path, released: Path) -> None:
    spec = Spec.from_toml(table1_dir / "run.toml")
    frame = pd.read_csv(released, dtype=str, keep_default_na=False)
    twice = pd.concat([frame, frame[["Surgery"]]], axis=1)
    with pytest.raises(DataError, match="twice") as err:
        audit(twice, spec)
    assert err.value.column == "Surgery"


def test_python_api_applies_the_column_rule(table1_dir: Path, released: Path) -> None:
    spec = Spec.from_toml(table1_dir / "run.toml")
    frame = pd.read_csv(released, dtype=str, keep_default_na=False)
    assert audit(frame, spec).ok
    frame.insert(0, "ID", range(len(frame)))  # an int column: still the identifier
    frame[7] = "raw"  # a non-string column name is compared as its text
    res = audit(frame, spec)
    assert not res.ok
    assert (res.identifier_columns, res.undeclared_columns) == (("ID",), ("7",))
    assert res.violations == ()  # the groups themselves are fine
    with pytest.raises(DataError, match="lacks a column"):
        audit(frame.drop(columns=["Transfuse"]), spec)


def test_labels_and_column_names_are_printed_escaped(
    table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = list(csv.reader((table1_dir / "table1.csv").open()))
    assert rows[1][1] == "Janitor"  # the only Janitor: a group of size 1, printed
    rows[1][1] = "Jan\x1b[2J\nitor\u202e"
    rows[0].append("Note\x1b]0;owned\x07")
    for r in rows[1:]:
        r.append("n")
    path = tmp_path / "evil.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    code, out, _ = audit_cli(capsys, table1_dir / "run.toml", path)
    assert code == 3
    assert "{Job=Jan\\x1b[2J\\x0aitor\\u202e, Age=34}" in out
    assert "'Note\\x1b]0;owned\\x07'" in out
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in out
    assert all(line.startswith(("LKC", "  ")) for line in out.splitlines())  # no forged line


# (k, k^m)-anonymity


@pytest.fixture
def fig1_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> pd.DataFrame:
    out = tmp_path / "fig1.csv"
    spec, data = str(FIG1 / "run.toml"), str(FIG1 / "figure1a.csv")
    assert main(["anonymize", "--spec", spec, "--input", data, "--output", str(out)]) == 0
    capsys.readouterr()
    return pd.read_csv(out, dtype=str, keep_default_na=False)


@pytest.mark.parametrize(
    ("column", "kind"), [("name", "identifier"), ("id", "identifier"), ("note", "undeclared")]
)
def test_kkm_release_with_a_column_it_must_not_carry(
    fig1_release: pd.DataFrame,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    column: str,
    kind: str,
) -> None:
    frame = fig1_release.copy()
    frame.insert(0, column, [f"v{i}" for i in range(len(frame))])
    path = write(frame, tmp_path / "t.csv")
    report = tmp_path / "a.json"
    code, out, _ = audit_cli(capsys, FIG1 / "run.toml", path, "--json", str(report))
    assert code == 3
    assert "(k, k^m)-anonymity VIOLATED" in out
    assert f"{kind} column(s) released: '{column}'" in out
    doc = json.loads(report.read_text())
    assert doc["ok"] is False and doc["min_support"] == 2  # the groups are fine
    # kkm-audit (the same recount, its own exit code for a violation) applies the rule too
    code, out, _ = run(
        capsys, "kkm-audit", "--spec", str(FIG1 / "run.toml"), "--released", str(path)
    )
    assert code != 0 and "VIOLATED" in out and f"'{column}'" in out


def test_kkm_release_missing_a_column_is_bad_input(
    fig1_release: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(fig1_release.drop(columns=["Gender"]), tmp_path / "t.csv")
    code, out, err = audit_cli(capsys, FIG1 / "run.toml", path)
    assert code == 2 and out == "" and "column 'Gender'" in err
    code, _, err = run(
        capsys, "kkm-audit", "--spec", str(FIG1 / "run.toml"), "--released", str(path)
    )
    assert code == 2 and "column 'Gender'" in err


def kkm_spec(tmp_path: Path, k: int) -> Path:
    text = (FIG1 / "run.toml").read_text().replace("k = 2", f"k = {k}")
    assert f"k = {k}" in text
    for name in ("origin.txt", "gender.csv", "icd9.txt", "table4.toml"):
        (tmp_path / name).write_bytes((FIG1 / name).read_bytes())
    spec = tmp_path / f"k{k}.toml"
    spec.write_text(text)
    return spec


def test_kkm_table_smaller_than_k_is_not_blamed_on_delta(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.csv"
    argv = ["--input", str(FIG1 / "figure1a.csv"), "--output", str(out)]
    code, _, err = run(capsys, "anonymize", "--spec", str(kkm_spec(tmp_path, 9)), *argv)
    assert code == 2 and not out.exists()
    assert "the table has 8 records, fewer than k = 9" in err
    assert "column 'privacy.k'" in err and "delta" not in err
    # 8 records but two utility constraints, none holding 8: all suppressed at Step 2
    code, _, err = run(capsys, "anonymize", "--spec", str(kkm_spec(tmp_path, 8)), *argv)
    assert code == 2 and not out.exists()
    assert "every utility constraint's demographics hold fewer than k = 8" in err
    assert "delta" not in err


# DiffGen: only the columns of a release can be checked


def dp_table1_spec(table1_dir: Path, tmp_path: Path) -> Path:
    """Table I's spec as a DiffGen spec: ID identifier, Surgery sensitive (withheld)."""
    text = (table1_dir / "run.toml").read_text()
    head, rest = text.split("[utility]", 1)
    privacy = '[privacy]\nmodel = "dp"\nepsilon = 1.0\nspecializations = 2\n\n'
    rest = rest.replace('score = "infogain"', 'score = "max"', 1)
    spec = tmp_path / "dp.toml"
    spec.write_text(head.split("[privacy]", 1)[0] + privacy + "[utility]" + rest)
    for name in ("job.txt", "sex.txt", "age.txt"):
        (tmp_path / name).write_bytes((table1_dir / name).read_bytes())
    return spec


def test_dp_release_with_identifier_or_withheld_column_is_a_violation(
    table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = dp_table1_spec(table1_dir, tmp_path)
    table2 = pd.read_csv(table1_dir / "table2.csv", dtype=str)
    report = tmp_path / "a.json"
    code, out, _ = audit_cli(capsys, spec, table1_dir / "table2.csv", "--json", str(report))
    assert code == 3
    assert "identifier column(s) released: 'ID'" in out
    assert "withheld column(s) released: 'Surgery'" in out
    doc = json.loads(report.read_text())
    assert (doc["ok"], doc["identifier_columns"], doc["withheld_columns"]) == (
        False,
        ["ID"],
        ["Surgery"],
    )
    # the columns DiffGen releases (count optional): still not auditable, exit 2
    for frame in (
        table2.drop(columns=["ID", "Surgery"]).assign(count="1"),
        table2.drop(columns=["ID", "Surgery"]),
    ):
        code, out, err = audit_cli(capsys, spec, write(frame, tmp_path / "ok.csv"))
        assert code == 2 and out == ""
        assert "property of the randomized mechanism" in err
        assert "its columns are the ones DiffGen releases" in err
    # a table that is no release of the spec (no Job): exit 2, saying both
    code, _, err = audit_cli(capsys, spec, write(table2.drop(columns=["Job"]), tmp_path / "j.csv"))
    assert code == 2
    assert "property of the randomized mechanism" in err and "column 'Job'" in err


def test_seeded_dp_release_is_read_past_its_comment_line(
    adult_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "dp.csv"
    spec = adult_dir / "dp.toml"
    argv = ["--input", str(adult_dir / "adult.csv.gz"), "--output", str(out), "--seed", "1"]
    assert main(["anonymize", "--spec", str(spec), *argv]) == 0
    assert out.read_text().startswith("# NOT PRIVATE")
    capsys.readouterr()
    code, _, err = audit_cli(capsys, spec, out)
    assert code == 2 and "its columns are the ones DiffGen releases" in err
    lines = out.read_text().splitlines()
    lines[1] += ",hospital-id"
    lines[2:] = [f"{line},h{i}" for i, line in enumerate(lines[2:])]
    out.write_text("\n".join(lines) + "\n")
    code, text, _ = audit_cli(capsys, spec, out)
    assert code == 3 and "undeclared column(s) released: 'hospital-id'" in text
