"""Issue 10: Parquet in and out, identifier columns never decoded, physical lines at scale,
the line map against the csv module, NULLs and types of typed sources, database URLs."""

from __future__ import annotations

import csv
import io
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from fedanon.errors import ConfigError, DataError
from fedanon.io import csvarrow, csvread, table
from fedanon.io.lines import LineMap
from fedanon.io.sources import PgSource, parse_source
from fedanon.model.spec import load_spec, parse_spec

HERE = Path(__file__).parent


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedanon.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def _adult_parquet(adult_csv: Path, out: Path) -> None:
    """Adult as Parquet with typed columns (integers stay integers)."""
    t = pacsv.read_csv(adult_csv, convert_options=pacsv.ConvertOptions(strings_can_be_null=False))
    assert pa.types.is_integer(t.schema.field("age").type)
    pq.write_table(t, out)


def _anonymize(spec: Path, src: Path, out: Path) -> None:
    proc = _cli("anonymize", "--spec", str(spec), "--input", str(src), "--output", str(out))
    assert proc.returncode == 0, proc.stderr


def _rows(path: Path) -> list[list[str]]:
    if path.suffix == ".parquet":
        t = pq.read_table(path)
        cols = [t.column(n).cast(pa.string()).to_pylist() for n in t.column_names]
        return [list(t.column_names), *map(list, zip(*cols, strict=True))]
    with path.open(newline="") as fh:
        return list(csv.reader(fh))


# Parquet -----------------------------------------------------------------------------------


@pytest.mark.parametrize("spec_name", ["run.toml", "run-discernibility.toml"])
def test_parquet_in_and_out_release_what_the_csv_path_releases(
    adult_dir: Path, adult_csv: Path, tmp_path: Path, spec_name: str
) -> None:
    spec = adult_dir / spec_name
    data = tmp_path / "adult.parquet"
    _adult_parquet(adult_csv, data)
    _anonymize(spec, adult_csv, tmp_path / "csv.csv")
    _anonymize(spec, data, tmp_path / "pq.csv")
    assert (tmp_path / "pq.csv").read_bytes() == (tmp_path / "csv.csv").read_bytes()
    _anonymize(spec, data, tmp_path / "pq.parquet")
    assert _rows(tmp_path / "pq.parquet") == _rows(tmp_path / "csv.csv")
    assert pq.read_metadata(tmp_path / "pq.parquet").num_rows == 45223


def test_parquet_null_and_type_errors_name_row_and_column(adult_dir: Path, tmp_path: Path) -> None:
    spec, reader = load_spec(adult_dir / "run.toml")
    schema = table.build_schema(spec, reader)
    t = pacsv.read_csv(adult_dir / "adult.csv.gz")
    ages = t.column("age").to_pylist()
    ages[41] = None
    bad = t.set_column(0, "age", pa.array(ages, pa.int64()))
    pq.write_table(bad, tmp_path / "null.parquet")
    with pytest.raises(DataError) as err:
        table.encode_table(schema, tmp_path / "null.parquet")
    assert err.value.column == "age" and "row 42" in str(err.value) and "NULL" in str(err.value)
    wc = t.column("workclass").to_pylist()
    as_float = t.set_column(1, "workclass", pa.array([1.5] * len(wc)))
    pq.write_table(as_float, tmp_path / "float.parquet")
    with pytest.raises(DataError) as err:
        table.encode_table(schema, tmp_path / "float.parquet")
    assert err.value.column == "workclass" and "type double" in str(err.value)


def test_parquet_identifier_column_of_unreadable_type_is_never_read(tmp_path: Path) -> None:
    spec = parse_spec(
        '[privacy]\nL = 1\nK = 2\nC = 1\n[utility]\nscore = "discernibility"\n'
        '[[attribute]]\nname = "when"\nrole = "identifier"\n'
        '[[attribute]]\nname = "q"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 10]\n'
    )
    schema = table.build_schema(spec, lambda _: "")
    import datetime as dt

    t = pa.table(
        {
            "when": pa.array([dt.date(2020, 1, i + 1) for i in range(6)]),  # no reader for dates
            "q": pa.array([1, 2, 3, 4, 5, 6], pa.int32()),
        }
    )
    pq.write_table(t, tmp_path / "t.parquet")
    enc = table.encode_table(schema, tmp_path / "t.parquet")
    assert enc.qid_leaves.tolist() == [[1, 2, 3, 4, 5, 6]] and enc.qid_leaves.dtype == np.uint8


# identifiers are never decoded ---------------------------------------------------------------

ID_SPEC = """
[privacy]
L = 1
K = 2
C = 1
[utility]
score = "discernibility"
[[attribute]]
name = "mrn"
role = "identifier"
[[attribute]]
name = "age"
role = "qid"
type = "numeric"
domain = [0, 100]
[[attribute]]
name = "note"
role = "identifier"
"""


@pytest.mark.parametrize("threshold", [1 << 40, 0])
def test_identifier_columns_are_never_decoded(
    tmp_path: Path, threshold: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An identifier cell that is not UTF-8 would fail to parse as text: the run never
    decodes it, in either reader; the same byte in a QID column is an error at its line."""
    monkeypatch.setattr(csvread, "SMALL_INPUT_BYTES", threshold)
    schema = table.build_schema(parse_spec(ID_SPEC), lambda _: "")
    body = b"".join(b"P%d\xff\xfe,%d,x\xc3\n" % (i, 20 + i % 50) for i in range(3000))
    f = tmp_path / "t.csv"
    f.write_bytes(b"mrn,age,note\n" + body)
    enc = table.encode_table(schema, f)
    assert enc.n_rows == 3000 and enc.qid_leaves[0, :3].tolist() == [20, 21, 22]
    assert list(enc.kept) == [] and enc.columns == ("mrn", "age", "note")
    f.write_bytes(b"mrn,age,note\n" + body + b"P1,3\xff,x\n")
    with pytest.raises(DataError) as err:
        table.encode_table(schema, f)
    assert err.value.line == 3002 and err.value.column == "age" and "UTF-8" in str(err.value)


# physical line numbers at scale ------------------------------------------------------------


def test_bad_cell_at_physical_line_5_000_001(tmp_path: Path) -> None:
    """Five million lines, blank lines and a quoted two-line field early on: the error
    names physical line 5,000,001 (its record is number 4,999,997)."""
    spec = parse_spec(
        '[privacy]\nL = 1\nK = 2\nC = 1\n[utility]\nscore = "discernibility"\n'
        '[[attribute]]\nname = "q"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 10]\n'
        '[[attribute]]\nname = "t"\nrole = "other"\n'
    )
    schema = table.build_schema(spec, lambda _: "")
    head = b'q,t\n1,a\n\n2,"two\nlines"\n\n'  # lines 1-6: 2 records on 6 lines
    n_plain = 5_000_001 - 6 - 1  # lines 7 .. 5,000,000
    f = tmp_path / "big.csv"
    with f.open("wb") as fh:
        fh.write(head)
        fh.write(b"3,b\n" * n_plain)
        fh.write(b"11,c\n")  # line 5,000,001: outside the domain
        fh.write(b"4,d\n")
    with pytest.raises(DataError) as err:
        table.encode_table(schema, f)
    assert err.value.line == 5_000_001, str(err.value)
    assert err.value.column == "q" and err.value.value == "11"


def test_ragged_row_deep_in_a_large_file_is_located(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(csvarrow, "BLOCK_BYTES", 1 << 16)
    f = tmp_path / "r.csv"
    body = b"1,2\n" * 200_000
    f.write_bytes(b"a,b\n\n" + body + b'3,"x\ny",9\n' + b"1,2\n" * 10)
    with pytest.raises(DataError) as err:
        csvread.read_columns(f)
    assert err.value.line == 200_003 and "3 fields" in str(err.value)
    assert "x" not in str(err.value).split(":", 1)[1].replace("expected", "")


# the line map ------------------------------------------------------------------------------


def _csv_module_starts(text: str) -> list[int]:
    reader = csv.reader(io.StringIO(text))
    next(reader)
    prev = reader.line_num
    starts = []
    for row in reader:
        start, prev = prev + 1, reader.line_num
        if row:
            starts.append(start)
    return starts


def test_line_map_agrees_with_the_csv_module_over_any_block_split() -> None:
    rng = random.Random(10)
    cells = ["a", "b c", '"q,1"', '"x\ny"', '"z""w"', "", '"\n"', "7", '""']
    for _ in range(1500):
        eol = rng.choice(["\n", "\r\n"])
        lines = ["h1,h2"]
        for _ in range(rng.randint(0, 12)):
            k = rng.random()
            if k < 0.15:
                lines.append("")
            elif k < 0.2 and eol == "\n":
                lines.append("\r")
            else:
                lines.append(",".join(rng.choice(cells) for _ in range(2)))
        text = eol.join(lines) + (eol if rng.random() < 0.7 else "")
        data = text.encode()
        lm = LineMap()
        i = 0
        while i < len(data):
            n = rng.randint(1, 7)
            lm.feed(data[i : i + n])
            i += n
        lm.finish()
        expected = _csv_module_starts(text)
        assert [lm.line_of(r) for r in range(lm.records)] == expected, repr(text)
        assert lm.exact


def test_line_map_flags_lone_carriage_returns() -> None:
    lm = LineMap()
    lm.feed(b"a,b\n1,2\r3,4\n")
    assert not lm.exact


# sources named on the command line and in party.toml ---------------------------------------


def test_database_url_with_a_password_is_refused_without_echoing_it() -> None:
    for url in (
        "postgresql://fedanon:s3cret-pw@db.example/ehr",
        "postgresql://fedanon@db.example/ehr?password=s3cret-pw",
    ):
        with pytest.raises(ConfigError) as err:
            PgSource(url, query="SELECT 1")
        assert "s3cret" not in str(err.value) and "PGPASSWORD" in str(err.value)


def test_database_source_needs_one_of_query_and_table() -> None:
    url = "postgresql://fedanon@db.example/ehr"
    with pytest.raises(ConfigError):
        PgSource(url)
    with pytest.raises(ConfigError):
        PgSource(url, query="SELECT 1", table="t")
    with pytest.raises(ConfigError):
        PgSource(url, table="t; DROP TABLE x")
    assert parse_source(url, table="ehr.encounters") == PgSource(url, None, "ehr.encounters")
    with pytest.raises(ConfigError):
        parse_source("data.csv", query="SELECT 1")


def test_party_config_data_sources(tmp_path: Path) -> None:
    from fedanon.party.config import parse_party_config

    base = (
        '[party]\nname = "alice"\nlisten = "127.0.0.1:7443"\n{data}\n'
        '[tls]\nca = "ca.pem"\ncert = "a.pem"\nkey = "a.key"\n'
        "[policy]\nmin_K = 2\nmin_L = 1\nmax_C = 1\n"
    )
    cfg = parse_party_config(base.format(data='data = "x.parquet"'), "p.toml", tmp_path)
    assert cfg.data == tmp_path / "x.parquet"
    text = base.format(
        data='data = "postgresql://fedanon@db.hospital.local/ehr"\n'
        'query = "SELECT * FROM encounters"'
    )
    cfg = parse_party_config(text, "p.toml", tmp_path)
    assert isinstance(cfg.data, PgSource) and cfg.data.query == "SELECT * FROM encounters"
    bad = base.format(data='data = "postgresql://fedanon:pw@db/ehr"\ntable = "encounters"')
    with pytest.raises(ConfigError) as err:
        parse_party_config(bad, "p.toml", tmp_path)
    assert "p.toml" in str(err.value) and ":pw@" not in str(err.value)


def test_bad_last_line_without_newline_is_located(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(csvread, "SMALL_INPUT_BYTES", 0)
    schema = table.build_schema(parse_spec(ID_SPEC), lambda _: "")
    f = tmp_path / "t.csv"
    f.write_bytes(b"mrn,age,note\n" + b"x,30,y\n" * 70_000 + b"\nx,300,y")
    with pytest.raises(DataError) as err:
        table.encode_table(schema, f)
    assert err.value.line == 70_003 and err.value.column == "age"
