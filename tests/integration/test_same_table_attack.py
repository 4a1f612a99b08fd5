"""Review of a81e38f as a careless or malicious user of `fedanon federate`: the same-table
check now trusts the digests of the tables the pinned daemons loaded
(:func:`fedanon.io.sametable.loaded_digest`) and reads the files only of pairs whose digests
agree.  Every copy the file-based check refuses (equal :func:`~fedanon.io.sametable.
content_digest`: the same records as the run reads them) must still be refused.

Found: a Parquet copy whose numeric QID is typed float32.  The file-based check reads a
float32 ``44.6`` as its text (``"44.6"``, the same as the CSV's), the daemon's encoder as the
number it is (44.59999847...): with a bin step of 0.1 the two fall in two bins, the daemons'
digests differ and the copy was let through (released twice).  A Parquet table's digest is
no longer trusted (:func:`fedanon.leader.federateinputs.check_distinct_tables`).

Tried and refused (the digests agree, or the daemon cannot load the table and says so): gzip,
CRLF, CR, BOM, quoted, padded and quoted-padded cells, shuffled rows, reordered columns, a
renumbered identifier, numeric QIDs written 34.0 / 034 / " 34" / +34 / 3.4e1, class labels
undeclared in the spec with padded values, Parquet with text, dictionary, large-text,
integer, float64 or integral float32 columns, out-of-core loading (a 1-byte memory budget),
an undeclared extra column; Table 1 and Adult (300 rows) under the LKC, k-anonymity,
discernibility, L = 1 bench and DiffGen specs.  Bad inputs still end with exit 2 naming the
file, line and column (a value the hospital refuses is not sent to the leader, as before),
without waiting for the daemons' load deadline."""

from __future__ import annotations

import gzip
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import EXAMPLES, fedanon_cli, read_rows, table1_spec, write_rows

from fedanon.apispec import Spec
from fedanon.errors import ConfigError, FedanonError
from fedanon.io.sametable import Compared, content_digest, loaded_digest
from fedanon.io.table import encode_table
from fedanon.leader.federate import Daemon, loaded
from fedanon.leader.federateinputs import check_distinct_tables
from fedanon.methods import registry

pytestmark = pytest.mark.slow
TABLE1 = EXAMPLES / "table1"
ADULT = EXAMPLES / "adult"
BENCH_SPECS = EXAMPLES.parent / "bench" / "specs"


def _federate(
    tmp: Path, spec: Path, data: list[Path], **env: str
) -> subprocess.CompletedProcess[str]:
    (tmp / "tmp").mkdir(exist_ok=True)
    parties = [a for i, p in enumerate(data) for a in ("--party", f"h{i}={p}")]
    out = tmp / "out.csv"
    return fedanon_cli(
        "federate",
        "--spec",
        str(spec),
        *parties,
        "--output",
        str(out),
        "--quiet",
        env={**os.environ, "TMPDIR": str(tmp / "tmp"), **env},
    )


def _schema(spec: Path) -> tuple[object, object]:
    one = Spec.from_toml(spec)
    run = one.run_spec
    return run, registry.get(run.privacy.model).schema(run, one.taxonomy_reader())


def _daemon_digest(schema: object, path: Path, budget: str = "off") -> str | None:
    """What a pinned daemon writes to its --digest-file: the loaded table's digest, or None
    ("-") when it cannot load the table."""
    try:
        return loaded_digest(encode_table(schema, path, memory_budget=budget))  # type: ignore[arg-type]
    except FedanonError:
        return None


def _refused(spec: Path, original: Path, other: Path, copy: Path, budget: str = "off") -> None:
    """The check, fed the digests the daemons write, refuses ``copy`` next to ``original``
    (and ``other``, a distinct table, passes); for a text copy the daemons' digests agree."""
    run, schema = _schema(spec)
    on = Compared.of_spec(run)
    assert content_digest(copy, on) == content_digest(original, on)  # the old check refused
    parties = [("a", original), ("b", other), ("c", copy)]
    digests = [_daemon_digest(schema, p, budget) for _, p in parties]
    assert digests[0] is not None and digests[1] is not None
    assert digests[0] != digests[1]
    if copy.suffix != ".parquet" and digests[2] is not None:
        assert digests[2] == digests[0]
    check_distinct_tables(parties[:2], run, digests[:2])
    with pytest.raises(ConfigError, match=r"parties a \(.*\) and c \(.*\) have the same records"):
        check_distinct_tables(parties, run, digests)


# -- the bypass: a float32 Parquet copy --------------------------------------------------------


def _float_table1(tmp: Path) -> tuple[Path, Path, Path]:
    """Table 1 with Age in tenths and a spec binning it by 0.1 (no taxonomy): the spec, the
    CSV and a distinct third table."""
    spec = table1_spec(tmp)
    text = spec.read_text()
    old = 'domain = [1, 99]\ntaxonomy = "age.txt"'
    assert old in text
    spec.write_text(text.replace(old, "domain = [1, 99]\nstep = 0.1"))
    header, rows = read_rows(TABLE1 / "table1.csv")
    age = header.index("Age")
    tenths = {"24": "24.1", "34": "34.2", "44": "44.6", "58": "58.3", "63": "63.7"}
    for r in rows:
        r[age] = tenths[r[age]]
    write_rows(tmp / "a.csv", header, rows)
    other = [[*r] for r in rows]
    for r in other:
        r[age] = f"{float(r[age]) + 1:.1f}"
    write_rows(tmp / "c.csv", header, other)
    return spec, tmp / "a.csv", tmp / "c.csv"


def _parquet(src: Path, dst: Path, types: dict[str, object]) -> Path:
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    header, _ = read_rows(src)
    cols = {h: types.get(h, pa.string()) for h in header}
    table = pcsv.read_csv(src, convert_options=pcsv.ConvertOptions(column_types=cols))
    pq.write_table(table, dst)
    return dst


def test_a_float32_parquet_copy_is_refused(tmp_path: Path) -> None:
    import pyarrow as pa

    spec, data, other = _float_table1(tmp_path)
    copy = _parquet(data, tmp_path / "b.parquet", {"Age": pa.float32()})
    run, schema = _schema(spec)
    on = Compared.of_spec(run)
    # the check's view: the same records; the daemons' view too since the encoder reads a
    # float32 as the number its text says (cdf8641; before, 44.6 fell in another bin)
    assert content_digest(copy, on) == content_digest(data, on)
    assert _daemon_digest(schema, copy) == _daemon_digest(schema, data)
    _refused(spec, data, other, copy)
    proc = _federate(tmp_path, spec, [data, copy, other])
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "h0" in proc.stderr and "h1" in proc.stderr and "same records" in proc.stderr
    assert not (tmp_path / "out.csv").exists()


# -- copies the digests must agree on -----------------------------------------------------------


def _lines(path: Path) -> list[str]:
    raw = path.read_bytes()
    return (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode().splitlines()


def _text(lines: list[str], end: str = "\n") -> bytes:
    return (end.join(lines) + end).encode()


def _cells(lines: list[str], f: Callable[[int, str], str]) -> list[str]:
    return [lines[0]] + [",".join(f(j, c) for j, c in enumerate(ln.split(","))) for ln in lines[1:]]


def _numeric(fmt: str, columns: set[int]) -> Callable[[list[str]], list[str]]:
    def edit(lines: list[str]) -> list[str]:
        def cell(j: int, c: str) -> str:
            return fmt.format(int(c), float(c)) if j in columns and c.isdigit() else c

        return _cells(lines, cell)

    return edit


def _shuffled(lines: list[str]) -> list[str]:
    body = lines[1:]
    random.Random(7).shuffle(body)
    return [lines[0], *body]


def _reordered(lines: list[str]) -> list[str]:
    order = list(range(len(lines[0].split(","))))
    random.Random(8).shuffle(order)
    return [",".join(ln.split(",")[i] for i in order) for ln in lines]


CSV_COPIES: dict[str, Callable[[list[str]], bytes]] = {
    "gzip": lambda ls: gzip.compress(_text(ls)),
    "crlf": lambda ls: _text(ls, "\r\n"),
    "cr": lambda ls: _text(ls, "\r"),
    "bom": lambda ls: b"\xef\xbb\xbf" + _text(ls),
    "quoted": lambda ls: _text([",".join(f'"{c}"' for c in ln.split(",")) for ln in ls]),
    "padded": lambda ls: _text(_cells(ls, lambda _j, c: f"  {c}\t ")),
    "quoted-padded": lambda ls: _text(_cells(ls, lambda _j, c: f'" {c} "')),
    "shuffled": lambda ls: _text(_shuffled(ls)),
    "reordered": lambda ls: _text(_reordered(ls)),
    "shuffled-reordered-gzip": lambda ls: gzip.compress(_text(_reordered(_shuffled(ls)))),
}


def _csv_copies(src: Path, tmp: Path, numeric: set[int]) -> dict[str, Path]:
    lines = _lines(src)
    out = {}
    for name, make in CSV_COPIES.items():
        out[name] = tmp / (f"{name}.csv.gz" if "gzip" in name else f"{name}.csv")
        out[name].write_bytes(make(lines))
    for name, fmt in {"34.0": "{1:.1f}", "034": "0{0}", "blank-34": " {0} ", "+34": "+{0}"}.items():
        out[name] = tmp / f"num{len(out)}.csv"
        out[name].write_bytes(_text(_numeric(fmt, numeric)(lines)))
    out["3.4e1"] = tmp / "sci.csv"
    out["3.4e1"].write_bytes(_text(_numeric("{1:.6e}", numeric)(lines)))
    return out


def _parquet_copies(src: Path, tmp: Path, numeric: list[str]) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = _parquet(src, tmp / "text.parquet", {})
    table = pq.read_table(text)
    out = {"text": text}
    kinds = {
        "dictionary": lambda _n: pa.dictionary(pa.int32(), pa.string()),
        "large-text": lambda _n: pa.large_string(),
    }
    for name, kind in kinds.items():
        out[name] = tmp / f"{name}.parquet"
        pq.write_table(
            table.cast(pa.schema([pa.field(f.name, kind(f)) for f in table.schema])), out[name]
        )
    for typ in (pa.int64(), pa.uint32(), pa.float64(), pa.float32()):
        t = table
        for n in numeric:
            t = t.set_column(t.schema.get_field_index(n), n, t.column(n).cast(pa.int64()).cast(typ))
        out[str(typ)] = tmp / f"num-{typ}.parquet"
        pq.write_table(t, out[str(typ)])
    return out


def _table1_other(tmp: Path) -> Path:
    header, rows = read_rows(TABLE1 / "table1.csv")
    rows[0][header.index("Sex")] = "F"  # one record changed: another table
    write_rows(tmp / "other.csv", header, rows)
    return tmp / "other.csv"


def test_table1_copies_are_refused(tmp_path: Path) -> None:
    spec = TABLE1 / "run.toml"
    src = TABLE1 / "table1.csv"
    other = _table1_other(tmp_path)
    header = _lines(src)[0].split(",")
    copies = _csv_copies(src, tmp_path, {header.index("Age")})
    copies.update(_parquet_copies(src, tmp_path, ["Age"]))
    lines = _lines(src)
    renumbered = _cells(lines, lambda j, c: str(int(c) * 7 + 100) if j == 0 else c)
    copies["renumbered"] = tmp_path / "renumbered.csv"
    copies["renumbered"].write_bytes(_text(renumbered))
    extra = [f"rowid,{lines[0]}", *(f"{i},{ln}" for i, ln in enumerate(lines[1:]))]
    copies["extra-column"] = tmp_path / "extra.csv"  # its daemon cannot load it: "-"
    copies["extra-column"].write_bytes(_text(extra))
    for name, copy in copies.items():
        try:
            _refused(spec, src, other, copy)
        except BaseException as exc:
            raise AssertionError(f"copy {name!r} was not refused") from exc


def test_table1_copies_are_refused_out_of_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEDANON_CHUNK_ROWS", "3")
    src = TABLE1 / "table1.csv"
    _, schema = _schema(TABLE1 / "run.toml")
    spilled = encode_table(schema, src, memory_budget="1B")  # type: ignore[arg-type]
    assert spilled.spill is not None
    assert loaded_digest(spilled) == _daemon_digest(schema, src)
    copies = _csv_copies(src, tmp_path, {3})
    for name in ("shuffled-reordered-gzip", "34.0", "quoted-padded"):
        _refused(TABLE1 / "run.toml", src, _table1_other(tmp_path), copies[name], budget="1B")


def test_undeclared_class_labels_with_padded_copies(tmp_path: Path) -> None:
    """Class labels not declared: the codes are ranks among the table's own labels."""
    spec = table1_spec(tmp_path)
    spec.write_text(spec.read_text().replace('values = ["N", "Y"]', ""))
    src = TABLE1 / "table1.csv"
    other = _table1_other(tmp_path)
    copies = _csv_copies(src, tmp_path, {3})
    for name in ("padded", "quoted-padded", "shuffled-reordered-gzip"):
        _refused(spec, src, other, copies[name])


ADULT_SPECS = [
    ADULT / "run.toml",
    ADULT / "run-kanon.toml",
    ADULT / "run-discernibility.toml",
    ADULT / "dp.toml",
    BENCH_SPECS / "adult-kanon-l1.toml",
]


@pytest.mark.parametrize("spec", ADULT_SPECS, ids=lambda p: p.stem)
def test_adult_copies_are_refused_under_every_federated_method(tmp_path: Path, spec: Path) -> None:
    every = _lines(ADULT / "adult.csv.gz")
    lines = every[:301]
    src = tmp_path / "adult.csv"
    src.write_bytes(_text(lines))
    other = tmp_path / "adult-other.csv"  # one record replaced: another table
    other.write_bytes(_text([*lines[:300], every[400]]))
    run, _ = _schema(spec)
    header = lines[0].split(",")
    numeric = [a.name for a in run.qids if a.type == "numeric"]
    copies = _csv_copies(src, tmp_path, {header.index(n) for n in numeric})
    copies.update(_parquet_copies(src, tmp_path, numeric))
    for name, copy in copies.items():
        try:
            _refused(spec, src, other, copy)
        except BaseException as exc:
            raise AssertionError(f"copy {name!r} was not refused under {spec.name}") from exc


# -- end to end: out of core, bad inputs, no long wait ------------------------------------------


def _table1_parties(tmp: Path) -> tuple[Path, list[Path]]:
    spec = table1_spec(tmp)
    header, rows = read_rows(TABLE1 / "table1.csv")
    paths = []
    for i in range(3):
        paths.append(tmp / f"d{i}.csv")
        write_rows(paths[-1], header, rows[i::3])
    return spec, paths


def test_federate_out_of_core_refuses_a_shuffled_gzip_copy(tmp_path: Path) -> None:
    spec, data = _table1_parties(tmp_path)
    copy = tmp_path / "copy.csv.gz"
    copy.write_bytes(gzip.compress(_text(_reordered(_shuffled(_lines(data[1]))))))
    proc = _federate(
        tmp_path, spec, [*data, copy], FEDANON_MEMORY_BUDGET="1B", FEDANON_CHUNK_ROWS="2"
    )
    assert proc.returncode == 2, proc.stderr
    assert "h1" in proc.stderr and "h3" in proc.stderr and "same records" in proc.stderr


# the hospital names file, line and column to the leader, never the value (as before a81e38f)
BAD = {
    "value": (
        lambda r, h: r[3].__setitem__(h.index("Age"), "abc"),
        ["line 5", "'Age'", "not a number"],
    ),
    "leaf": (
        lambda r, h: r[3].__setitem__(h.index("Job"), "Plumber"),
        ["line 5", "'Job'", "not allowed"],
    ),
    "domain": (
        lambda r, h: r[3].__setitem__(h.index("Age"), "124"),
        ["line 5", "'Age'", "outside"],
    ),
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_federate_bad_input_is_a_clear_exit_2_without_waiting(tmp_path: Path, bad: str) -> None:
    spec, data = _table1_parties(tmp_path)
    header, rows = read_rows(TABLE1 / "table1.csv")
    edit, said = BAD[bad]
    edit(rows, header)
    write_rows(tmp_path / "bad.csv", header, rows)
    t0 = time.monotonic()
    proc = _federate(tmp_path, spec, [*data, tmp_path / "bad.csv"])
    assert time.monotonic() - t0 < 60  # not the daemons' 600 s load deadline
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "bad.csv" in proc.stderr and all(s in proc.stderr for s in said), proc.stderr


def test_federate_missing_column_or_ragged_row_is_a_clear_exit_2(tmp_path: Path) -> None:
    spec, data = _table1_parties(tmp_path)
    lines = _lines(TABLE1 / "table1.csv")
    (tmp_path / "nocol.csv").write_bytes(_text([",".join(ln.split(",")[:-1]) for ln in lines]))
    (tmp_path / "ragged.csv").write_bytes(_text([*lines, "99,Doctor,M"]))
    for bad, said in (("nocol.csv", ["line 1", "'Surgery'"]), ("ragged.csv", ["line 13"])):
        proc = _federate(tmp_path, spec, [*data, tmp_path / bad])
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        assert bad in proc.stderr and all(s in proc.stderr for s in said), proc.stderr


def test_loaded_does_not_wait_for_a_daemon_that_exited(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    d = Daemon("x", gone, tmp_path / "x.port", tmp_path / "x.toml", digest_file=tmp_path / "x.d")
    t0 = time.monotonic()
    assert loaded([d]) == [None]
    assert time.monotonic() - t0 < 5
