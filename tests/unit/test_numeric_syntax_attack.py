"""Review of 1d9318c as a careless user of `fedanon anonymize` / `fedanon federate`: a numeric
QID's spellings as the encoder reads them (a small CSV: the csv module; > 64 KB: Arrow;
Parquet, text or typed) and as federate's same-table check reads them (content_digest with a
spec).

Found: a Parquet column typed as a number reached the encoder through Arrow's cast to float64,
not as the number its text says (how the same-table check and a CSV copy read it):

* an integer beyond 2**53 (a sentinel such as INT64_MIN, or 9007199254740993) made the
  checked cast raise: a traceback and exit 1 instead of "number outside the declared domain"
  and exit 2 (a CSV with the same digits is refused cleanly);
* a float32 ``44.6`` was 44.599998... to the encoder, and a decimal ``58.3`` (a SQL
  NUMERIC(4,1)) 58.300000000000004 (Arrow's decimal cast is not correctly rounded), while
  the same-table check and a CSV of the same values read 44.6 and 58.3: with a 0.1 step the
  Parquet table and its CSV copy fell in other bins (other released bytes), and a CSV copy
  written with the cast's digits (``44.599998474121094``, pandas after an upcast) was the same
  records to the run but another table to the check (federate let it through).

Tried and consistent (the same codes on the three paths as ``34``, the same digest as ``34``):
34.0, 034, 0034.000, +34, 3.4e1, 3.4E+01, 340e-1, 34., .34e2, +.34e2, 34e0,
34.000000000000001, 500 leading zeros, 500 trailing decimals, blanks (space, tab, NBSP,
U+2003, U+3000) around the value, Parquet int64 / float64 / float32 / decimal columns.
Refused with file, line (a row for Parquet), column and value, exit 2, on every path: 1E5,
1e+05, -0, 1.0e-3, NaN, inf, -inf (outside the domain), 3_4, full-width and Arabic-Indic
digits, a BOM or zero-width space inside the cell, 34,0 (a decimal comma)."""

from __future__ import annotations

import decimal
from pathlib import Path
from typing import Any

import pytest
from clihelp import anonymize_table1 as _anonymize

from fedanon.apispec import Spec
from fedanon.io.sametable import Compared, content_digest, loaded_digest
from fedanon.io.table import encode_table
from fedanon.methods import registry

TABLE1 = Path(__file__).parent.parent.parent / "examples" / "table1"
BIG = 400  # copies of Table 1's rows: > 64 KB, Arrow's CSV reader


def _schema(spec: Path) -> tuple[Any, Any]:
    one = Spec.from_toml(spec)
    run = one.run_spec
    return run, registry.get(run.privacy.model).schema(run, one.taxonomy_reader())


RUN, SCHEMA = _schema(TABLE1 / "run.toml")


def _rows(first_age: str | None = None) -> tuple[list[str], list[list[str]]]:
    lines = (TABLE1 / "table1.csv").read_text().splitlines()
    header, rows = lines[0].split(","), [ln.split(",") for ln in lines[1:]]
    if first_age is not None:
        rows[0][header.index("Age")] = first_age
    return header, rows


def _csv(path: Path, first_age: str | None = None, copies: int = 1) -> Path:
    header, rows = _rows(first_age)
    rows = [[f'"{c}"' if "," in c else c for c in r] for r in rows]
    body = [",".join(r) for r in rows * copies]
    path.write_text("\n".join([",".join(header), *body]) + "\n")
    return path


def _parquet(path: Path, first_age: str | None = None, age_type: Any = None) -> Path:
    """Table 1 as Parquet: every column text, Age typed ``age_type`` (None: text)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    header, rows = _rows(first_age)
    cols = {h: pa.array([r[j] for r in rows], pa.string()) for j, h in enumerate(header)}
    if age_type is not None:
        ages = [r[header.index("Age")] for r in rows]
        if pa.types.is_decimal(age_type):
            cols["Age"] = pa.array([decimal.Decimal(v) for v in ages], age_type)
        elif pa.types.is_integer(age_type):
            cols["Age"] = pa.array([int(v) for v in ages], age_type)
        else:
            cols["Age"] = pa.array([float(v) for v in ages], age_type)
    pq.write_table(pa.table(cols), path)
    return path


def _tenths_spec(tmp: Path) -> Path:
    """Table 1's spec with Age binned by 0.1 (no taxonomy)."""
    for f in TABLE1.iterdir():
        if f.suffix in (".txt", ".toml"):
            (tmp / f.name).write_text(f.read_text())
    spec = tmp / "run.toml"
    old = 'domain = [1, 99]\ntaxonomy = "age.txt"'
    assert old in spec.read_text()
    spec.write_text(spec.read_text().replace(old, "domain = [1, 99]\nstep = 0.1"))
    return spec


# -- the findings -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [2**53 + 1, -(2**63)])
def test_a_huge_typed_integer_is_outside_the_domain_not_a_crash(tmp_path: Path, value: int) -> None:
    import pyarrow as pa

    out = tmp_path / "out.csv"
    proc = _anonymize(_parquet(tmp_path / "t.parquet", str(value), pa.int64()), out)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "t.parquet, column 'Age': row 1: number outside the declared domain" in proc.stderr
    assert not out.exists()
    # the same digits in a CSV: the same refusal
    proc = _anonymize(_csv(tmp_path / "t.csv", str(value)), out)
    assert proc.returncode == 2, proc.stderr
    assert "t.csv, line 2, column 'Age': number outside the declared domain" in proc.stderr
    assert f"(value '{value}')" in proc.stderr


def _typed(kind: str) -> Any:
    import pyarrow as pa

    return {"float32": pa.float32(), "decimal": pa.decimal128(4, 1)}[kind]


@pytest.mark.parametrize(
    ("kind", "age", "cast_digits"),
    [
        ("float32", "44.6", "44.599998474121094"),
        ("float32", "34.1", "34.099998474121094"),
        ("decimal", "58.3", "58.300000000000004"),  # NUMERIC(4,1): Arrow's cast, one ulp up
        ("decimal", "45.3", "45.300000000000004"),
    ],
)
def test_a_typed_number_is_read_as_its_text(
    tmp_path: Path, kind: str, age: str, cast_digits: str
) -> None:
    """The run reads a typed Parquet number as the number its text says, as the same-table
    check does: the Parquet table and its CSV copy are the same records to both (the same
    codes, so the same released bytes), and a CSV written with the bare cast's digits is
    another table to both."""
    import pyarrow as pa

    typ = _typed(kind)
    arr = pa.array([decimal.Decimal(age) if kind == "decimal" else float(age)], typ)
    assert repr(arr.cast(pa.float64(), safe=False)[0].as_py()) == cast_digits  # the old read
    run, schema = _schema(_tenths_spec(tmp_path))
    on = Compared.of_spec(run)
    typed = _parquet(tmp_path / "typed.parquet", age, typ)
    text = _csv(tmp_path / "text.csv", age)
    digits = _csv(tmp_path / "digits.csv", cast_digits)
    assert content_digest(typed, on) == content_digest(text, on)
    assert content_digest(typed, on) != content_digest(digits, on)
    loaded = loaded_digest(encode_table(schema, typed, memory_budget="off"))
    assert loaded == loaded_digest(encode_table(schema, text, memory_budget="off"))
    # in the run's codes the cast's digits differ only when they fall into another bin of
    # 0.1: 44.599998 lies in [44.5-44.6) below 44.6, while 58.300000000000004 lies in
    # [58.3-58.4) with 58.3 (which (58.3 - 1) / 0.1 = 572.999... once put in [58.2-58.3))
    other_bin = kind == "float32"
    assert (loaded != loaded_digest(encode_table(schema, digits, memory_budget="off"))) == other_bin


# -- tried and consistent -----------------------------------------------------------------------

SAME_AS_34 = [
    "34.0",
    "034",
    "0034.000",
    "+34",
    "3.4e1",
    "3.4E+01",
    "340e-1",
    "34.",
    ".34e2",
    "+.34e2",
    "34e0",
    "34.000000000000001",
    "0" * 500 + "34",
    "34." + "0" * 500,
    " 34 ",
    "\t34",
    "\u00a034",
    "34\u2003",
    "\u300034",
]


def _views(path: Path) -> tuple[str, str]:
    """(the encoder's codes, the same-table check's digest) of a table."""
    enc = loaded_digest(encode_table(SCHEMA, path, memory_budget="off"))
    return enc, content_digest(path, Compared.of_spec(RUN))


@pytest.mark.parametrize("spell", SAME_AS_34)
def test_spellings_of_34_are_34_on_every_path(tmp_path: Path, spell: str) -> None:
    for make in (
        lambda p, a: _csv(p / "small.csv", a),
        lambda p, a: _csv(p / "big.csv", a, BIG),
        lambda p, a: _parquet(p / "text.parquet", a),
    ):
        assert _views(make(tmp_path, spell)) == _views(make(tmp_path, "34")), make


@pytest.mark.parametrize("typ", ["int64", "float64", "float32", "decimal"])
def test_typed_parquet_ages_are_the_csv_ages(tmp_path: Path, typ: str) -> None:
    import pyarrow as pa

    t = {"int64": pa.int64(), "float64": pa.float64(), "float32": pa.float32()}.get(typ)
    typed = _parquet(tmp_path / "t.parquet", None, t if t is not None else _typed("decimal"))
    assert _views(typed) == _views(TABLE1 / "table1.csv")


def test_big_csv_spelling_releases_the_same_bytes(tmp_path: Path) -> None:
    plain, other = tmp_path / "plain.csv", tmp_path / "other.csv"
    assert _anonymize(_csv(tmp_path / "a.csv", "34", BIG), plain).returncode == 0
    proc = _anonymize(_csv(tmp_path / "b.csv", "+3.40E+01 ", BIG), other)
    assert proc.returncode == 0, proc.stderr
    assert other.read_bytes() == plain.read_bytes()


@pytest.mark.parametrize(
    ("spell", "why"),
    [
        ("1e+05", "number outside the declared domain"),
        ("NaN", "number outside the declared domain"),
        ("-0", "number outside the declared domain"),
        ("\ufeff34", "not a number"),
        ("34\u200b", "not a number"),
        ("34,0", "not a number"),
    ],
)
def test_refused_spellings_name_file_line_column_value(
    tmp_path: Path, spell: str, why: str
) -> None:
    for data, where in (
        (_csv(tmp_path / "small.csv", spell), "small.csv, line 2, column 'Age': "),
        (_csv(tmp_path / "big.csv", spell, BIG), "big.csv, line 2, column 'Age': "),
        (_parquet(tmp_path / "t.parquet", spell), "t.parquet, column 'Age': row 1: "),
    ):
        out = tmp_path / "out.csv"
        proc = _anonymize(data, out)
        assert proc.returncode == 2, proc.stderr
        assert f"{where}{why} (value {spell!r})" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and not out.exists()
