"""Defects of issue 8, section 2, found by adversarial testing of the input side: pipes read
twice, header-less data, sensitive values, gzip, BOMs, spec types and line numbers."""

from __future__ import annotations

import csv
import gzip
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fedanon.errors import DataError, SpecError
from fedanon.io import csvread, table
from fedanon.model.spec import load_spec, parse_spec
from fedanon.model.taxonomy import parse_arx, parse_native, parse_taxonomy

BOM = "\ufeff"


def _run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedanon.cli", *args],
        input=None if stdin is None else stdin.decode(),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.fixture()
def case(table1_dir: Path, tmp_path: Path) -> Path:
    for f in table1_dir.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def _anonymize(
    case: Path, data: str = "table1.csv", *extra: str
) -> subprocess.CompletedProcess[str]:
    return _run(
        "anonymize",
        "--spec",
        str(case / "run.toml"),
        "--input",
        str(case / data) if not data.startswith("/") else data,
        "--output",
        str(case / "out.csv"),
        "--quiet",
        *extra,
    )


def _big_table(case: Path, copies: int) -> bytes:
    """table1's records repeated: large enough to exceed any pipe or read buffer."""
    lines = (case / "table1.csv").read_text().splitlines()
    body = [f"{i},{line.split(',', 1)[1]}" for i in range(copies) for line in lines[1:]]
    return ("\n".join([lines[0], *body]) + "\n").encode()


def _records(path: Path) -> int:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="", encoding="utf-8") as fh:
        return sum(1 for r in csv.reader(fh) if r) - 1


# 1. an input that can be read only once (pipe, /dev/stdin, FIFO) ------------------------------


def test_stdin_input_releases_every_record(case: Path) -> None:
    data = _big_table(case, 900)  # 9,900 records, ~250 KB
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedanon.cli",
            "anonymize",
            "--spec",
            str(case / "run.toml"),
            "--input",
            "/dev/stdin",
            "--output",
            str(case / "out.csv"),
            "--quiet",
        ],
        input=data,
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert _records(case / "out.csv") == 9900


@pytest.mark.parametrize("threshold", [1 << 40, 0])
def test_fifo_is_read_exactly_once(
    case: Path, tmp_path: Path, threshold: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(csvread, "SMALL_INPUT_BYTES", threshold)
    data = _big_table(case, 400)
    fifo = tmp_path / "in.csv"
    os.mkfifo(fifo)

    def feed() -> None:
        with fifo.open("wb") as fh:
            fh.write(data)

    got: list[tuple[list[str], dict[str, table.Column]]] = []
    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    reader = threading.Thread(target=lambda: got.append(table.read_columns(fifo)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():  # blocked opening the FIFO a second time: release it, then fail
        with fifo.open("wb"):
            pass
        reader.join(timeout=10)
        pytest.fail("the FIFO was opened a second time")
    writer.join(timeout=10)
    header, cols = got[0]
    assert header[0] == "ID" and cols["ID"].codes.size == 4400


# 5. a data file without its header line ---------------------------------------------------


def test_missing_header_is_detected_without_echoing_data(case: Path) -> None:
    lines = (case / "table1.csv").read_text().splitlines()
    (case / "nohead.csv").write_text("\n".join(lines[1:]) + "\n")
    proc = _anonymize(case, "nohead.csv")
    assert proc.returncode == 2, proc.stderr
    assert "the first line must be the header: ID,Job,Sex,Age,Transfuse,Surgery" in proc.stderr
    for cell in lines[1].split(","):
        assert f"'{cell}'" not in proc.stderr, (cell, proc.stderr)
    assert "Janitor" not in proc.stderr and "Transgender" not in proc.stderr.split("header")[0]
    assert not (case / "out.csv").exists()


def test_header_like_first_record_with_numbers_is_not_echoed(case: Path) -> None:
    spec, reader = load_spec(case / "run.toml")
    schema = table.build_schema(spec, reader)
    f = case / "t.csv"
    # a record whose cells partly equal column names: still no cell is echoed
    f.write_text("39,Job,Sex,Age,Y,Plastic\n1,Janitor,M,34,Y,Transgender\n")
    with pytest.raises(DataError) as err:
        table.encode_table(schema, f)
    msg = str(err.value).replace(str(f), "<file>")  # its temporary path has digits
    assert "39" not in msg and "Plastic" not in msg
    assert "first line must be the header" in str(err.value)


def test_duplicate_cells_in_first_line_are_not_echoed(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("4711,4711,7\n1,2,3\n")
    with pytest.raises(DataError) as err:
        table.read_columns(f)
    # the message names the file (whose temporary path holds digits of its own), not the value
    assert "4711" not in str(err.value).replace(str(f), "<file>")


def test_headerless_with_repeated_cells_says_header(case: Path) -> None:
    spec, reader = load_spec(case / "run.toml")
    schema = table.build_schema(spec, reader)
    f = case / "t.csv"
    f.write_text("7,Doctor,M,58,N,58\n8,Doctor,M,58,N,Plastic\n")
    with pytest.raises(DataError) as err:
        table.encode_table(schema, f)
    assert "first line must be the header" in str(err.value)
    msg = str(err.value).replace(str(f), "<file>")  # its temporary path has digits
    assert "58" not in msg and "Doctor" not in msg


def test_a_misspelt_header_name_is_still_named(case: Path) -> None:
    text = (case / "table1.csv").read_text().replace("ID,Job", "ID,Jobb", 1)
    (case / "t.csv").write_text(text)
    proc = _anonymize(case, "t.csv")
    assert proc.returncode == 2 and "'Jobb'" in proc.stderr and "not declared" in proc.stderr


# 7. sensitive values -----------------------------------------------------------------------


SENS_SPEC = """
[privacy]
L = 1
K = 1
C = 0.9
sensitive_values = {sv}
{extra}
[[attribute]]
name = "q"
role = "qid"
type = "numeric"
domain = [0, 10]

[[attribute]]
name = "y"
role = "class"
values = ["a", "b"]

[[attribute]]
name = "s"
role = "sensitive"
{values}
"""


def test_sensitive_values_must_be_declared_values() -> None:
    text = SENS_SPEC.format(sv='["hiv"]', extra="", values='values = ["HIV", "flu"]')
    with pytest.raises(SpecError) as err:
        parse_spec(text, "run.toml")
    msg = str(err.value)
    assert "run.toml" in msg and "'hiv'" in msg and "HIV" in msg and "flu" in msg
    ok = SENS_SPEC.format(sv='["HIV"]', extra="", values='values = ["HIV", "flu"]')
    assert parse_spec(ok).privacy.sensitive_values == ("HIV",)


def _sens_case(tmp_path: Path, extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "run.toml").write_text(SENS_SPEC.format(sv='["hiv"]', extra=extra, values=""))
    rows = [f"{i % 10},{'ab'[i % 2]},{'flu' if i % 3 else 'HIV'}" for i in range(30)]
    (tmp_path / "d.csv").write_text("q,y,s\n" + "\n".join(rows) + "\n")
    return _run(
        "anonymize",
        "--spec",
        str(tmp_path / "run.toml"),
        "--input",
        str(tmp_path / "d.csv"),
        "--output",
        str(tmp_path / "out.csv"),
        "--quiet",
    )


def test_sensitive_value_absent_from_data_is_an_error(tmp_path: Path) -> None:
    proc = _sens_case(tmp_path, "")
    assert proc.returncode == 2, proc.stderr
    assert "'hiv'" in proc.stderr and "allow_absent_sensitive" in proc.stderr
    assert not (tmp_path / "out.csv").exists()


def test_allow_absent_sensitive_releases(tmp_path: Path) -> None:
    proc = _sens_case(tmp_path, "allow_absent_sensitive = true")
    assert proc.returncode == 0, proc.stderr
    assert _records(tmp_path / "out.csv") == 30


# 8. gzip -------------------------------------------------------------------------------------


def test_truncated_gzip_is_a_clear_input_error(case: Path) -> None:
    blob = gzip.compress(_big_table(case, 50))
    (case / "cut.csv.gz").write_bytes(blob[: len(blob) // 2])
    proc = _anonymize(case, "cut.csv.gz")
    assert proc.returncode == 2, proc.stderr
    assert "cut.csv.gz" in proc.stderr and "truncated" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_corrupt_gzip_is_a_clear_input_error(case: Path) -> None:
    blob = bytearray(gzip.compress(_big_table(case, 50)))
    blob[40:60] = b"\x00" * 20
    (case / "bad.csv.gz").write_bytes(bytes(blob))
    proc = _anonymize(case, "bad.csv.gz")
    assert proc.returncode == 2, proc.stderr
    assert "bad.csv.gz" in proc.stderr and "gzip" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_plain_file_named_gz_is_a_clear_input_error(case: Path) -> None:
    shutil.copy(case / "table1.csv", case / "plain.csv.gz")
    proc = _anonymize(case, "plain.csv.gz")
    assert proc.returncode == 2, proc.stderr
    assert "plain.csv.gz" in proc.stderr and "not gzip" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_gz_output_is_gzip(case: Path) -> None:
    proc = _run(
        "anonymize",
        "--spec",
        str(case / "run.toml"),
        "--input",
        str(case / "table1.csv"),
        "--output",
        str(case / "out.csv.gz"),
        "--quiet",
    )
    assert proc.returncode == 0, proc.stderr
    raw = (case / "out.csv.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    text = gzip.decompress(raw).decode()
    assert text.startswith("Job,Sex,Age,Transfuse,Surgery\n") and len(text.splitlines()) == 12


# 9. UTF-8 byte order marks ------------------------------------------------------------------


def test_bom_in_data_spec_and_taxonomies(case: Path) -> None:
    for name in ("table1.csv", "run.toml", "job.txt", "sex.txt", "age.txt"):
        p = case / name
        p.write_bytes(BOM.encode() + p.read_bytes())
    proc = _anonymize(case, "table1.csv")
    assert proc.returncode == 0, proc.stderr
    assert _records(case / "out.csv") == 11


@pytest.mark.parametrize("threshold", [1 << 40, 0])
def test_bom_in_data_both_readers(
    tmp_path: Path, threshold: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(csvread, "SMALL_INPUT_BYTES", threshold)
    f = tmp_path / "t.csv"
    f.write_bytes(BOM.encode() + b"a,b\n1,2\n")
    header, _ = table.read_columns(f)
    assert header == ["a", "b"]
    g = tmp_path / "t.csv.gz"
    g.write_bytes(gzip.compress(BOM.encode() + b"a,b\n1,2\n"))
    assert table.read_columns(g)[0] == ["a", "b"]


def test_bom_in_taxonomies_native_and_arx() -> None:
    native = parse_native(BOM + "ANY\n  a\n  b\n", "t.txt")
    assert native.labels == ("ANY", "a", "b")
    arx = parse_arx(BOM + "a;*\nb;*\n", "t.csv")
    assert set(arx.labels) == {"*", "a", "b"}
    assert parse_taxonomy(BOM + "a;*\nb;*\n", "t.csv").labels == arx.labels


def test_bom_in_spec_text() -> None:
    text = BOM + SENS_SPEC.format(sv='["flu"]', extra="", values="")
    assert parse_spec(text).privacy.K == 1


# 10. spec types -----------------------------------------------------------------------------

BASE = """
[privacy]
L = 1
K = 2
C = 1
[utility]
score = "discernibility"
[[attribute]]
name = "q"
role = "qid"
type = "numeric"
domain = [0, 10]
"""


@pytest.mark.parametrize(
    ("old", "new", "needles"),
    [
        ("domain = [0, 10]", 'domain = [0, 10]\nstep = "five"', ["'q'", "step", "number"]),
        (
            'type = "numeric"\ndomain = [0, 10]',
            'type = "categorical"\ntaxonomy = 5',
            ["taxonomy", "string"],
        ),
        ("C = 1", "C = true", ["C", "number"]),
        ("C = 1", 'C = "0.5"', ["C", "number"]),
        ("L = 1", 'L = "2"', ["L", "integer"]),
        ("K = 2", "K = 2.0", ["K", "integer"]),
        ('name = "q"', 'name = ""', ["name", "non-empty"]),
        ('name = "q"', "name = 7", ["name", "string"]),
        ('role = "qid"', "role = 1", ["role", "string"]),
        ('type = "numeric"', "type = 3", ["type", "string"]),
        ('score = "discernibility"', "score = 1", ["score", "string"]),
        ("C = 1", 'C = 1\nsensitive_values = "x"', ["sensitive_values", "list of strings"]),
        ("C = 1", "C = 1\nallow_absent_sensitive = 1", ["allow_absent_sensitive", "true or false"]),
        (
            "domain = [0, 10]",
            'domain = [0, 10]\ntaxonomy = "t.txt"\nstep = 2',
            ["step", "taxonomy"],
        ),
        (
            'name = "q"\nrole = "qid"',
            'name = "q"\nrole = "qid"\nvalues = [1]',
            ["values", "strings"],
        ),
    ],
)
def test_spec_type_errors(old: str, new: str, needles: list[str]) -> None:
    assert old in BASE
    text = BASE.replace(old, new, 1)
    with pytest.raises(SpecError) as err:
        parse_spec(text, "run.toml")
    msg = str(err.value)
    assert msg.startswith("run.toml"), msg
    for needle in needles:
        assert needle in msg, (needle, msg)


def test_spec_type_errors_exit_2_without_traceback(case: Path) -> None:
    text = (case / "run.toml").read_text().replace('taxonomy = "sex.txt"', "taxonomy = 5")
    (case / "run.toml").write_text(text)
    proc = _anonymize(case)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "taxonomy" in proc.stderr


def test_step_on_a_non_numeric_attribute_is_an_error() -> None:
    text = BASE + '[[attribute]]\nname = "o"\nrole = "other"\nstep = 1\n'
    with pytest.raises(SpecError, match="step"):
        parse_spec(text, "run.toml")


# 11. physical line numbers ------------------------------------------------------------------


@pytest.mark.parametrize("threshold", [1 << 40, 0])
def test_line_numbers_are_physical(
    case: Path, threshold: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(csvread, "SMALL_INPUT_BYTES", threshold)
    spec, reader = load_spec(case / "run.toml")
    spec = parse_spec(
        (case / "run.toml")
        .read_text()
        .replace('role = "sensitive"', 'role = "other"')
        .replace('sensitive_values = ["Transgender"]', ""),
        str(case / "run.toml"),
    )
    schema = table.build_schema(spec, reader)
    f = case / "t.csv"
    text = (
        "ID,Job,Sex,Age,Transfuse,Surgery\n"  # 1
        "1,Janitor,M,34,Y,Transgender\n"  # 2
        "\n"  # 3
        '2,Lawyer,F,58,N,"Plastic\n'  # 4
        'multi-line"\n'  # 5
        "\n"  # 6
        "3,Mover,M,58,N,Urology\n"  # 7
        '4,Lawyer,M,24,N,"Vas\n'  # 8
        'cular"\n'  # 9
        "5,Pilot,M,35,Y,Transgender\n"  # 10: not a leaf of the Job taxonomy
    )
    f.write_text(text)
    with pytest.raises(DataError) as err:
        table.encode_table(schema, f)
    assert err.value.line == 10 and err.value.column == "Job", str(err.value)
    f.write_text(text.replace("Pilot,M,35", "Doctor,M,135"))
    with pytest.raises(DataError) as err:
        table.encode_table(schema, f)
    assert err.value.line == 10 and err.value.column == "Age", str(err.value)


@pytest.mark.parametrize("threshold", [1 << 40, 0])
def test_ragged_row_line_is_physical(
    tmp_path: Path, threshold: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(csvread, "SMALL_INPUT_BYTES", threshold)
    f = tmp_path / "t.csv"
    f.write_text('a,b\n1,"x\ny"\n\n\n2,3\n"4\n5",6,7\n')
    with pytest.raises(DataError) as err:
        table.read_columns(f)
    assert err.value.line == 7, str(err.value)  # where the record starts
    f.write_text("a,b\n1,2\n\n\n2,3\n4\n")
    with pytest.raises(DataError) as err:
        table.read_columns(f)
    assert err.value.line == 6, str(err.value)


def test_bom_in_federation_config(tmp_path: Path) -> None:
    from fedanon.leader.config import load_federation_config

    parties = "".join(
        f'[[party]]\nname = "{n}"\naddress = "127.0.0.1:{i}"\n' for i, n in enumerate("abc", 1)
    )
    cfg = tmp_path / "federation.toml"
    cfg.write_bytes(
        (
            BOM + '[run]\nspec = "run.toml"\noutput = "out.csv"\n'
            '[tls]\nca = "ca.pem"\ncert = "l.pem"\nkey = "l.key"\n' + parties
        ).encode()
    )
    assert [p.name for p in load_federation_config(cfg).parties] == ["a", "b", "c"]
