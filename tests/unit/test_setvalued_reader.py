"""The one reader of set-valued columns (fedanon.io.setvalued / setread): CSV, gzip CSV,
Parquet list and delimited columns give the same CSR codes; bad cells are refused naming the
file, the physical line (row for Parquet), the column and the item."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedanon.errors import DataError, SpecError
from fedanon.io.setread import SetColumns, read_set_column, read_set_columns
from fedanon.io.setvalued import SetColumnSpec, SetValues
from fedanon.io.sources import open_batches

ITEMS = ("250.00", "401.9", "410.1", "V30")
SPEC = SetColumnSpec(
    "dx", ITEMS, source="taxonomy dx.txt", non_items=frozenset({"*", "25*"}), noun="code"
)
# records as lists (the truth), and the same as CSV cells: spaces, repeats, empty sets
RECORDS = [["401.9", "250.00"], [], ["V30"], ["250.00", "401.9", "250.00"], ["410.1"]]
CSV = 'id,dx,sex\n1,"401.9|250.00",F\n2,,M\n\n3, V30 ,M\n4,"250.00 | 401.9|250.00",F\n5,410.1,M\n'
WANT_PTR = [0, 2, 2, 3, 5, 6]
WANT_ITEMS = [0, 1, 3, 0, 1, 2]


def _check(v: SetValues) -> None:
    assert v.indptr.tolist() == WANT_PTR and v.items.tolist() == WANT_ITEMS
    assert v.items.dtype == np.uint8 and v.repeats == 1 and v.n == 5


def _csv(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_csv_and_gzip_csv(tmp_path: Path) -> None:
    _check(read_set_column(_csv(tmp_path, CSV), SPEC))
    gz = tmp_path / "t.csv.gz"
    gz.write_bytes(gzip.compress(CSV.encode()))
    _check(read_set_column(gz, SPEC))


def test_parquet_list_and_delimited_columns(tmp_path: Path) -> None:
    lists = tmp_path / "lists.parquet"
    pq.write_table(pa.table({"dx": pa.array(RECORDS, pa.list_(pa.string()))}), lists)
    _check(read_set_column(lists, SPEC))
    text = tmp_path / "text.parquet"
    cells = ["|".join(r) for r in RECORDS]
    pq.write_table(pa.table({"dx": pa.array(cells, pa.string())}), text)
    _check(read_set_column(text, SPEC))
    large = tmp_path / "large.parquet"  # large_list of dictionary-encoded strings
    arr = pa.array(RECORDS, pa.large_list(pa.dictionary(pa.int32(), pa.string())))
    pq.write_table(pa.table({"dx": arr}), large)
    _check(read_set_column(large, SPEC))


def test_many_batches_equal_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Across batch boundaries (a large gzip CSV read by Arrow in blocks, Parquet in small
    batches) the CSR is the concatenation of the records' sets."""
    import fedanon.io.csvarrow as csvarrow
    import fedanon.io.sources.parquet as parquet

    monkeypatch.setattr(csvarrow, "BLOCK_BYTES", 1 << 16)
    monkeypatch.setattr(parquet, "BATCH_ROWS", 5000)
    rng = np.random.default_rng(1)
    n = 40_000
    recs = [sorted(set(rng.choice(len(ITEMS), size=rng.integers(0, 4)).tolist())) for _ in range(n)]
    body = "\n".join(f'{i},"{"|".join(ITEMS[c] for c in r)}"' for i, r in enumerate(recs))
    gz = tmp_path / "big.csv.gz"
    gz.write_bytes(gzip.compress(("id,dx\n" + body + "\n").encode()))
    pqf = tmp_path / "big.parquet"
    pq.write_table(
        pa.table({"dx": pa.array([[ITEMS[c] for c in r] for r in recs])}), pqf, row_group_size=7000
    )
    for f in (gz, pqf):
        batches = open_batches(f, None, ["dx"])
        assert len([x.rows for x in batches.batches]) > 3
        batches.close()
    a, b = read_set_column(gz, SPEC), read_set_column(pqf, SPEC)
    want = np.concatenate([[0], np.cumsum([len(r) for r in recs])])
    assert np.array_equal(a.indptr, want) and np.array_equal(b.indptr, want)
    flat = [c for r in recs for c in r]
    assert a.items.tolist() == flat == b.items.tolist()


def test_quoted_separator_is_the_sets(tmp_path: Path) -> None:
    spec = SetColumnSpec("dx", ITEMS, separator=",")
    p = _csv(tmp_path, 'id,dx\n1,"401.9,250.00"\n2,"V30"\n')
    assert read_set_column(p, spec).items.tolist() == [0, 1, 3]
    bad = _csv(tmp_path, "id,dx\n1,401.9,250.00\n", "bad.csv")  # unquoted: one field too many
    with pytest.raises(DataError) as e:
        read_set_column(bad, spec)
    assert e.value.line == 2 and "3 fields" in str(e.value)


@pytest.mark.parametrize(
    ("cell", "message", "value", "expected"),
    [
        ('"401.9||250.00"', "empty code", "", "separated by a single '|'"),
        ('"401.9|"', "empty code", "", "separated by a single '|'"),
        ('"401.9|999.9"', "unknown code", "999.9", "a leaf code of taxonomy dx.txt (e.g. 250.00"),
        ('"25*|401.9"', "not a leaf of the hierarchy", "25*", "a most specific code"),
    ],
)
def test_bad_items_name_line_column_item(
    tmp_path: Path, cell: str, message: str, value: str, expected: str
) -> None:
    p = _csv(tmp_path, f"id,dx\n1,401.9\n\n\n2,{cell}\n3,V30\n")
    with pytest.raises(DataError) as e:
        read_set_column(p, SPEC)
    err = e.value
    assert (err.file, err.line, err.column, err.value) == (str(p), 5, "dx", value)
    assert message in err.message and expected in (err.expected or "")
    assert err.exit_code == 2


def test_policies_duplicates_and_empty(tmp_path: Path) -> None:
    p = _csv(tmp_path, 'id,dx\n1,V30\n2,"410.1|V30|410.1"\n3,\n')
    strict = SetColumnSpec("dx", ITEMS, duplicates="error")
    with pytest.raises(DataError, match="listed twice") as e:
        read_set_column(p, strict)
    assert e.value.line == 3 and e.value.value == "410.1"
    no_empty = SetColumnSpec("dx", ITEMS, empty="error")
    with pytest.raises(DataError, match="empty set") as e:
        read_set_column(p, no_empty)
    assert e.value.line == 4
    merged = read_set_column(p, SetColumnSpec("dx", ITEMS))
    assert merged.repeats == 1 and merged.lengths().tolist() == [1, 2, 0]


def test_parquet_nulls_by_policy(tmp_path: Path) -> None:
    p = tmp_path / "n.parquet"
    pq.write_table(pa.table({"dx": pa.array([["V30"], None, ["410.1", None]])}), p)
    with pytest.raises(DataError, match="NULL") as e:
        read_set_column(p, SPEC)
    assert "row 2" in e.value.message and e.value.column == "dx"
    lenient = SetColumnSpec("dx", ITEMS, null="empty_set")
    with pytest.raises(DataError, match="empty item") as e:  # a NULL element is no item
        read_set_column(p, lenient)
    assert "row 3" in e.value.message
    ok = tmp_path / "ok.parquet"
    pq.write_table(pa.table({"dx": pa.array([["V30"], None, ["410.1"]])}), ok)
    assert read_set_column(ok, lenient).lengths().tolist() == [1, 0, 1]


def test_wrong_type_and_bad_descriptor(tmp_path: Path) -> None:
    p = tmp_path / "f.parquet"
    pq.write_table(pa.table({"dx": pa.array([1.5, 2.5])}), p)
    with pytest.raises(DataError, match="column has type double"):
        read_set_column(p, SPEC)
    with pytest.raises(SpecError, match="contains the separator"):
        SetColumnSpec("dx", ("a|b", "c"))
    with pytest.raises(SpecError, match="listed twice"):
        SetColumnSpec("dx", ("a", "a"))
    with pytest.raises(SpecError, match="unknown policy"):
        SetColumnSpec("dx", ("a",), duplicates="keep")


def test_out_of_core_equals_in_memory(tmp_path: Path) -> None:
    p = _csv(tmp_path, CSV)
    spec2 = SetColumnSpec("dx", ITEMS)
    in_mem = read_set_columns(p, [spec2], memory_budget="off")["dx"]
    spilled = read_set_columns(p, [spec2], memory_budget="1B")["dx"]
    assert isinstance(spilled.items, np.memmap)
    assert np.array_equal(in_mem.indptr, spilled.indptr)
    assert np.array_equal(in_mem.items, spilled.items)


def test_set_columns_fold_batches_read_by_the_caller(tmp_path: Path) -> None:
    p = _csv(tmp_path, CSV)
    b = open_batches(p, None, ["dx", "sex"])
    cols = SetColumns([SPEC], memory_budget="off")
    for batch in b.batches:
        cols.add(b, batch)
    b.close()
    _check(cols.finish()["dx"])


def test_parquet_row_group_dictionary_is_split_per_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parquet hands every batch the dictionary of its whole row group: only the batch's own
    cells are split (at 1M mostly distinct cells, splitting the whole dictionary per batch
    took 11.5 s and 565 MB instead of 1 s), with NULL rows kept apart."""
    import pyarrow.compute as pc

    import fedanon.io.sources.parquet as parquet

    monkeypatch.setattr(parquet, "BATCH_ROWS", 1000)
    split = pc.split_pattern
    widths: list[int] = []

    def spy(cells: pa.Array, *a: object, **kw: object) -> pa.Array:
        widths.append(len(cells))
        return split(cells, *a, **kw)

    monkeypatch.setattr(pc, "split_pattern", spy)
    vocab = tuple(f"c{i}" for i in range(5000))
    rng = np.random.default_rng(3)
    picks = [rng.choice(5000, size=rng.integers(1, 6), replace=False) for _ in range(20_000)]
    cells: list[str | None] = ["|".join(vocab[j] for j in c) for c in picks]
    cells[1234] = None
    p = tmp_path / "wide.parquet"
    pq.write_table(pa.table({"dx": pa.array(cells, pa.string())}), p)
    v = read_set_column(p, SetColumnSpec("dx", vocab, null="empty_set"))
    assert widths and max(widths) <= 1001 and len(widths) == 20
    want = [sorted(c.tolist()) if i != 1234 else [] for i, c in enumerate(picks)]
    assert v.lengths().tolist() == [len(w) for w in want]
    assert v.items.tolist() == [x for w in want for x in w]


@pytest.mark.parametrize("sep", [";", ","])
def test_other_separator_is_named(tmp_path: Path, sep: str) -> None:
    """A cell joined by another separator than the column's is refused naming both (it was
    only 'unknown code', which sent the user hunting for a code that is fine)."""
    p = _csv(tmp_path, f'id,dx\n1,401.9\n2,"401.9{sep}250.00"\n')
    with pytest.raises(DataError) as e:
        read_set_column(p, SPEC)
    err = e.value
    assert (err.file, err.line, err.column, err.value) == (str(p), 3, "dx", f"401.9{sep}250.00")
    assert f"joined by {sep!r}" in (err.expected or "") and "separator is '|'" in (
        err.expected or ""
    )
    assert err.exit_code == 2
    # an unknown code that merely contains such a character gets no hint
    q = _csv(tmp_path, f'id,dx\n1,"401.9{sep}999"\n', "u.csv")
    with pytest.raises(DataError) as e:
        read_set_column(q, SPEC)
    assert "joined by" not in (e.value.expected or "")
