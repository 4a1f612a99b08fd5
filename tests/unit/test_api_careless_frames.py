"""The Python API on DataFrames a notebook makes carelessly: every problem is an InputError
naming the column (and row), never a pandas TypeError or a codec error from inside."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fedanon
from fedanon.errors import DataError, InputError, SpecError


@pytest.fixture
def spec(table1_dir: Path) -> fedanon.Spec:
    return fedanon.Spec.from_toml(table1_dir / "run.toml")


@pytest.fixture
def frame(table1_dir: Path) -> pd.DataFrame:
    return pd.read_csv(table1_dir / "table1.csv")


def test_a_column_twice_is_named(spec: fedanon.Spec, frame: pd.DataFrame) -> None:
    twice = pd.concat([frame, frame[["Sex"]]], axis=1)  # columns Sex, ..., Sex
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no pandas FutureWarning from factorize either
        with pytest.raises(DataError) as err:
            fedanon.anonymize(twice, spec)
    text = str(err.value)
    assert "<DataFrame> header" in text and "'Sex'" in text and "same name" in text
    assert "value 'Sex'" not in text  # it said: row 0, value not allowed (value 'Sex')


def test_a_numeric_column_label_is_an_undeclared_column(
    spec: fedanon.Spec, frame: pd.DataFrame
) -> None:
    frame[0] = frame["Surgery"]  # a label 0: a CSV's first line holding 0 may be a record
    with pytest.raises(DataError) as err:
        fedanon.anonymize(frame, spec)
    text = str(err.value)
    assert "column '0'" in text and "not declared in the spec" in text
    assert "must be the header" not in text


def test_unhashable_cells_are_text(spec: fedanon.Spec, frame: pd.DataFrame) -> None:
    frame["Age"] = frame["Age"].astype(object)
    frame.at[3, "Age"] = [24]
    with pytest.raises(DataError, match=r"<DataFrame> row 3 \(index 3\), column 'Age'"):
        fedanon.anonymize(frame, spec)  # it was TypeError: unhashable type: 'list'


def test_a_lone_surrogate_names_row_and_column(spec: fedanon.Spec, frame: pd.DataFrame) -> None:
    frame.index = frame.index + 100
    frame.loc[104, "Surgery"] = b"Ur\xffology".decode("utf-8", "surrogateescape")
    with pytest.raises(DataError) as err:
        fedanon.anonymize(frame, spec)
    text = str(err.value)
    assert "<DataFrame> row 4 (index 104), column 'Surgery'" in text
    assert "Unicode" in text


# -- parameters given in code ---------------------------------------------------------------


def test_numpy_scalars_are_numbers(table1_dir: Path, frame: pd.DataFrame) -> None:
    """K from a count, C from a quantile: numpy scalars, refused as 'K must be an integer
    >= 1 (value '2')' before."""
    n = frame.groupby("Sex").size().min()  # numpy.int64
    lkc = fedanon.LKC(L=np.int64(2), K=n // np.int64(2), C=np.float32(0.5), m=np.int64(0))
    assert (lkc.L, lkc.K, lkc.C) == (2, 2, 0.5) and type(lkc.K) is int
    lkc = fedanon.LKC(
        L=np.int64(2), K=np.int64(2), C=np.float64(0.5), sensitive_values=["Transgender"]
    )
    by_toml = fedanon.Spec.from_toml(table1_dir / "run.toml")
    spec = fedanon.Spec(privacy=lkc, attributes=by_toml.attributes, base_dir=table1_dir)
    assert fedanon.anonymize(frame, spec).table.equals(fedanon.anonymize(frame, by_toml).table)
    dp = fedanon.Privacy("dp", epsilon=np.float64(1.0), specializations=np.int64(5))
    assert dp == fedanon.Privacy("dp", epsilon=1.0, specializations=5)
    assert fedanon.Privacy("lkc", L=np.int64(2), K=np.int64(2), C=0.5) == fedanon.Privacy(
        "lkc", L=2, K=2, C=0.5
    )


def test_a_lone_string_is_not_a_list() -> None:
    """tuple("Transgender") was 11 one-letter values ('sensitive_values has duplicates');
    tuple("NY") silently two class values."""
    with pytest.raises(
        SpecError, match=r"sensitive_values must be a list of strings.*\['Transgender'\]"
    ):
        fedanon.LKC(L=2, K=2, C=0.5, sensitive_values="Transgender")
    with pytest.raises(SpecError, match="sensitive_values must be a list of strings"):
        fedanon.LKC(L=2, K=2, C=0.5, sensitive_values=[1])
    with pytest.raises(SpecError, match="'Transfuse': values must be a list of strings"):
        fedanon.Attribute("Transfuse", role="class", values="NY")
    with pytest.raises(SpecError, match="values must be a list of strings"):
        fedanon.Attribute("Transfuse", role="class", values=[0, 1])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": 5, "role": "other"}, "name must be a string"),
        (
            {"name": "Job", "role": "qid", "type": "categorical", "taxonomy": {"ANY": ["a"]}},
            "taxonomy must be a file name",
        ),
        (
            {"name": "Sex", "role": "qid", "type": "categorical", "taxonomy_text": b"ANY\n M\n"},
            "taxonomy_text must be the taxonomy as a str",
        ),
        (
            {"name": "Age", "role": "qid", "type": "numeric", "domain": "1-99", "step": 1},
            "domain must be",
        ),
        (
            {"name": "Age", "role": "qid", "type": "numeric", "domain": (1, 50, 99), "step": 1},
            "domain must be",
        ),
        (
            {"name": "Age", "role": "qid", "type": "numeric", "domain": (1, 99), "step": "1"},
            "step must be a number",
        ),
    ],
)
def test_attribute_field_types(kwargs: dict[str, object], message: str) -> None:
    """Each was a TypeError, AttributeError or ValueError from inside (or silently used)."""
    with pytest.raises(SpecError, match=message):
        fedanon.Attribute(**kwargs)  # type: ignore[arg-type]


# -- the entry points' arguments ------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "NoneType"),
        ([[1, "Janitor"]], "pandas.DataFrame"),
        ({"Job": ["Janitor"]}, "pandas.DataFrame"),
        (np.zeros((2, 2)), "pandas.DataFrame"),
        (pd.Series(["Janitor"], name="Job"), "to_frame"),
    ],
)
def test_data_that_is_no_table(spec: fedanon.Spec, data: object, message: str) -> None:
    """Each raised TypeError: expected str, bytes or os.PathLike object (from Path())."""
    with pytest.raises(DataError, match=message):
        fedanon.anonymize(data, spec)  # type: ignore[arg-type]
    with pytest.raises(DataError, match=message):
        fedanon.audit(data, spec)  # type: ignore[arg-type]


def test_spec_arguments(table1_dir: Path, spec: fedanon.Spec, frame: pd.DataFrame) -> None:
    """Each raised AttributeError or TypeError from inside."""
    path = table1_dir / "run.toml"
    with pytest.raises(SpecError, match=r"fedanon\.Spec: load the file with .*from_toml"):
        fedanon.anonymize(frame, str(path))  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=r"spec must be a fedanon\.Spec"):
        fedanon.audit(frame, None)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="privacy must be"):
        fedanon.Spec(privacy={"L": 2, "K": 2, "C": 0.5}, attributes=spec.attributes)
    with pytest.raises(SpecError, match=r"Attribute\(\*\*item\)"):
        fedanon.Spec(privacy=spec.privacy, attributes=[{"name": "Job", "role": "qid"}])
    with pytest.raises(SpecError, match="attributes must be a list"):
        fedanon.Spec(privacy=spec.privacy, attributes="Job")
    with pytest.raises(SpecError, match=r"Spec\.from_text"):
        fedanon.Spec.from_toml(path.read_text())  # its whole text was quoted as a file name
    with pytest.raises(SpecError, match="as a str"):
        fedanon.Spec.from_text(path.read_bytes())  # type: ignore[arg-type]


def test_audit_limit_and_sep(spec: fedanon.Spec, frame: pd.DataFrame) -> None:
    """limit='3' raised TypeError from numpy's slicing; limit=-1 silently dropped the last
    violation listed."""
    released = fedanon.anonymize(frame, spec).table
    for limit in ("3", -1, 2.5, None):
        with pytest.raises(InputError, match="limit"):
            fedanon.audit(released, spec, limit=limit)  # type: ignore[arg-type]
    for sep in (None, 5, ";;"):
        with pytest.raises(InputError, match="sep"):
            fedanon.audit(released, spec, sep=sep)  # type: ignore[arg-type]
    assert fedanon.audit(released, spec, limit=np.int64(3)).ok


# -- writing a release ----------------------------------------------------------------------


def test_write_never_overwrites_what_the_run_read(table1_dir: Path, tmp_path: Path) -> None:
    """The CLI refuses an output naming its input, spec or taxonomy; Release.write checked
    nothing ([] as the inputs) and replaced the raw table by its release."""
    for name in ("run.toml", "job.txt", "sex.txt", "age.txt", "table1.csv"):
        (tmp_path / name).write_bytes((table1_dir / name).read_bytes())
    spec = fedanon.Spec.from_toml(tmp_path / "run.toml")
    raw = (tmp_path / "table1.csv").read_bytes()
    release = fedanon.anonymize(tmp_path / "table1.csv", spec)
    for target in ("table1.csv", "run.toml", "job.txt"):
        before = (tmp_path / target).read_bytes()
        with pytest.raises(InputError, match="refusing to overwrite"):
            release.write(tmp_path / target)
        with pytest.raises(InputError, match="refusing to overwrite"):
            release.write(tmp_path / "out.csv", tmp_path / target)
        assert (tmp_path / target).read_bytes() == before
    assert (tmp_path / "table1.csv").read_bytes() == raw and not (tmp_path / "out.csv").exists()
    from_frame = fedanon.anonymize(pd.read_csv(tmp_path / "table1.csv"), spec)
    with pytest.raises(InputError, match="refusing to overwrite"):
        from_frame.write(tmp_path / "released.csv", tmp_path / "run.toml")
    with pytest.raises(InputError, match="output must be a file path"):
        release.write(None)  # type: ignore[arg-type]
    release.write(tmp_path / "released.csv", tmp_path / "report.json")
    assert (tmp_path / "released.csv").read_bytes() != raw


def test_seed_and_expand_arguments(examples_dir: Path) -> None:
    """A bad seed was a bare ValueError from the random source (numpy's int64 included)."""
    spec = fedanon.Spec.from_toml(examples_dir / "adult" / "dp.toml")
    data = pd.read_csv(examples_dir / "adult" / "adult.csv.gz", nrows=300)
    for seed in (-1, "7", 1.5, True):
        with pytest.raises(SpecError, match="seed must be an integer >= 0"):
            fedanon.anonymize(data, spec, seed=seed)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="expand must be True or False"):
        fedanon.anonymize(data, spec, seed=7, expand="yes")  # type: ignore[arg-type]
    by_numpy = fedanon.anonymize(data, spec, seed=np.int64(7))  # type: ignore[arg-type]
    assert by_numpy.table.equals(fedanon.anonymize(data, spec, seed=7).table)


def test_a_taxonomy_text_given_as_taxonomy_says_taxonomy_text() -> None:
    text = "ANY\n  Male\n  Female\n"
    with pytest.raises(SpecError, match="taxonomy_text= for the taxonomy's text") as err:
        fedanon.Attribute("Sex", "qid", type="categorical", taxonomy=text)
    assert "Female" not in str(err.value)  # the first line is enough to recognise it
