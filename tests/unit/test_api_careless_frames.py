"""The Python API on DataFrames a notebook makes carelessly: every problem is an InputError
naming the column (and row), never a pandas TypeError or a codec error from inside."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

import fedanon
from fedanon.errors import DataError


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
