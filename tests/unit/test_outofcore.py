"""Issue 10 item 5: a table over the memory budget is kept out of core (memory-mapped codes,
passes over rows in chunks) and releases exactly the bytes of the in-memory path."""

from __future__ import annotations

import gc
import io
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedanon.apispec import Spec
from fedanon.centralized import anonymize_file
from fedanon.errors import SpecError
from fedanon.io import csvarrow, csvread, spill, tablewrite
from fedanon.io.columns import Column
from fedanon.io.table import EncodedTable, build_schema, encode_table
from fedanon.model.spec import load_spec
from fedanon.tds.decide import Decider
from fedanon.tds.engine import LocalFederation, run
from fedanon.union.localparty import LocalParty


def _random_table(tmp: Path, seed: int, n_rows: int) -> tuple[Path, Path]:
    """A random table (categorical QID with a 3-level taxonomy, numeric QID grown at run
    time, sensitive and class columns) and its spec, LKC parameters and score drawn too."""
    rng = random.Random(seed)
    (tmp / "a.txt").write_text(
        "ANY\n  G0\n    a\n    b\n    c\n  G1\n    d\n    e\n  G2\n    f\n    g\n    h\n"
    )
    rows = ["id,a,b,s,y"]
    for i in range(n_rows):
        b = rng.randint(0, 99)
        y = "yes" if (b > 50) ^ (rng.random() < 0.2) else "no"
        s = rng.choice(["flu", "flu", "cold", "hiv"])
        rows.append(f"{i},{rng.choice('abcdefgh')},{b},{s},{y}")
    data = tmp / "data.csv"
    data.write_text("\n".join(rows) + "\n")
    score = rng.choice(["infogain", "discernibility"])
    spec = tmp / "run.toml"
    spec.write_text(
        f"[privacy]\nL = {rng.choice([1, 2])}\nK = {rng.choice([2, 5])}\nC = 0.8\n"
        f'sensitive_values = ["hiv"]\n\n[utility]\nscore = "{score}"\n\n'
        '[[attribute]]\nname = "id"\nrole = "identifier"\n\n'
        '[[attribute]]\nname = "a"\nrole = "qid"\ntype = "categorical"\ntaxonomy = "a.txt"\n\n'
        '[[attribute]]\nname = "b"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
        "step = 1\n\n"
        '[[attribute]]\nname = "s"\nrole = "sensitive"\n\n'
        '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["no", "yes"]\n'
    )
    return spec, data


def _cases(tmp: Path, examples_dir: Path) -> list[tuple[Path, Path]]:
    cases = [(examples_dir / "table1" / "run.toml", examples_dir / "table1" / "table1.csv")]
    for seed in (1, 2, 3):
        d = tmp / f"r{seed}"
        d.mkdir()
        cases.append(_random_table(d, seed, 400 + 150 * seed))
    return cases


def _release(
    spec: Path, data: Path, out: Path, budget: str, chunk: int, mp: pytest.MonkeyPatch
) -> bytes:
    mp.setenv("FEDANON_MEMORY_BUDGET", budget)
    mp.setenv("FEDANON_CHUNK_ROWS", str(chunk))
    anonymize_file(Spec.from_toml(spec), data, out, None, False)
    return out.read_bytes()


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_out_of_core_release_is_byte_identical(
    tmp_path: Path, examples_dir: Path, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i, (spec, data) in enumerate(_cases(tmp_path, examples_dir)):
        ref = _release(spec, data, tmp_path / f"mem{i}{suffix}", "off", 1, monkeypatch)
        for chunk in (1, 7, 64):  # chunks cut partitions' slices anywhere
            got = _release(spec, data, tmp_path / f"ooc{i}{chunk}{suffix}", "1", chunk, monkeypatch)
            assert got == ref, (spec, chunk)


def test_spilled_table_and_tips_match_memory(
    tmp_path: Path, examples_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spilled path really is taken (memory-mapped codes, chunked regroup), the codes
    are equal, and after the run every partition holds the same rows in the same order."""
    spec_path, data = _random_table(tmp_path, 5, 3000)
    spec, reader = load_spec(spec_path)
    schema = build_schema(spec, reader)
    monkeypatch.setenv("FEDANON_CHUNK_ROWS", "100")
    mem = encode_table(schema, data, memory_budget="off")
    ooc = encode_table(schema, data, memory_budget="1KB")
    assert mem.spill is None and ooc.spill is not None and ooc.spill.chunk_rows == 100
    assert isinstance(ooc.qid_leaves, np.memmap) and isinstance(ooc.sens, np.memmap)
    for a, b in ((mem.qid_leaves, ooc.qid_leaves), (mem.cls, ooc.cls), (mem.sens, ooc.sens)):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    _same_kept(mem, ooc)
    assert spill.disk_bytes()[0] >= ooc.qid_leaves.nbytes
    parties = []
    for table in (mem, ooc):
        party = LocalParty(schema, table)
        decider = Decider(spec, schema.new_trees(), len(table.class_labels))
        result = run(decider, LocalFederation([party]))
        decider.verify()
        parties.append((party, result))
    (pm, rm), (po, ro) = parties
    assert ro.rounds == rm.rounds >= 2
    assert isinstance(po.tips.order, np.memmap) and po.tips._scratch is not None
    assert np.array_equal(pm.tips.order, po.tips.order)
    n = pm.state.n_parts
    assert np.array_equal(pm.tips.start[:n], po.tips.start[:n])
    assert np.array_equal(pm.tips.end[:n], po.tips.end[:n])


def _same_kept(mem: EncodedTable, ooc: EncodedTable) -> None:
    assert list(mem.kept) == list(ooc.kept) and mem.kept
    for name, col in mem.kept.items():
        got = ooc.kept[name]
        assert isinstance(got.codes, np.memmap)
        assert got.values == col.values and got.codes.dtype == col.codes.dtype
        assert np.array_equal(got.codes, col.codes)


def test_kept_columns_over_many_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept (released unchanged) columns spilled batch by batch, after some batches were
    read in memory: the same distinct values in the same order, the same codes."""
    spec_path, data = _random_table(tmp_path, 6, 5000)
    spec, reader = load_spec(spec_path)
    schema = build_schema(spec, reader)
    monkeypatch.setattr(csvread, "SMALL_INPUT_BYTES", 0)  # Arrow, not the csv module
    monkeypatch.setattr(csvarrow, "BLOCK_BYTES", 2000)  # Arrow's read unit: ~100 rows a batch
    b = csvread.read_batches(data)
    try:
        rows = [batch.rows for batch in b.batches]
    finally:
        b.close()
    assert len(rows) >= 20 and sum(rows) == 5000, rows  # many batches, or the test proves nothing
    mem = encode_table(schema, data, memory_budget="off")
    ooc = encode_table(schema, data, memory_budget=str(1000 * spill.BYTES_PER_ROW))
    _same_kept(mem, ooc)
    assert np.array_equal(mem.qid_leaves, ooc.qid_leaves)
    lines = data.read_text().splitlines()  # and both hold the input's own cells, row by row
    header = lines[0].split(",")
    for name, col in ooc.kept.items():
        i = header.index(name)
        assert [col.values[c] for c in col.codes.tolist()] == [r.split(",")[i] for r in lines[1:]]


def test_spill_files_have_no_name_and_go_with_their_arrays(tmp_path: Path) -> None:
    """Spilled codes are unnamed files: nothing in the directory during or after a run,
    and their bytes are released when the arrays are."""
    gc.collect()
    before = spill.disk_bytes()[0]
    sp = spill.Spill(chunk_rows=10, directory=str(tmp_path))
    arr = sp.array((4, 1000), np.uint16)
    arr[2, 5] = 7
    app = sp.appender(np.uint8)
    app.add(np.arange(5, dtype=np.int64))
    col = app.finish()
    assert list(tmp_path.iterdir()) == []
    assert col.tolist() == [0, 1, 2, 3, 4] and col.dtype == np.uint8
    assert spill.disk_bytes()[0] == before + 8000 + 5
    view = arr[2]
    del arr, col
    gc.collect()
    assert spill.disk_bytes()[0] == before + 8000  # the view keeps the mapping
    assert int(view[5]) == 7
    del view
    gc.collect()
    assert spill.disk_bytes()[0] == before


def test_budget_parsing_and_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    assert spill.parse_budget("4GB") == 4 << 30
    assert spill.parse_budget("512 mb") == 512 << 20
    assert spill.parse_budget("1.5G") == int(1.5 * (1 << 30))
    assert spill.parse_budget("1000") == 1000
    assert spill.parse_budget("auto") == -1 and spill.parse_budget("off") is None
    for bad in ("", "-1GB", "0", "4 parsecs"):
        with pytest.raises(SpecError):
            spill.parse_budget(bad)
    monkeypatch.delenv("FEDANON_CHUNK_ROWS", raising=False)
    assert spill.choose(10**9, None) is None  # "off": never
    assert spill.choose(100, 100 * spill.BYTES_PER_ROW) is None
    got = spill.choose(101, 100 * spill.BYTES_PER_ROW)
    assert got is not None and got.chunk_rows == spill.CHUNK_ROWS
    monkeypatch.setattr(spill, "available_bytes", lambda: 2 * 1000 * spill.BYTES_PER_ROW)
    assert spill.choose(1000, -1) is None and spill.choose(1001, -1) is not None


def test_parquet_writer_streams_row_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Written one row group at a time, the file is the one pq.write_table makes."""
    monkeypatch.setattr(tablewrite, "ROW_GROUP_ROWS", 16)
    rng = np.random.default_rng(3)
    for n in (0, 5, 16, 17, 100):
        coded = [
            Column(["a", "b,c"], rng.integers(0, 2, n).astype(np.uint8)),
            Column([str(i) for i in range(300)], rng.integers(0, 300, n).astype(np.uint16)),
        ]
        got = io.BytesIO()
        tablewrite.write_parquet(got, ["x", "y"], coded)
        arrays = [
            pa.DictionaryArray.from_arrays(pa.array(c.codes), c.arrow_values()) for c in coded
        ]
        ref = io.BytesIO()
        pq.write_table(
            pa.table({"x": arrays[0], "y": arrays[1]}),
            ref,
            row_group_size=16,
            compression="zstd",
            write_batch_size=tablewrite.CHUNK_ROWS,
        )
        assert got.getvalue() == ref.getvalue(), n


def test_party_toml_memory_budget(tmp_path: Path) -> None:
    from fedanon.errors import ConfigError
    from fedanon.party.config import parse_party_config
    from fedanon.party.tablecache import TableCache

    base = (
        '[party]\nname = "h"\nlisten = "127.0.0.1:0"\ndata = "t.csv"\n{extra}\n'
        '[tls]\nca = "ca.pem"\ncert = "h.pem"\nkey = "h.key"\n'
    )
    assert parse_party_config(base.format(extra=""), "p.toml").memory_budget is None
    cfg = parse_party_config(base.format(extra='memory_budget = "16GB"'), "p.toml")
    assert cfg.memory_budget == "16GB"
    assert TableCache(cfg.data, True, cfg.memory_budget).memory_budget == "16GB"
    for bad in ('"lots"', "16"):
        with pytest.raises(ConfigError, match="memory_budget"):
            parse_party_config(base.format(extra=f"memory_budget = {bad}"), "p.toml")


def test_cli_memory_budget_flag(
    tmp_path: Path, examples_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fedanon anonymize --memory-budget`: a tiny budget spills (progress says so) and
    releases the in-memory bytes; a malformed budget is a usage error before any output."""
    from fedanon.cli.main import main

    monkeypatch.setenv("FEDANON_MEMORY_BUDGET", "off")
    monkeypatch.setenv("FEDANON_CHUNK_ROWS", "3")
    spec, data = examples_dir / "table1" / "run.toml", examples_dir / "table1" / "table1.csv"
    args = ["anonymize", "--spec", str(spec), "--input", str(data), "--quiet"]
    ref, got = tmp_path / "mem.csv", tmp_path / "ooc.csv"
    assert main([*args, "--output", str(ref)]) == 0
    from fedanon.io import table as table_mod

    spilled: list[bool] = []

    def recording(n_rows: int, budget: int | None) -> spill.Spill | None:
        out = spill.choose(n_rows, budget)
        spilled.append(out is not None)
        return out

    monkeypatch.setattr(table_mod, "choose", recording)
    assert main([*args, "--output", str(got), "--memory-budget", "1"]) == 0
    assert got.read_bytes() == ref.read_bytes()
    assert any(spilled)  # the flag, not the environment ("off"), decided
    bad = tmp_path / "bad.csv"
    assert main([*args, "--output", str(bad), "--memory-budget", "lots"]) == 2
    assert not bad.exists()
