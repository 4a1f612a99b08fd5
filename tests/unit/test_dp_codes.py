"""DiffGen with a set-valued predictor (issue 21): the seed's worked example (Table 1 -> the
structure of Table 5), the budget ledger, and an independent recount of the noisy counts."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from fedanon.apispec import Spec
from fedanon.dp.randomness import RandomSource
from fedanon.dp.setanonymize import anonymize_set_file, read_records, run_tables, set_schema
from fedanon.dp.setparty import SetParty, SetRecords
from fedanon.dp.setrun import new_state
from fedanon.dp.spec import DPParams, load_dp_spec, parse_dp_spec
from fedanon.errors import SpecError
from fedanon.tds.state import Phase, Update

HERE = Path(__file__).parent / "dp_codes"


def _table1() -> tuple:
    spec, reader = load_dp_spec(HERE / "table1.toml")
    ss = set_schema(spec, reader)
    rec, _ = read_records(ss, HERE / "table1.csv")
    return spec, ss, rec


def _partitions(state, ids) -> list[tuple[str, str]]:
    sex = state.trees[0]
    return sorted((sex.labels[state.prel[p][0]], state.stree.cell(state.pset[p])) for p in ids)


def test_table1_specializations_give_the_partitions_of_table5() -> None:
    """** -> {1*, 2*} then Anysex -> {Male, Female}, with the exact counts: {2*} holds no
    record (r3-r6 go to {1*}, r1, r2, r7, r8 to {1*, 2*}); the mask keeps {1*} and
    {1*, 2*}; the final partitions and their class counts are Table 5's (true counts)."""
    spec, ss, rec = _table1()
    state = new_state(spec, ss.schema.new_trees(), ss.stree)
    party = SetParty(state, rec)
    lay = state.counts_layout()
    vec = party.stats(Phase.COUNTS, 0, lay.size, lay.digest)
    (codes,) = [b for b in lay.blocks if b.attr == state.m]
    cells = vec[codes.offset : codes.offset + codes.rows * 2].reshape(-1, 3, 2)
    # partition {**}: combinations {1*}, {2*}, {1*, 2*} x classes (Y, N)
    assert cells[0].tolist() == [[2, 2], [0, 0], [2, 2]]
    party.apply(Update(0, best=(state.m, 0), children_mask=bytes([1, 0, 1])))
    n_sex = sum(1 for p in state.alive_ids().tolist() if state.prel[p][0] == 0)
    party.apply(Update(1, best=(0, 0), children_mask=bytes([1] * (2 * n_sex))))
    lay = state.final_layout()
    counts = party.stats(Phase.UNION, 2, lay.size, lay.digest).reshape(-1, 2)
    ids = state.alive_ids().tolist()
    got = {_partitions(state, [p])[0]: counts[i].tolist() for i, p in enumerate(ids)}
    assert got == {
        ("Male", "1*"): [0, 2],
        ("Female", "1*"): [2, 0],
        ("Male", "1*|2*"): [2, 0],
        ("Female", "1*|2*"): [0, 2],
        ("Male", ""): [0, 0],  # the partition of records without codes: always there
        ("Female", ""): [0, 0],
    }


def test_table1_fixed_seed_release_has_the_structure_of_table5(tmp_path: Path) -> None:
    """epsilon = 1, h = 2 as in the seed's Example 2: with seed 185 the mechanism picks
    ** first, then Sex, and the emptiness test keeps {1*} and {1*, 2*}, drops {2*}."""
    out = tmp_path / "t5.csv"
    rep = anonymize_set_file(
        Spec.from_toml(HERE / "table1.toml"), HERE / "table1.csv", out, seed=185
    )
    assert [(s["attribute"], s["value"]) for s in rep["selections"]] == [
        ("Diagnostic code", "**"),
        ("Sex", "Anysex"),
    ]
    assert rep["selections"][0]["tested"] == 3 and rep["selections"][0]["kept"] == 2
    lines = out.read_text().splitlines()
    assert lines[0].startswith("# NOT PRIVATE")
    assert lines[1] == "Sex,Age,Diagnostic code,Class,count"
    rows = [ln.rsplit(",", 1)[0] for ln in lines[2:]]
    assert sorted(rows) == sorted(
        f"{sex},[18-66),{codes},{cls}"
        for sex in ("Male", "Female")
        for codes in ("1*", "1*|2*", "")
        for cls in ("Y", "N")
    )
    assert rep["budget"]["spent_total"]["exact"] == "1"


def _random_records(n: int, seed: int, n_sex: int = 2) -> SetRecords:
    g = np.random.default_rng(seed)
    sex = g.integers(0, n_sex, n)
    sizes = g.integers(0, 4, n)
    items = [np.unique(g.integers(0, 4, k)) for k in sizes]
    indptr = np.r_[0, np.cumsum([len(i) for i in items])]
    flat = np.concatenate(items).astype(np.uint16) if n else np.zeros(0, np.uint16)
    has1 = np.asarray([bool(np.any(i < 2)) for i in items])
    cls = np.where(g.random(n) < np.where(has1, 0.7, 0.3), 0, 1)  # class depends on 1*
    age = np.zeros(n, dtype=np.int64)
    return SetRecords(np.vstack([sex, age]), cls, indptr, flat)


@pytest.mark.parametrize(
    ("epsilon", "h", "score"),
    [("1", 2, "max"), ("0.1", 5, "max"), ("1/3", 4, "infogain"), ("2.5", 7, "max")],
)
def test_spends_add_up_to_epsilon_exactly(epsilon: str, h: int, score: str) -> None:
    spec, ss, _ = _table1()
    spec = replace(spec, params=DPParams(Fraction(epsilon), h, score))
    rec = _random_records(3000, 7)
    for seed in range(3):
        run = run_tables(replace(ss, spec=spec), [rec], RandomSource(seed))
        ledger = run.leader.ledger
        assert ledger.total() == Fraction(epsilon)
        b = run.leader.budget
        assert b.epsilon_prime == Fraction(epsilon) / (2 * (0 + 3 * h))
        sets = [s for s in run.leader.selections if s.attribute == "Diagnostic code"]
        assert len([e for e in ledger.entries if e.step == "emptiness"]) == len(sets)
        assert ledger.by_step("noise") >= Fraction(epsilon) / 2


def test_spends_add_up_with_a_numeric_predictor(tmp_path: Path) -> None:
    text = (HERE / "table1.toml").read_text()
    text = text.replace('taxonomy = "age.txt"\n', "").replace(
        "specializations = 2", "specializations = 6"
    )
    (tmp_path / "s.toml").write_text(text)
    for f in ("sex.txt", "codes.txt", "table1.csv"):
        (tmp_path / f).write_text((HERE / f).read_text())
    for seed in range(5):
        rep = anonymize_set_file(
            Spec.from_toml(tmp_path / "s.toml"),
            tmp_path / "table1.csv",
            tmp_path / "o.csv",
            seed=seed,
        )
        assert rep["budget"]["spent_total"]["exact"] == "1"
        assert Fraction(rep["budget"]["epsilon_prime"]["exact"]) == Fraction(1, 2 * (1 + 18))
        assert any(e["step"] == "split" for e in rep["budget"]["ledger"])


def test_two_set_valued_predictors_are_refused() -> None:
    text = (HERE / "table1.toml").read_text()
    text += (
        '\n[[attribute]]\nname = "Procedures"\nrole = "qid"\ntype = "set"\ntaxonomy = "codes.txt"\n'
    )
    with pytest.raises(SpecError, match="one set-valued qid"):
        parse_dp_spec(text)


def _generalize(state, rec: SetRecords) -> list[tuple]:
    """Every record's value under the final cut, computed from the raw table without the
    engine's partitions: relational -> the cut node holding the leaf, set -> the cut nodes
    covering at least one item."""
    out = []
    sex_tree = state.trees[0]
    cut = [x for x in range(len(sex_tree)) if state.in_cut[0][x]]
    scut = [v for v in range(len(state.stree)) if state.s_in_cut[v]]
    st = state.stree
    for r in range(rec.n):
        leaf = int(rec.leaves[0][r])
        rel = next(x for x in cut if sex_tree.leaf_lo[x] <= leaf < sex_tree.leaf_hi[x])
        its = rec.items[rec.indptr[r] : rec.indptr[r + 1]]
        cover = frozenset(v for v in scut if any(st.leaf_lo[v] <= i < st.leaf_hi[v] for i in its))
        out.append((rel, cover))
    return out


def test_independent_recount_noise_has_the_declared_scale() -> None:
    """Over many seeds: released count minus the true count recomputed from the raw table
    (outside the engine) is discrete Laplace noise of the declared scale."""
    spec, ss, _ = _table1()
    spec = replace(spec, params=DPParams(Fraction(1), 3, "max"))
    ss = replace(ss, spec=spec)
    rec = _random_records(4000, 11)
    diffs: list[int] = []
    scales = set()
    for seed in range(60):
        run = run_tables(ss, [rec], RandomSource(1000 + seed))
        st = run.leader.state
        vals = _generalize(st, rec)
        true: dict[tuple, np.ndarray] = {}
        for (rel, cover), c in zip(vals, rec.cls.tolist(), strict=True):
            true.setdefault((rel, cover), np.zeros(2, dtype=np.int64))[c] += 1
        for i, p in enumerate(run.release.partitions.tolist()):
            t = true.get((st.prel[p][0], st.pset[p]), np.zeros(2, dtype=np.int64))
            for c in range(2):
                if t[c] >= 40:  # a clamp at 0 is then (far) below 1e-6
                    diffs.append(int(run.release.counts[i, c]) - int(t[c]))
        scales.add(run.leader.noise_scale)
    d = np.asarray(diffs, dtype=np.float64)
    assert d.size > 500
    # the noise epsilon is what the ledger left: one scale per run, all >= 1/2 epsilon
    assert all(s <= 2 for s in scales)
    s = float(max(scales))
    assert abs(d.mean()) < 4 * math.sqrt(2) * s / math.sqrt(d.size)
    q = math.exp(-1 / s)
    var_max = 2 * q / (1 - q) ** 2  # discrete Laplace of the largest scale used
    qmin = math.exp(-1 / float(min(scales)))
    var_min = 2 * qmin / (1 - qmin) ** 2
    assert 0.8 * var_min < d.var() < 1.2 * var_max


def _cohort(tmp_path: Path, rows: int) -> tuple:
    from fedanon.dp.cohort import write

    csv = write(tmp_path, rows, seed=5, epsilon=1.0, h=8)
    spec, reader = load_dp_spec(tmp_path / "cohort.toml")
    ss = set_schema(spec, reader)
    rec, header = read_records(ss, csv)
    return ss, rec, header


def test_three_hospitals_release_equals_the_centralized_one_byte_for_byte(tmp_path: Path) -> None:
    """The same seed, the cohort split over 3 parties: plain sum and the ring secure sum
    (masks mod 2^64) give the centralized release, byte for byte, and the same ledger."""
    from dp_helpers import RingFederation

    from fedanon.dp.setanonymize import release_file
    from fedanon.dp.setrun import SetLeader, SetRun
    from fedanon.io.fsutil import atomic_write_all

    ss, rec, header = _cohort(tmp_path, 6000)
    parts = [rec.take(0, 1500), rec.take(1500, 4000), rec.take(4000, rec.n)]

    def released(run: SetRun, name: str) -> bytes:
        pending, _ = release_file(tmp_path / name, run, header)
        atomic_write_all([pending])
        return (tmp_path / name).read_bytes()

    central = run_tables(ss, [rec], RandomSource(42))
    plain = run_tables(ss, parts, RandomSource(42))
    leader = SetLeader(
        ss.spec, new_state(ss.spec, ss.schema.new_trees(), ss.stree), RandomSource(42)
    )
    fed = RingFederation(
        [SetParty(new_state(ss.spec, ss.schema.new_trees(), ss.stree), p) for p in parts]
    )
    ring = SetRun(ss.spec, leader, leader.run(fed), 0.0)
    a, b, c = released(central, "c.csv"), released(plain, "p.csv"), released(ring, "r.csv")
    assert a == b == c
    assert any(s.attribute == "diagnoses" for s in central.leader.selections)
    for run in (plain, ring):
        assert [(e.step, e.epsilon) for e in run.leader.ledger.entries] == [
            (e.step, e.epsilon) for e in central.leader.ledger.entries
        ]


def test_a_party_refuses_a_layout_it_does_not_share(tmp_path: Path) -> None:
    from fedanon.errors import ProtocolError

    ss, rec, _ = _cohort(tmp_path, 500)
    party = SetParty(new_state(ss.spec, ss.schema.new_trees(), ss.stree), rec)
    lay = party.state.counts_layout()
    with pytest.raises(ProtocolError):
        party.stats(Phase.COUNTS, 0, lay.size, b"\0" * 32)
    with pytest.raises(ProtocolError):
        party.apply(Update(0, best=(party.state.m, 0), children_mask=bytes([1, 1])))
