"""Bad input to the kkm path: clear errors (file, line, column, value, what is valid), exit 2,
nothing written; the federation refuses a kkm spec."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fedanon.cli.main import main
from fedanon.errors import DataError, InputError, SpecError
from fedanon.kkm.io import read_rt
from fedanon.kkm.method import EXPLANATION
from fedanon.kkm.schema import build_kkm_schema
from fedanon.kkm.spec import is_kkm_text, load_kkm_spec, parse_kkm_spec
from fedanon.methods.registry import require_federated, require_federated_text

FIG1 = Path(__file__).resolve().parent / "kkm_fig1"


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    for f in FIG1.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def _read(work: Path, csv_text: str) -> None:
    (work / "in.csv").write_text(csv_text)
    spec, reader = load_kkm_spec(work / "run.toml")
    read_rt(build_kkm_schema(spec, reader), work / "in.csv")


HEADER = "id,name,Age,Origin,Gender,Disease\n"


def test_unknown_code_names_file_line_column_code(work: Path) -> None:
    with pytest.raises(DataError) as e:
        _read(work, HEADER + "0,a,19,France,Male,493.2\n1,b,22,Greece,Male,493.2|999.9\n")
    err = e.value
    assert (err.line, err.column, err.value) == (3, "Disease", "999.9")
    assert err.file is not None and err.file.endswith("in.csv")
    assert "unknown code" in str(err) and err.exit_code == 2


def test_physical_line_after_a_quoted_multiline_cell(work: Path) -> None:
    text = HEADER + '0,"two\nlines",19,France,Male,493.2\n1,b,22,Greece,Male,494.1||053.20\n'
    with pytest.raises(DataError) as e:
        _read(work, text)
    assert e.value.line == 4 and e.value.value == "" and "empty code" in str(e.value)


def test_internal_node_is_not_a_code(work: Path) -> None:
    with pytest.raises(DataError, match="not a leaf") as e:
        _read(work, HEADER + "0,a,19,France,Male,493\n")
    assert e.value.value == "493"


def test_bad_demographics(work: Path) -> None:
    with pytest.raises(DataError) as e:
        _read(work, HEADER + "0,a,19,Atlantis,Male,493.2\n")
    assert (e.value.line, e.value.column, e.value.value) == (2, "Origin", "Atlantis")
    with pytest.raises(DataError) as e:
        _read(work, HEADER + "0,a,nineteen,France,Male,493.2\n")
    assert (e.value.column, e.value.value) == ("Age", "nineteen")


@pytest.mark.parametrize("age", ["1_9", "\uff11\uff19", "\u0661\u0669"])
def test_python_only_number_syntax_is_not_a_number(work: Path, age: str) -> None:
    """As the other readers: a number as a CSV writes it (fedanon.io.encoders.csv_number)."""
    with pytest.raises(DataError, match="not a number") as e:
        _read(work, HEADER + f"0,a,{age},France,Male,493.2\n")
    assert (e.value.line, e.value.column, e.value.value) == (2, "Age", age)


def test_record_outside_every_constraint(work: Path) -> None:
    from fedanon.kkm.artuc import build_problem

    (work / "in.csv").write_text(HEADER + "0,a,60,France,Male,493.2\n")
    spec, reader = load_kkm_spec(work / "run.toml")
    schema = build_kkm_schema(spec, reader)
    with pytest.raises(DataError, match="outside the demographics") as e:
        build_problem(schema, read_rt(schema, work / "in.csv"))
    assert e.value.line == 2


def test_overlapping_constraints(work: Path) -> None:
    text = (
        work / "table4.toml"
    ).read_text() + '\n[[constraint]]\nAge = [40, 60]\nDisease = ["494.1"]\n'
    (work / "table4.toml").write_text(text)
    spec, reader = load_kkm_spec(work / "run.toml")
    with pytest.raises(InputError, match="overlap") as e:
        build_kkm_schema(spec, reader)
    assert e.value.line == 5  # the fifth [[constraint]]


def test_overlapping_code_sets(work: Path) -> None:
    text = (work / "table4.toml").read_text().replace('["494.1"]', '["494.1", "458.1"]')
    (work / "table4.toml").write_text(text)
    spec, reader = load_kkm_spec(work / "run.toml")
    with pytest.raises(InputError, match="overlap on codes"):
        build_kkm_schema(spec, reader)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (("\nk = 2", "\nk = 0"), "k must be"),
        (("\nm = 2", "\nm = -1"), "m must be"),
        (("\ndelta = 0.6", "\ndelta = 1.5"), "delta must be"),
        (("\nepsilon_suppress = 0.1", "\nepsilon_suppress = -0.1"), "epsilon_suppress"),
        (('model = "kkm"', 'model = "kkm"\nL = 3'), "unknown key"),
        (('role = "set"', 'role = "qid"'), "needs a type|exactly one"),
        (('taxonomy = "icd9.txt"', 'taxonomy = "builtin:icd10"'), "built-in"),
    ],
)
def test_spec_errors(work: Path, edit: tuple[str, str], match: str) -> None:
    text = (work / "run.toml").read_text().replace(*edit, 1)
    (work / "run.toml").write_text(text)
    with pytest.raises(SpecError, match=match):
        spec, reader = load_kkm_spec(work / "run.toml")
        build_kkm_schema(spec, reader)


def test_cli_bad_input_exit_2_and_nothing_written(work: Path, capsys) -> None:
    (work / "in.csv").write_text(HEADER + "0,a,19,France,Male,493.2|999.9\n")
    out = work / "out.csv"
    rc = main(
        [
            "anonymize",
            "--spec",
            str(work / "run.toml"),
            "--input",
            str(work / "in.csv"),
            "--output",
            str(out),
        ]
    )
    assert rc == 2 and not out.exists()
    assert "999.9" in capsys.readouterr().err


def test_cli_refuses_to_overwrite_input(work: Path) -> None:
    src = work / "figure1a.csv"
    before = src.read_bytes()
    rc = main(
        ["anonymize", "--spec", str(work / "run.toml"), "--input", str(src), "--output", str(src)]
    )
    assert rc == 2 and src.read_bytes() == before


def test_requirement_not_met_is_exit_2(work: Path, capsys) -> None:
    text = (work / "run.toml").read_text().replace("\ndelta = 0.6", "\ndelta = 0.1")
    (work / "run.toml").write_text(text)
    out = work / "out.csv"
    rc = main(
        [
            "anonymize",
            "--spec",
            str(work / "run.toml"),
            "--input",
            str(work / "figure1a.csv"),
            "--output",
            str(out),
        ]
    )
    assert rc == 2 and not out.exists()
    assert "Step 16" in capsys.readouterr().err


def test_federation_refuses_kkm(work: Path) -> None:
    with pytest.raises(SpecError) as e:
        require_federated(work / "run.toml")
    assert e.value.exit_code == 2 and "does not decompose" in str(e.value)
    assert "secure sum" in EXPLANATION
    require_federated_text("[privacy]\nL = 2\nK = 5\nC = 0.5\n", "lkc.toml")  # passes
    assert not is_kkm_text("not toml [")
    require_federated(work / "missing.toml")  # unreadable: the caller's reader reports it


def test_parse_kkm_spec_needs_model() -> None:
    with pytest.raises(SpecError, match="not a kkm spec"):
        parse_kkm_spec("[privacy]\nk = 2\n")
