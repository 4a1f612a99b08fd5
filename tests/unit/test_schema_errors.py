"""A Parquet file's (or a query's) columns are a schema, not a first line: errors about them
name no line, and a NULL's hint fits a file as well as a query."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedanon.errors import DataError
from fedanon.io.csvread import check_header
from fedanon.io.sources.parquet import read_parquet

EXAMPLES = Path(__file__).parent.parent.parent / "examples"


def _parquet(path: Path, table: dict[str, list[object]]) -> Path:
    pq.write_table(pa.table(table), path)
    return path


def test_an_undeclared_parquet_column_names_no_line(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "t.parquet", {"age": [30, 40], "admitted": ["a", "b"]})
    with pytest.raises(DataError) as err:
        read_parquet(path, ["age"], None)
    assert err.value.column == "admitted" and err.value.line is None
    assert "line" not in str(err.value)


def test_parquet_columns_mostly_unknown_are_not_called_a_first_line(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "t.parquet", {"x": [1], "y": [2], "age": [3]})
    with pytest.raises(DataError, match="column is not declared") as err:
        read_parquet(path, ["age", "sex"], None)
    assert "first line" not in str(err.value) and err.value.line is None


def test_a_missing_parquet_column_names_no_line(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="declared column 'sex' is missing") as err:
        check_header(["age"], ["age", "sex"], "t.parquet", schema=True)
    assert err.value.line is None
    with pytest.raises(DataError) as csv_err:  # a CSV's header is its first line
        check_header(["age"], ["age", "sex"], "t.csv")
    assert csv_err.value.line == 1


def test_a_null_in_a_parquet_file_is_not_told_to_fix_a_query(tmp_path: Path) -> None:
    from fedanon import Spec, anonymize

    spec = Spec.from_toml(EXAMPLES / "table1" / "run.toml")
    frame = pd.read_csv(EXAMPLES / "table1" / "table1.csv")
    frame["Age"] = frame["Age"].astype("float64")
    frame.loc[3, "Age"] = None
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    with pytest.raises(DataError, match="missing value") as err:
        anonymize(path, spec)
    assert "fill the file's NULLs" in str(err.value)


def test_an_optional_column_is_not_offered_as_the_one_a_typo_meant() -> None:
    # a hospital's table without the (optional) provider column and with a misspelt 'age':
    # the hint names 'age', not the provider column the table may lack
    with pytest.raises(DataError, match="the spec declares 'age', which the header lacks"):
        check_header(["agee", "sex"], ["hospital", "age", "sex"], "t.csv", optional=["hospital"])
