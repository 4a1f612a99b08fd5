"""A large sketch union summed in parts (fedanon.union.parts, leader/unionparts.py): the same
release as one sketch, every part its own sum and round, a failed part summed again alone,
a corrupted part stops the run and its summing thread."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from test_sketch_union import EXAMPLES, _expected, _free_text_rows, _got, _setup

from fedanon import union as sk
from fedanon.errors import ProtocolError, RunAborted
from fedanon.leader import union as lu
from fedanon.net.convert import sketch_from_pb, sketch_to_pb
from fedanon.tds.state import Phase
from fedanon.union import parts as up
from fedanon.union.params import MAX_PARTS, Split
from fedanon.union.recover import Recovery
from fedanon.union.sketch_union import encode_released

SPEC = EXAMPLES / "table1" / "run.toml"


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of 40 distinct records, and never the small first sketch."""
    monkeypatch.setattr(up, "PART_RECORDS", 40)
    monkeypatch.setattr(lu, "DISTINCT_PER_GROUP", 10**6)


def _fed(tmp: Path, seed: int, n: int = 300, parties: int = 3):
    header, rows = _free_text_rows(random.Random(seed), n)
    tmp.mkdir(parents=True, exist_ok=True)
    return _setup(tmp, header, [rows[i::parties] for i in range(parties)], SPEC)


def test_parts_for_and_their_size() -> None:
    assert up.parts_for(2 * up.PART_RECORDS - 1) == 1
    assert up.parts_for(2 * up.PART_RECORDS) == 2
    assert up.parts_for(10**6) == 4
    assert up.parts_for(10**9) == MAX_PARTS
    share = up.part_distinct(10**6, 4)
    assert 250_000 < share < 253_000  # the mean plus a few thousand
    layout = sk.plan(np.bincount([3] * 7, minlength=sk.CLASS_BOUNDS.size) * 10**5, 2)
    part = up.split_layout(layout, 700_000, 4)
    assert [t.records for t in part.tables] == [t.records for t in layout.tables]
    assert part.tables[0].cells < layout.tables[0].cells / 3.5


@pytest.mark.usefixtures("small_parts")
@pytest.mark.parametrize("seed", [1, 2])
def test_a_split_union_releases_what_one_sketch_releases(tmp_path: Path, seed: int) -> None:
    spec, dec, fed = _fed(tmp_path / "split", seed)
    done = lu.sum_union("sketch", spec, dec, fed, len(fed.parties))
    assert done.parts > 1 and done.attempts >= done.parts and done.sums == 1 + done.attempts
    got = _got(spec, done.data)
    assert Counter(got) == _expected(spec, fed.parties)
    calls = [c for c in fed.calls if c[0] == Phase.UNION_SKETCH]
    assert len(calls) == done.attempts and len({c[1] for c in calls}) == len(calls)
    splits = [u.union.split for u in fed.updates if u.union is not None]
    assert {s.key for s in splits} == {splits[0].key} and splits[0].parts == done.parts
    assert sorted({s.part for s in splits}) == list(range(done.parts))
    # the first attempt of every part sketches under the split key itself
    assert fed.updates[-len(splits)].union.key == splits[0].key
    # the canonical order: byte for byte the one-sketch release
    up.PART_RECORDS = 10**9
    _, dec2, fed2 = _fed(tmp_path / "one", seed)
    one = lu.sum_union("sketch", spec, dec2, fed2, len(fed2.parties))
    assert one.parts == 1 and _got(spec, one.data) == got
    assert not [t for t in threading.enumerate() if t.name == "union-parts"]


@pytest.mark.usefixtures("small_parts")
def test_a_part_that_does_not_peel_is_summed_again_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, dec, fed = _fed(tmp_path, 3)
    real = Recovery.add
    seen: list[tuple[sk.Layout, bytes]] = []

    def failing_second(self, layout, key, vector, **kw):
        seen.append((layout, key))
        if len(seen) == 2:
            raise sk.PeelingFailed("forced")
        return real(self, layout, key, vector, **kw)

    monkeypatch.setattr(Recovery, "add", failing_second)
    done = lu.sum_union("sketch", spec, dec, fed, len(fed.parties))
    assert done.attempts == done.parts + 1
    assert Counter(_got(spec, done.data)) == _expected(spec, fed.parties)
    retry = fed.updates[-1].union
    failed = fed.updates[-done.parts].union  # the second part's first attempt
    assert retry.split == failed.split and retry.split.part == 1
    assert retry.key not in (failed.key, failed.split.key)
    assert retry.layout.size > failed.layout.size
    rounds = [c[1] for c in fed.calls if c[0] == Phase.UNION_SKETCH]
    assert rounds[-1] > max(rounds[:-1])  # a retry is never a repeat


@pytest.mark.usefixtures("small_parts")
def test_a_part_that_never_peels_aborts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, dec, fed = _fed(tmp_path, 4)
    real = Recovery.add
    calls = []

    def always_part_0(self, layout, key, vector, **kw):
        calls.append(key)
        if len(calls) == 1 or len(calls) > 3:  # part 0, then its retries
            raise sk.PeelingFailed("forced")
        return real(self, layout, key, vector, **kw)

    monkeypatch.setattr(Recovery, "add", always_part_0)
    with pytest.raises(RunAborted, match="did not peel"):
        lu.sum_union("sketch", spec, dec, fed, len(fed.parties))
    assert not [t for t in threading.enumerate() if t.name == "union-parts"]


@pytest.mark.usefixtures("small_parts")
def test_a_corrupted_part_stops_the_run_and_its_summing_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, dec, fed = _fed(tmp_path, 5)
    fed.tamper[Phase.UNION_SKETCH] = 0
    real = fed.sum

    def slow(phase, round_, size, digest, step=None):  # later parts take a while to sum,
        if phase == Phase.UNION_SKETCH and any(c[0] == phase for c in fed.calls):
            time.sleep(0.3)  # as over a network: the first part is peeled meanwhile
        return real(phase, round_, size, digest, step)

    monkeypatch.setattr(fed, "sum", slow)
    with pytest.raises((RunAborted, ProtocolError)):
        lu.sum_union("sketch", spec, dec, fed, len(fed.parties))
    assert not [t for t in threading.enumerate() if t.name == "union-parts"]
    # the sum of the first part was refused: the thread asked for no further part
    assert len([c for c in fed.calls if c[0] == Phase.UNION_SKETCH]) <= 2


@pytest.mark.usefixtures("small_parts")
def test_a_failing_sum_in_the_thread_is_raised_by_the_leader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, dec, fed = _fed(tmp_path, 6)
    real = fed.sum

    def cut(phase, round_, size, digest, step=None):
        if phase == Phase.UNION_SKETCH and len(fed.calls) > 0 and fed.calls[-1][0] == phase:
            raise ProtocolError("h1: connection lost")
        return real(phase, round_, size, digest, step)

    monkeypatch.setattr(fed, "sum", cut)
    with pytest.raises(ProtocolError, match="connection lost"):
        lu.sum_union("sketch", spec, dec, fed, len(fed.parties))
    assert not [t for t in threading.enumerate() if t.name == "union-parts"]


def test_every_record_falls_in_one_part_at_every_party(tmp_path: Path) -> None:
    """A party's part sketches peel to its records, each in exactly one part, the same part
    as at another party; a retry key sketches the same records."""
    spec, _, fed = _fed(tmp_path, 7, n=120, parties=2)
    recs = [encode_released(spec, p.state, p.tips, p.table) for p in fed.parties]
    hist = sum(r.histogram() for r in recs)
    layout = up.split_layout(sk.plan(hist, recs[0].n_fields), 120, 3)
    key = sk.new_key()
    found: list[Counter[tuple[int, bytes]]] = []
    for r in recs:
        sketcher = up.PartSketcher(r)
        mine: Counter[tuple[int, bytes]] = Counter()
        for j in range(3):
            params = sk.SketchParams(layout, key, Split(key, j, 3))
            rec = Recovery(layout.n_fields)
            rec.add(layout, key, sketcher.sketch(params), part=True)
            res = rec.result()
            for g, *vals in zip(res.group.tolist(), *(c.strings() for c in res.columns)):
                mine[(j, repr((g, vals)).encode())] += 1
            again = sk.SketchParams(layout.grown(), sk.new_key(), Split(key, j, 3))
            rec2 = Recovery(layout.n_fields)
            rec2.add(again.layout, again.key, sketcher.sketch(again), part=True)
            assert rec2.result().n_records == res.n_records
        found.append(mine)
    records_0 = {k[1]: k[0] for k in found[0]}
    records_1 = {k[1]: k[0] for k in found[1]}
    shared = set(records_0) & set(records_1)
    assert all(records_0[r] == records_1[r] for r in shared)
    assert len({k[1] for k in found[0]}) == len(found[0])  # no record in two parts


def test_the_split_is_in_the_digest_and_on_the_wire() -> None:
    layout = sk.plan(np.bincount([3], minlength=sk.CLASS_BOUNDS.size) * 100, 2)
    key, other = sk.new_key(), sk.new_key()
    one = sk.SketchParams(layout, key)
    digests = {
        one.digest,
        sk.SketchParams(layout, key, Split(key, 0, 2)).digest,
        sk.SketchParams(layout, key, Split(key, 1, 2)).digest,
        sk.SketchParams(layout, key, Split(key, 1, 3)).digest,
        sk.SketchParams(layout, key, Split(other, 1, 3)).digest,
    }
    assert len(digests) == 5
    for params in (one, sk.SketchParams(layout, key, Split(other, 2, 3))):
        assert sketch_from_pb(sketch_to_pb(params)) == params
    bad = sketch_to_pb(sk.SketchParams(layout, key, Split(other, 2, 3)))
    bad.part = 3
    with pytest.raises(ProtocolError, match="invalid union sketch"):
        sketch_from_pb(bad)
    bad.part, bad.parts = 0, 1
    with pytest.raises(ProtocolError, match="invalid union sketch"):
        sketch_from_pb(bad)
    with pytest.raises(ValueError):
        Split(key[:5], 0, 2)


def test_the_leader_checks_the_parts_add_up_to_the_histogram(tmp_path: Path) -> None:
    spec, _, fed = _fed(tmp_path, 8, n=90, parties=2)
    recs = [encode_released(spec, p.state, p.tips, p.table) for p in fed.parties]
    hist = sum(r.histogram() for r in recs)
    layout = up.split_layout(sk.plan(hist, recs[0].n_fields), 90, 2)
    key = sk.new_key()
    rec = Recovery(layout.n_fields)
    params = sk.SketchParams(layout, key, Split(key, 0, 2))
    total = sum(up.PartSketcher(r).sketch(params) for r in recs)
    rec.add(layout, key, total, part=True)  # part 1 never comes
    with pytest.raises(sk.CorruptSketch, match="wrong number"):
        rec.check_classes(layout)


@pytest.mark.parametrize("top", [9, 10**7])  # a lookup table, or a binary search
def test_recovered_records_name_alive_groups(top: int) -> None:
    ids = np.asarray([2, 5, top], dtype=np.int64)
    group = np.asarray([2, 2, 5, top, top], dtype=np.int64)
    assert lu._group_index(ids, group).tolist() == [0, 0, 1, 2, 2]
    assert lu._group_index(ids, np.zeros(0, dtype=np.int64)).size == 0
    for bad in (3, top + 1, -1, 0):
        with pytest.raises(RunAborted, match="does not exist"):
            lu._group_index(ids, np.asarray([2, bad], dtype=np.int64))
