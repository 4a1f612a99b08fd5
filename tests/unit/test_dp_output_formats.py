"""A DP release is written in the format its output name says, centralized and federated:
CSV, gzip CSV (.csv.gz) or Parquet (.parquet), the same content in each (issue 24 item 4).

Read back independently: gzip with the gzip module, Parquet with pyarrow, both compared with
the CSV of the same run (same seed)."""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dp_helpers import read_release, small_case, split_table

from fedanon.cli.main import main
from fedanon.dp.randomness import NOT_PRIVATE

NOTE = f"# {NOT_PRIVATE} 5: for tests and experiments only"


def _cli(command: str, spec: Path, data: Path, out: Path, *extra: str) -> None:
    args = [command, "--spec", str(spec), "--input", str(data), "--output", str(out)]
    assert main([*args, "--seed", "5", "--quiet", *extra]) == 0


def _csv_rows(text: str) -> tuple[list[str], list[list[str]]]:
    lines = [x for x in text.splitlines() if not x.startswith("#")]
    rows = list(csv.reader(lines))
    return rows[0], rows[1:]


def _parquet_rows(path: Path) -> tuple[list[str], list[list[str]], dict[bytes, bytes]]:
    table = pq.read_table(path)
    cols = [table.column(n).to_pylist() for n in table.column_names]
    rows = [[str(v) for v in r] for r in zip(*cols, strict=True)]
    return table.column_names, rows, table.schema.metadata or {}


@pytest.mark.parametrize("command", ["dp-anonymize", "anonymize"])
@pytest.mark.parametrize("expand", [False, True])
def test_centralized_writes_the_named_format(tmp_path: Path, command: str, expand: bool) -> None:
    spec, data = small_case(tmp_path, h=4)
    flags = ["--expand"] if expand else []
    plain, zipped, parquet = tmp_path / "r.csv", tmp_path / "r.csv.gz", tmp_path / "r.parquet"
    for out in (plain, zipped, parquet):
        _cli(command, spec, data, out, *flags)
    text = plain.read_text(encoding="utf-8")
    assert text.startswith(NOTE + "\n")
    # .csv.gz: a gzip file holding exactly the CSV's bytes
    assert zipped.read_bytes()[:2] == b"\x1f\x8b"
    assert gzip.decompress(zipped.read_bytes()) == plain.read_bytes()
    # .parquet: the same rows; the count an integer column; the warning in the metadata
    assert parquet.read_bytes()[:4] == b"PAR1"
    header, rows = _csv_rows(text)
    p_header, p_rows, meta = _parquet_rows(parquet)
    assert p_header == header and p_rows == rows
    assert meta[b"fedanon.warning"].decode() == NOTE[2:]
    schema = pq.read_schema(parquet)
    assert ("count" in header) is not expand
    if not expand:
        assert str(schema.field("count").type) == "int64"
        assert sum(int(r[-1]) for r in rows) > 0
    else:
        assert len(rows) > 400  # the noisy total: more rows than records (empty groups gain)


def test_private_parquet_has_no_warning(tmp_path: Path) -> None:
    spec, data = small_case(tmp_path, h=2)
    out = tmp_path / "r.parquet"
    args = ["dp-anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out)]
    assert main([*args, "--quiet"]) == 0
    assert b"fedanon.warning" not in (pq.read_schema(out).metadata or {})


def test_library_release_writes_the_named_format(tmp_path: Path) -> None:
    """fedanon.anonymize(...).write() follows the name as the CLI does (same bytes)."""
    import fedanon

    spec_path, data = small_case(tmp_path, h=3)
    release = fedanon.anonymize(data, fedanon.Spec.from_toml(spec_path), seed=5)
    release.write(tmp_path / "lib.csv.gz")
    _cli("dp-anonymize", spec_path, data, tmp_path / "cli.csv.gz")
    lib = gzip.decompress((tmp_path / "lib.csv.gz").read_bytes())
    assert lib == gzip.decompress((tmp_path / "cli.csv.gz").read_bytes())


def test_federated_publish_writes_the_named_format(tmp_path: Path) -> None:
    """The leader's publishing step (DiffGen's leader side, leader/counts.py, on the one
    publisher) on a run over 3 in-process parties: no format refused before the run, and
    .csv.gz / .parquet hold the .csv's content."""
    import json

    from dp_helpers import load

    from fedanon.dp.randomness import RandomSource
    from fedanon.dp.release import report
    from fedanon.dp.run import anonymize_tables
    from fedanon.leader.counts import CountsLeader
    from fedanon.methods.publish import publish_release

    spec, schema, table = load(*small_case(tmp_path, h=4))
    result = anonymize_tables(spec, schema, split_table(table, 3), RandomSource(5))
    rep = report(result)
    outs = [tmp_path / n for n in ("f.csv", "f.csv.gz", "f.parquet", "f.pq")]
    for out in outs:
        side = CountsLeader(spec.run, "auto", "federation.toml", None)  # no format refused
        side.result = result
        publish_release(side.table(out), out.with_name(out.name + ".json"), rep)
        assert json.loads(out.with_name(out.name + ".json").read_text()) == rep
    header, rows, comments = read_release(outs[0])
    assert comments == [NOTE] and header[-1] == "count"
    assert gzip.decompress(outs[1].read_bytes()) == outs[0].read_bytes()
    for pq_out in outs[2:]:
        p_header, p_rows, meta = _parquet_rows(pq_out)
        assert (p_header, p_rows) == (header, rows)
        assert meta[b"fedanon.warning"].decode() == NOTE[2:]


def test_federated_cli_run_writes_parquet(tmp_path: Path) -> None:
    """`fedanon federate` over real party daemons to a .parquet output == the centralized
    CSV of the union with the same seed (was refused before the run)."""
    from fedanon.leader.federate import federate

    spec, data = small_case(tmp_path, h=3, rows=120)
    lines = data.read_text().splitlines()
    parts = [tmp_path / f"{name}.csv" for name in "abc"]
    for i, p in enumerate(parts):
        p.write_text("\n".join([lines[0], *lines[1 + i :: 3]]) + "\n")
    union = tmp_path / "union.csv"
    union.write_text("\n".join([lines[0], *(x for i in range(3) for x in lines[1 + i :: 3])]))
    out = tmp_path / "fed.parquet"
    federate(spec, [(p.stem, p) for p in parts], out, None, seed=5)
    _cli("dp-anonymize", spec, union, tmp_path / "central.csv")
    header, rows = _csv_rows((tmp_path / "central.csv").read_text())
    # the federated table is in spec order; the centralized one in input column order
    p_header, p_rows, meta = _parquet_rows(out)
    assert sorted(p_header) == sorted(header)
    order = [p_header.index(c) for c in header]
    assert sorted(tuple(r[i] for i in order) for r in p_rows) == sorted(map(tuple, rows))
    assert meta[b"fedanon.warning"].decode() == NOTE[2:]


def test_csv_writer_is_the_csv_module(tmp_path: Path) -> None:
    """The CSV bytes are what the csv module writes for the Parquet rows (quoting too)."""
    spec, data = small_case(tmp_path, h=4)
    tax = tmp_path / "job.txt"
    tax.write_text(tax.read_text().replace("Janitor", 'Jan,itor "x"'))
    data.write_text(data.read_text().replace("Janitor", '"Jan,itor ""x"""'))
    _cli("dp-anonymize", spec, data, tmp_path / "r.csv")
    _cli("dp-anonymize", spec, data, tmp_path / "r.parquet")
    header, rows, _ = _parquet_rows(tmp_path / "r.parquet")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    assert (tmp_path / "r.csv").read_text() == NOTE + "\n" + buf.getvalue()
