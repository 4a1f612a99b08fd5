"""The IBLT union sketch (common/union): encoding, linearity, peeling, failure and tampering."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedanon import union
from fedanon.errors import DataError, ProtocolError
from fedanon.io.table import Column
from fedanon.security.securesum import add_share, draw_mask, unmask
from fedanon.union.decode import MalformedRecord, decode_rows
from fedanon.union.iblt import to_cells, to_rows
from fedanon.union.layout import Layout, Table, cells_for, lane_bytes
from fedanon.union.records import CLASS_BOUNDS, class_of, varint

Record = tuple[int, tuple[str, ...]]

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# any Unicode text (no lone surrogates: they are not strings a CSV can hold), with the
# characters that break naive encodings made likely, and values longer than 1 KB
chars = st.characters(exclude_categories=("Cs",))
nasty = st.sampled_from(["", ",", '"', "\n", "\r\n", "\0", "é", "€", "𝄞", "a,b", '"x"'])
short_text = st.one_of(nasty, st.text(chars, max_size=12))
long_text = st.builds(
    lambda s, n: s * n, st.text(chars, min_size=1, max_size=4), st.integers(300, 600)
)
field = st.one_of(short_text, short_text, short_text, long_text)


def records_of(n_fields: int, max_size: int = 30) -> st.SearchStrategy[list[Record]]:
    rec = st.tuples(
        st.integers(0, 5) | st.integers(0, 2**63 - 1),
        st.tuples(*[field] * n_fields),
    )
    return st.lists(rec, max_size=max_size)


def encode(recs: Sequence[Record], n_fields: int) -> union.RecordSet:
    gid = np.asarray([g for g, _ in recs], dtype=np.int64)
    cols = [[r[f] for _, r in recs] for f in range(n_fields)]
    return union.encode_records(gid, cols)


def multiset(result: union.PeeledRecords) -> Counter[Record]:
    out: Counter[Record] = Counter()
    strings = [c.strings() for c in result.columns]
    for i, (g, n) in enumerate(zip(result.group.tolist(), result.count.tolist(), strict=True)):
        out[(g, tuple(s[i] for s in strings))] += n
    return out


def run_union(
    parties: Sequence[Sequence[Record]], n_fields: int, factor: float = union.DEFAULT_FACTOR
) -> tuple[union.Layout, bytes, np.ndarray]:
    """One attempt of the protocol without the network: histogram sum, plan, sketches
    through the masked ring sum; returns layout, key and the unmasked sum."""
    encoded = [encode(p, n_fields) for p in parties]
    hist = sum((r.histogram() for r in encoded), np.zeros(CLASS_BOUNDS.size, np.int64))
    layout = union.plan(hist, n_fields, factor)
    key = union.new_key()
    mask = draw_mask(layout.size)
    masked = mask
    for r in encoded:
        masked = add_share(masked, union.sketch(r, layout, key).view(np.int64))
    return layout, key, unmask(masked, mask)


def peeled(
    parties: Sequence[Sequence[Record]], n_fields: int
) -> tuple[union.Layout, bytes, np.ndarray, union.PeeledRecords]:
    """The protocol as the leader runs it: a rare PeelingFailed (about 0.1 % per table) is
    retried with a fresh key."""
    for _ in range(4):
        layout, key, summed = run_union(parties, n_fields)
        try:
            return layout, key, summed, union.peel(layout, key, summed)
        except union.PeelingFailed:
            continue
    raise AssertionError("four attempts failed to peel")


def _peel_retrying(
    encoded: union.RecordSet, n_fields: int, known: tuple[tuple[str, ...], ...]
) -> union.PeeledRecords:
    """One party's records through sketch and peel as the leader retries: a rare
    PeelingFailed (the key draws records onto the same cells) is retried with a fresh key
    and a grown table."""
    layout = union.plan(encoded.histogram(), n_fields)
    for _ in range(4):
        key = union.new_key()
        try:
            return union.peel(layout, key, union.sketch(encoded, layout, key), known=known)
        except union.PeelingFailed:
            layout = layout.grown()
    raise AssertionError("four attempts failed to peel")


# --- record encoding -----------------------------------------------------------------------


def test_varint() -> None:
    assert varint(0) == b"\0"
    assert varint(127) == b"\x7f"
    assert varint(128) == b"\x80\x01"
    assert varint(300) == b"\xac\x02"
    with pytest.raises(ValueError):
        varint(-1)


@SETTINGS
@given(st.integers(1, 3).flatmap(lambda f: st.tuples(st.just(f), records_of(f))))
def test_encoding_round_trip(case: tuple[int, list[Record]]) -> None:
    n_fields, recs = case
    encoded = encode(recs, n_fields)
    width = int(encoded.nbytes.max(initial=0)) + 5
    rows = encoded.rows(np.arange(len(recs)), width)
    gid, cols = decode_rows(rows, n_fields)
    assert gid.tolist() == [g for g, _ in recs]
    assert [c.strings() for c in cols] == [[r[f] for _, r in recs] for f in range(n_fields)]
    # the encoding is exactly varint(group) + per field varint(2 v + 1) for a canonical
    # number v, else varint(2 len) + utf-8
    for i, (g, fields) in enumerate(recs):
        want = varint(g) + b"".join(_field_bytes(v) for v in fields)
        assert rows[i].tobytes() == want + bytes(width - len(want))
        assert encoded.size_class[i] == class_of(np.asarray([len(want)]))[0]


def _field_bytes(v: str) -> bytes:
    if v.isascii() and v.isdigit() and len(v) <= 18 and (v == "0" or v[0] != "0"):
        return varint(2 * int(v) + 1)
    return varint(2 * len(v.encode())) + v.encode()


def test_short_forms() -> None:
    """Declared values by their index, canonical numbers by their value after them; any
    other string as text, also one that looks almost like a number."""
    known = {"no": 0, "yes": 1}
    assert union.encode_value("yes", known) == varint(3)
    assert union.encode_value("0", known) == varint(2 * 2 + 1)
    assert union.encode_value("300", known) == varint(2 * 302 + 1)
    assert union.encode_value("9" * 18, {}) == varint(2 * (10**18 - 1) + 1)
    for text in ("", "007", "-1", "+1", "1.0", " 1", "١٢", "9" * 19, "Yes"):
        data = text.encode()
        assert union.encode_value(text, known) == varint(2 * len(data)) + data


def _old_order(recs: Sequence[Record]) -> list[Record]:
    """The canonical order by its definition: group id, length class and bytes of the
    records' text encoding."""

    def text(r: Record) -> bytes:
        return varint(r[0]) + b"".join(varint(len(v.encode())) + v.encode() for v in r[1])

    return sorted(
        set(recs), key=lambda r: (r[0], int(class_of(np.asarray([len(text(r))]))[0]), text(r))
    )


@SETTINGS
@given(records_of(3, max_size=60), st.sampled_from([(), ("1", "x", "0", "")]))
def test_canonical_order_is_the_text_encodings(
    recs: list[Record], declared: tuple[str, ...]
) -> None:
    """Whatever the short forms, records come in the order of their text encodings (the
    order of every release before them)."""
    recs = recs + [(g, ("12", "3", v)) for g, (v, *_) in recs[:10]] + [(1, ("x", "0", ""))]
    known = (declared, (), declared)
    encoded = union.encode_records(
        np.asarray([g for g, _ in recs], dtype=np.int64),
        [[r[f] for _, r in recs] for f in range(3)],
        known=known,
    )
    result = _peel_retrying(encoded, 3, known)
    strings = [c.strings() for c in result.columns]
    got = [(g, tuple(s[i] for s in strings)) for i, g in enumerate(result.group.tolist())]
    assert got == _old_order(recs)
    assert Counter(recs) == multiset(result)


@pytest.mark.parametrize(
    ("row", "match"),
    [
        (b"\x00\x02" + b"7", "has a short form"),  # "7" as text
        (b"\x00\x06yes", "has a short form"),  # a declared value as text
        (b"\x00" + varint(2 * (2 + 1) + 1), "declared value"),  # 1 after the declared: "1"
        (b"\x00" + varint(2 * (2 + 10**18) + 1), "out of range"),
    ],
)
def test_decode_rejects_a_second_encoding(row: bytes, match: str) -> None:
    rows = np.frombuffer(row + bytes(16 - len(row)), dtype=np.uint8).reshape(1, 16)
    with pytest.raises(MalformedRecord, match=match):
        decode_rows(rows, 1, (("yes", "1"),))


def test_coded_columns_equal_string_columns() -> None:
    values = ("b", "a,\n", "")
    codes = np.asarray([2, 0, 1, 1, 0], dtype=np.int64)
    coded = union.encode_records(np.arange(5), [Column(values, codes)])
    plain = union.encode_records(np.arange(5), [[values[c] for c in codes]])
    width = 16
    assert np.array_equal(coded.rows(np.arange(5), width), plain.rows(np.arange(5), width))


def test_bad_values_are_data_errors() -> None:
    with pytest.raises(DataError, match="a released value"):
        union.encode_records([0, 1], [["a", None]])  # type: ignore[list-item]
    with pytest.raises(DataError, match="float"):
        union.encode_records([0], [[1.5]])  # type: ignore[list-item]
    with pytest.raises(DataError, match="Unicode"):
        union.encode_records([0], [["\ud800"]])
    with pytest.raises(DataError, match="negative"):
        union.encode_records([-1], [["a"]])
    with pytest.raises(DataError, match="values for"):
        union.encode_records([0, 1], [["a"]])
    with pytest.raises(DataError, match="out of range"):
        union.encode_records([0], [Column(("a",), np.asarray([1]))])


@pytest.mark.parametrize(
    "row",
    [
        b"\x00\x80\x00",  # non-canonical varint (128 encoded as 0x80 0x00)
        b"\x00\x09abc",  # truncated field
        b"\x00\x01a\x00\x07",  # non-zero padding
        b"\x00\x01\xff\x00",  # invalid UTF-8
        b"\x00\x02\xc3",  # truncated UTF-8 + truncated field
        b"\x80" * 8,  # truncated varint
    ],
)
def test_decode_rejects_malformed(row: bytes) -> None:
    rows = np.frombuffer(row + bytes(8 - len(row)), dtype=np.uint8).reshape(1, 8)
    with pytest.raises(MalformedRecord):
        decode_rows(rows, 1)
    # between valid records (a field or varint running on into the next row's bytes)
    good = b"\x01\x03" + bytes(6)  # group 1, the number 1
    padded = row + bytes(8 - len(row))
    for where in range(3):
        block = [good] * 3
        block[where] = padded
        rows = np.frombuffer(b"".join(block), dtype=np.uint8).reshape(3, 8)
        with pytest.raises(MalformedRecord):
            decode_rows(rows, 1)


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([b"\x01\x03\x05", b"\x02\xff\x7f\x03"], [["1", "8191"], ["2", "1"]]),  # numbers
        ([b"\x01\x04ab\x05", b"\x02\x03\x02z"], [["ab", "1"], ["2", "z"]]),  # some text
        ([b"\x00\x00\x00", b"\x00\x02q\x00"], [["", "q"], ["", ""]]),  # empty text
    ],
)
def test_decode_reads_every_field_of_every_record(
    rows: list[bytes], expected: list[list[str]]
) -> None:
    """Records that end exactly at their row's end or before, short forms and text mixed."""
    width = max(map(len, rows))
    block = np.frombuffer(b"".join(r + bytes(width - len(r)) for r in rows), dtype=np.uint8)
    gid, cols = decode_rows(block.reshape(len(rows), width), len(expected))
    assert gid.tolist() == [r[0] for r in rows]
    assert [c.strings() for c in cols] == expected


def test_lanes_round_trip() -> None:
    table = Table(size_class=3, records=10, lane_bytes=5, width=7, cells=4)
    rows = np.random.default_rng(0).integers(0, 256, size=(9, 35), dtype=np.uint8)
    cells = to_cells(rows, table)
    assert cells.shape == (9, 9) and int(cells.max()) < 2**40 and not cells[:, :2].any()
    assert np.array_equal(to_rows(cells[:, 2:], table), rows)


# --- layout -------------------------------------------------------------------------------


def test_lane_bytes_keep_sums_exact() -> None:
    assert [lane_bytes(n) for n in (1, 256, 257, 65536, 65537, 2**24, 2**24 + 1)] == [
        7, 7, 6, 6, 5, 5, 4,
    ]  # fmt: skip
    with pytest.raises(ValueError):
        lane_bytes(2**32 + 1)
    for n in (1, 256, 65536, 2**24, 2**32):
        assert n * (2 ** (8 * lane_bytes(n)) - 1) < 2**64


def test_plan_and_digest() -> None:
    hist = np.zeros(CLASS_BOUNDS.size, dtype=np.int64)
    hist[[2, 9]] = [1000, 3]
    layout = union.plan(hist, 4)
    assert [t.size_class for t in layout.tables] == [2, 9]
    assert layout.n_records == 1003
    for t in layout.tables:
        assert t.width * t.lane_bytes >= CLASS_BOUNDS[t.size_class]
        assert t.cells == cells_for(t.records, union.DEFAULT_FACTOR)
    assert layout.size == sum(3 * t.cells * (t.width + 2) for t in layout.tables)
    assert layout.digest == union.plan(hist, 4).digest
    assert layout.digest != union.plan(hist, 5).digest
    assert layout.digest != layout.grown().digest
    assert all(g.cells > t.cells for g, t in zip(layout.grown().tables, layout.tables, strict=True))
    with pytest.raises(ValueError):
        union.plan(hist[:-1], 4)
    with pytest.raises(ValueError):
        union.plan(-hist, 4)


def test_sketch_refuses_a_layout_without_room() -> None:
    recs = encode([(0, ("a",)), (0, ("b" * 100,))], 1)
    layout = union.plan(encode([(0, ("a",))], 1).histogram(), 1)
    with pytest.raises(ProtocolError, match="no room"):
        union.sketch(recs, layout, union.new_key())
    with pytest.raises(ProtocolError, match="fields"):
        union.sketch(recs, union.plan(recs.histogram(), 2), union.new_key())
    with pytest.raises(ValueError, match="32 bytes"):
        union.sketch(recs, union.plan(recs.histogram(), 1), b"short")


# --- linearity and peeling ----------------------------------------------------------------


@SETTINGS
@given(
    st.integers(1, 3).flatmap(
        lambda f: st.tuples(
            st.just(f),
            records_of(f, max_size=12),
            st.lists(st.lists(st.integers(0, 11), max_size=40), min_size=1, max_size=5),
        )
    )
)
def test_peeling_recovers_the_union_multiset(
    case: tuple[int, list[Record], list[list[int]]],
) -> None:
    n_fields, pool, picks = case
    # parties draw from a small pool: duplicates within and across parties are common
    parties = [[pool[i % len(pool)] for i in p] if pool else [] for p in picks]
    *_, result = peeled(parties, n_fields)
    want = Counter(r for p in parties for r in p)
    assert multiset(result) == want
    assert result.n_records == sum(want.values())
    # canonical order: group ids ascending, no record twice
    assert (np.diff(result.group) >= 0).all()
    assert result.n_distinct == len(want)


def test_sketch_is_linear() -> None:
    a = [(0, ("x", "1")), (1, ("y", "")), (0, ("x", "1"))]
    b = [(0, ("x", "1")), (7, ("é" * 2000, "z"))]
    both = encode(a + b, 2)
    layout, key = union.plan(both.histogram(), 2), union.new_key()
    sa, sb = (union.sketch(encode(r, 2), layout, key) for r in (a, b))
    assert np.array_equal(sa + sb, union.sketch(both, layout, key))


def test_identical_records_everywhere() -> None:
    rec = (3, ("same", 'ünïcödé, "quoted"\n'))
    parties = [[rec] * 500, [rec] * 500, [rec] * 500]
    *_, result = peeled(parties, 2)
    assert result.n_distinct == 1 and result.count.tolist() == [1500]
    gids, cols = result.expand()
    assert gids.tolist() == [3] * 1500 and cols[1] == [rec[1][1]] * 1500


def test_word_sums_are_exact_at_the_lane_limit() -> None:
    # 256 copies of a record whose lanes are all 0xFF..: 256 * (2^56 - 1) < 2^64, and the
    # 7-byte lanes of a 256-record table must not wrap
    rec = (2**63 - 1, ("\U0010ffff" * 40, "\xff" * 30))
    layout, _, _, result = peeled([[rec] * 100, [rec] * 156], 2)
    assert {t.lane_bytes for t in layout.tables} == {7}
    assert multiset(result) == Counter({rec: 256})


def test_canonical_order_does_not_depend_on_parties_or_key() -> None:
    rng = np.random.default_rng(3)
    recs = [(int(rng.integers(0, 4)), (f"v{rng.integers(0, 50)}", "é" * int(rng.integers(0, 9))))
            for _ in range(300)]  # fmt: skip
    outs = []
    for split in (1, 3, 5):
        gids, cols = peeled([recs[p::split] for p in range(split)], 2)[3].expand()
        outs.append((gids.tolist(), cols))
    assert outs[0] == outs[1] == outs[2]


def test_empty_union() -> None:
    layout, _, _, result = peeled([[], []], 2)
    assert layout.size == 0
    gids, cols = result.expand()
    assert result.n_records == 0 and gids.size == 0 and cols == [[], []]


# --- failures -----------------------------------------------------------------------------


def distinct_records(n: int) -> list[Record]:
    return [(i % 3, (f"record {i}", str(i * 7919))) for i in range(n)]


def test_forced_peeling_failure_then_retry() -> None:
    recs = distinct_records(400)
    encoded = encode(recs, 2)
    tight = Layout(
        2, tuple(Table(t.size_class, t.records, t.lane_bytes, t.width, 40)
                 for t in union.plan(encoded.histogram(), 2).tables)
    )  # fmt: skip
    key = union.new_key()
    with pytest.raises(union.PeelingFailed, match="could not be peeled"):
        union.peel(tight, key, union.sketch(encoded, tight, key))
    # what the leader does: a fresh key and a bigger table, until it peels
    layout = tight
    for _ in range(12):
        layout, key = layout.grown(1.5), union.new_key()
        try:
            result = union.peel(layout, key, union.sketch(encoded, layout, key))
            break
        except union.PeelingFailed:
            continue
    else:
        pytest.fail("no retry succeeded")
    assert multiset(result) == Counter(recs)


TAMPER_RECORDS = [(0, ("a", "b"))] * 3 + distinct_records(60)
TAMPER_CASE = peeled([TAMPER_RECORDS[::2], TAMPER_RECORDS[1::2]], 2)[:3]


@SETTINGS
@given(
    st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 2**64 - 1)),
        min_size=1,
        max_size=3,
    )
)
def test_tampering_is_detected_never_a_wrong_record(
    corruptions: list[tuple[float, int]],
) -> None:
    layout, key, summed = TAMPER_CASE
    bad = summed.view(np.uint64).copy()
    for where, delta in corruptions:
        pos = int(where * bad.size)
        bad[pos] = (int(bad[pos]) + delta) % 2**64
    if np.array_equal(bad, summed.view(np.uint64)):  # the deltas cancelled out
        return
    with pytest.raises((union.CorruptSketch, union.PeelingFailed)):
        union.peel(layout, key, bad)
    assert multiset(union.peel(layout, key, summed)) == Counter(TAMPER_RECORDS)  # untouched


def test_wrong_key_or_layout_is_detected() -> None:
    layout, key, summed, _ = peeled([distinct_records(200)], 2)
    with pytest.raises((union.CorruptSketch, union.PeelingFailed)):
        union.peel(layout, union.new_key(), summed)
    with pytest.raises(union.CorruptSketch, match="64-bit"):
        union.peel(layout, key, summed[:-1])
    with pytest.raises(union.CorruptSketch):
        union.peel(layout.grown(), key, np.zeros(layout.grown().size, dtype=np.uint64))


def test_targeted_tampering_of_a_pure_cell() -> None:
    layout, key, summed = TAMPER_CASE
    t = max(range(len(layout.tables)), key=lambda i: layout.tables[i].records)
    table, offset = layout.tables[t], layout.offsets()[t]
    cells = summed.view(np.uint64)[offset : offset + table.size].reshape(-1, table.lanes)
    first = offset + int(np.flatnonzero(cells[:, 0] == 1)[0]) * table.lanes  # a pure cell
    # a changed word: the cell would decode to another record without the checksum
    bad = summed.view(np.uint64).copy()
    bad[first + 2] ^= np.uint64(1)
    with pytest.raises((union.CorruptSketch, union.PeelingFailed)):
        union.peel(layout, key, bad)
    # a doubled cell still looks pure (2 copies), but its record is not in its other cells
    bad = summed.view(np.uint64).copy()
    bad[first : first + table.lanes] *= np.uint64(2)
    with pytest.raises(union.CorruptSketch):
        union.peel(layout, key, bad)
    # the same record added once more everywhere is a consistent sketch: a lying party can
    # always add records, but then the counts disagree with the histogram the leader holds
    extra = union.sketch(encode([(0, ("a", "b"))], 2), layout, key)
    with pytest.raises(union.CorruptSketch, match="histogram"):
        union.peel(layout, key, summed.view(np.uint64) + extra)


def _field_rows(values: list[bytes], gid: int = 5) -> np.ndarray:
    """Encoded rows (group varint, one field) of equal-length values, zero padded to 16."""
    out = np.zeros((len(values), 16), dtype=np.uint8)
    for i, v in enumerate(values):
        rec = varint(gid) + varint(2 * len(v)) + v
        out[i, : len(rec)] = np.frombuffer(rec, dtype=np.uint8)
    return out


def test_large_columns_decode_exactly_without_pandas() -> None:
    """Many values of one length are factorized over their bytes (Arrow), exact and in
    first-appearance order, without importing pandas (the leader's 0.3-0.5 s)."""
    import subprocess
    import sys

    code = """
import sys
import numpy as np
from fedanon.pandasgate import NoPandas
sys.meta_path.insert(0, NoPandas())
from fedanon.union.decode import decode_rows
from fedanon.union.records import varint
n = 1 << 18
vals = [b"%07d" % (i % 200_003) for i in range(n)]
rows = np.zeros((n, 16), dtype=np.uint8)
for i, v in enumerate(vals):
    rec = varint(3) + varint(14) + v
    rows[i, : len(rec)] = np.frombuffer(rec, dtype=np.uint8)
gid, (col,) = decode_rows(rows, 1)
assert (gid == 3).all()
assert [col.values[c] for c in col.codes.tolist()] == [v.decode() for v in vals]
assert list(col.values[:3]) == ["0000000", "0000001", "0000002"]
assert "pandas" not in sys.modules, "pandas was imported"
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_large_columns_refuse_invalid_utf8() -> None:
    from fedanon.union import decode

    n = decode.ARROW_FROM
    values = [b"x%04x" % i for i in range(n - 1)] + [b"ab\xffcd"]
    with pytest.raises(MalformedRecord, match="UTF-8"):
        decode_rows(_field_rows(values), 1)
    gid, (col,) = decode_rows(_field_rows([*values[:-1], b"a\xc3\xa9cd"]), 1)
    assert col.values[col.codes[-1]] == "aécd" and (gid == 5).all()


@SETTINGS
@given(
    st.lists(
        st.sampled_from([1, 2, 5, 1 << 20, 1 << 40, (1 << 62) - 1]), min_size=1, max_size=6
    ).flatmap(
        lambda bounds: st.tuples(
            st.just(bounds),
            st.lists(st.tuples(*[st.integers(0, b - 1) for b in bounds]), max_size=200),
        )
    )
)
def test_lex_order_is_lexsort(case: tuple[list[int], list[tuple[int, ...]]]) -> None:
    """The canonical order's sort: packed keys, ties sorted again by the rest."""
    from fedanon.union.canon import lex_order

    bounds, rows = case
    keys = [np.asarray([r[j] for r in rows], dtype=np.int64) for j in range(len(bounds))]
    order, new = lex_order(keys)
    got = [tuple(int(k[i]) for k in keys) for i in order.tolist()]
    assert got == sorted(rows)
    assert new.tolist() == [i == 0 or got[i] != got[i - 1] for i in range(len(got))]


def test_large_dictionaries_encode_as_one_by_one() -> None:
    """A dictionary of VECTOR_FROM values or more is encoded at once (Arrow finds the
    numbers): every value's bytes are those of encode_value."""
    from fedanon.union.packed import VECTOR_FROM, encode_column

    values = [str(i * 7919) for i in range(VECTOR_FROM)]
    values += ["007", "0", "-3", "١٢", "9" * 18, "9" * 19, "1\n", "x", "", "yes", "12", "é€"]
    known = ("yes", "12")
    got = encode_column(values, "c", known)
    index = {v: i for i, v in enumerate(known)}
    for i, v in enumerate(values):
        assert got.data[i, : got.length[i]].tobytes() == union.encode_value(v, index), v
        assert not got.data[i, got.length[i] :].any()
    only_numbers = encode_column(values[:VECTOR_FROM], "c", ())
    assert [only_numbers.data[i, : only_numbers.length[i]].tobytes() for i in range(3)] == [
        varint(1),
        varint(2 * 7919 + 1),
        varint(2 * 15838 + 1),
    ]
    with pytest.raises(DataError, match="Unicode"):
        encode_column([*values, "\ud800"], "c", ())
