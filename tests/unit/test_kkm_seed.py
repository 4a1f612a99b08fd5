"""The seed's worked examples (ArtUC paper: Figures 1-3, Examples 1-6, Section 4.2)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fedanon.kkm.artuc import build_problem, clusters_of, run_artuc
from fedanon.kkm.audit import audit_release
from fedanon.kkm.gendiag import gendiag
from fedanon.kkm.io import read_rt
from fedanon.kkm.metrics import parse_release, record_ncp, record_ul
from fedanon.kkm.release import render
from fedanon.kkm.schema import build_kkm_schema
from fedanon.kkm.spec import load_kkm_spec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kkm_checker import is_kkm_anonymous, parse_cell, violations

HERE = Path(__file__).resolve().parent / "kkm_fig1"

FIGURE_3 = [  # id: Age, Origin, Gender, Disease
    (0, "[19:30]", "Europe", "All", "493.2|494.1|(053.20 053.71)"),
    (1, "[19:30]", "Europe", "All", "493.2|494.1|(053.20 053.71)"),
    (2, "[19:30]", "Europe", "All", "494.1|(053.20 053.71)"),
    (3, "[19:30]", "Europe", "All", "493.2|494.1|(053.20 053.71)"),
    (6, "[44:47]", "All", "All", "494.1|(458.1 458.21)"),
    (7, "[44:47]", "All", "All", "(458.1 458.21)|494.1"),
    (4, "51", "Africa", "Male", "493.2"),
    (5, "51", "Africa", "Male", "493.2"),
]

FIGURE_1B = [  # 2-anonymous demographics, 2^2-anonymous codes, not (2, 2^2)-anonymous
    ("[19:22]", "Europe", "Male", "493.2|494.1|(053.20 053.71)"),
    ("[19:22]", "Europe", "Male", "493.2|494.1|(053.20 053.71)"),
    ("[28:30]", "Europe", "Female", "494.1|(053.20 053.71)"),
    ("[28:30]", "Europe", "Female", "493.2|494.1|(053.20 053.71)"),
    ("51", "Africa", "Male", "493.2"),
    ("51", "Africa", "Male", "493.2|494.1"),
    ("[44:47]", "All", "All", "494.1|(458.1 458.21)"),
    ("[44:47]", "All", "All", "(458.1 458.21)|494.1"),
]


@pytest.fixture(scope="module")
def fig1():
    spec, reader = load_kkm_spec(HERE / "run.toml")
    schema = build_kkm_schema(spec, reader)
    table = read_rt(schema, HERE / "figure1a.csv")
    return schema, table


def _rows(rel):
    out = {}
    for i, r in enumerate(rel.rows):
        demo = (rel.data["Age"][i], rel.data["Origin"][i], rel.data["Gender"][i])
        out[r] = (*demo, frozenset(parse_cell(rel.data["Disease"][i])))
    return out


def test_artuc_reproduces_figure_3(fig1):
    schema, table = fig1
    rel = render(run_artuc(build_problem(schema, table)))
    want = {i: (a, o, g, frozenset(parse_cell(d))) for i, a, o, g, d in FIGURE_3}
    assert _rows(rel) == want
    assert rel.columns == ["Age", "Origin", "Gender", "Disease"]  # id and name dropped


def test_section_4_2_trace(fig1):
    """Groups G1 = {0,1,2,3,6,7}, G2 = {4,5}; clusters {0,1}, {2,3}, {6,7}, {4,5}; one merge
    (C1 with C2); NCP of the first clustering below delta = 0.6; one code suppressed."""
    schema, table = fig1
    problem = build_problem(schema, table)
    assert problem.group.tolist() == [0, 0, 0, 0, 1, 1, 0, 0]
    cl, dropped = clusters_of(problem)
    assert dropped.size == 0
    members = sorted(sorted(np.flatnonzero(cl.label == c).tolist()) for c in range(cl.n))
    assert members == [[0, 1], [2, 3], [4, 5], [6, 7]]
    out = run_artuc(problem)
    assert out.stats["initial_ncp"] == pytest.approx(
        (2 * 0.2396 + 2 * 0.2292 + 2 * 0.6979 + 0.25) / 8, abs=1e-3
    )
    assert out.state.merges == 1
    assert out.state.total_lost == 1  # 494.1 of record 5 (Figure 3)


def test_figure_3_is_2_2m_anonymous_and_figure_1b_is_not():
    demo3 = [r[1:4] for r in FIGURE_3]
    sets3 = [r[4] for r in FIGURE_3]
    assert is_kkm_anonymous(demo3, sets3, k=2, m=2)
    demo1b = [r[:3] for r in FIGURE_1B]
    sets1b = [r[3] for r in FIGURE_1B]
    bad = violations(demo1b, sets1b, k=2, m=2)
    # Example 1: Zoe (record 3) is the only Female [28:30] with 493.2 and 494.1
    assert any(i == 3 and frozenset(["493.2"]) in combo for i, _, combo, _ in bad)
    assert is_kkm_anonymous(demo1b, [""] * 8, k=2, m=2)  # 2-anonymous demographics
    assert is_kkm_anonymous([()] * 8, sets1b, k=2, m=2)  # 2^2-anonymous codes


def test_example_3_ncp(fig1):
    schema, table = fig1
    data = {
        "Age": [r[1] for r in FIGURE_3],
        "Origin": [r[2] for r in FIGURE_3],
        "Gender": [r[3] for r in FIGURE_3],
        "Disease": [r[4] for r in FIGURE_3],
    }
    ncp = record_ncp(schema, parse_release(schema.spec, data), table.num_range)
    assert pytest.approx(0.094, abs=5e-4) == (47 - 44) / (51 - 19)
    assert ncp[4] == pytest.approx((3 / 32 + 1 + 1) / 3)  # record 6
    assert round(ncp[4], 1) == 0.7 and round(ncp[5], 1) == 0.7
    assert ncp[4] + ncp[5] == pytest.approx(1.4, abs=0.01)  # cluster {6, 7}
    assert sum(ncp) == pytest.approx(4.271, abs=1e-3)
    assert sum(ncp) == pytest.approx(4.28, abs=0.01)  # the seed rounds record 6 to 0.7


def test_example_4_ul():
    data = {"Disease": [r[4] for r in FIGURE_3]}
    from fedanon.kkm.metrics import Parsed

    parsed = Parsed([], [[tuple(sorted(t)) for t in parse_cell(c)] for c in data["Disease"]])
    originals = [
        ["493.2", "494.1", "053.20"],
        ["493.2", "494.1", "053.71"],
        ["494.1", "053.20"],
        ["493.2", "494.1", "053.71"],
        ["494.1", "458.1", "458.21"],
        ["458.1", "494.1"],
        ["493.2"],
        ["493.2", "494.1"],
    ]
    ul = record_ul(parsed, originals)
    assert ul[4] == pytest.approx(3 / 7) and round(ul[4], 2) == 0.43  # record 6
    assert ul[5] == pytest.approx(3 / 7)  # record 7
    assert ul[0] == pytest.approx(3 / 15)  # 493.2, 494.1, (053.20 053.71): sigma = 4
    assert ul[7] == 1.0  # record 5: 494.1 suppressed
    assert sum(ul) / 8 == pytest.approx((3 * 0.2 + 3 / 7 + 2 * 3 / 7 + 0 + 1) / 8)


def test_example_6_gendiag_on_records_0_to_3(fig1):
    schema, table = fig1
    problem = build_problem(schema, table)
    recs = [problem.codes.recs[i] for i in range(4)]
    res = gendiag(recs, 2, 2, schema.constraints.code_class)
    label = schema.items.leaf_label
    tokens = {tuple(label(c) for c in t) for t in res.tokens}
    assert tokens == {("493.2",), ("494.1",), ("053.20", "053.71")}
    assert res.s == 0 and res.lost == 0


def test_example_2_cluster_6_7(fig1):
    schema, table = fig1
    problem = build_problem(schema, table)
    res = gendiag(
        [problem.codes.recs[6], problem.codes.recs[7]], 2, 2, schema.constraints.code_class
    )
    label = schema.items.leaf_label
    assert {tuple(label(c) for c in t) for t in res.tokens} == {("458.1", "458.21"), ("494.1",)}


def test_example_5_constraints_satisfied(fig1):
    schema, table = fig1
    rel = render(run_artuc(build_problem(schema, table)))
    res = audit_release(schema.spec, rel.data, schema)
    assert res.ok and res.constraint_violations == 0 and res.min_support == 2


def test_definition_7_counts_on_figure_3(fig1):
    """ARE's released counts by hand: {493.2, 494.1} is certain in records 0, 1, 3 and gone
    from record 5 (3 vs 4); Age = 47 and 458.21: records 6 and 7 hold 47 with 1/4 and 458.21
    (in (458.1 458.21)) with 2/3 (1/3 vs 1)."""
    from fedanon.kkm.metrics import Query, QueryCounter, are

    schema, _ = fig1
    data = {
        "Age": [r[1] for r in FIGURE_3],
        "Origin": [r[2] for r in FIGURE_3],
        "Gender": [r[3] for r in FIGURE_3],
        "Disease": [r[4] for r in FIGURE_3],
    }
    parsed = parse_release(schema.spec, data)
    ages = [str(a) for a in (19, 22, 28, 30, 51, 51, 47, 44)]
    origin = ["France", "Greece", "Italy", "Spain", "Algeria", "Nigeria", "Ghana", "Portugal"]
    sex = ["Male", "Male", "Female", "Female", "Male", "Male", "Female", "Male"]
    codes = [
        ["493.2", "494.1", "053.20"],
        ["493.2", "494.1", "053.71"],
        ["494.1", "053.20"],
        ["493.2", "494.1", "053.71"],
        ["493.2"],
        ["493.2", "494.1"],
        ["494.1", "458.1", "458.21"],
        ["458.1", "494.1"],
    ]
    demo = [ages, origin, sex]
    counter = QueryCounter(schema, parsed, demo, codes)
    w3 = Query("W3", (), ("493.2", "494.1"))
    assert counter.original(w3) == 4 and counter.released(w3) == pytest.approx(3.0)
    w2 = Query("W2", ((0, "47"),), ("458.21",))
    assert counter.original(w2) == 1 and counter.released(w2) == pytest.approx(2 * 0.25 * 2 / 3)
    w1 = Query("W1", ((1, "Italy"), (2, "Female")), ())
    # records 0-3: Europe (1/5) x All (1/2); records 6, 7: All (1/8) x All (1/2)
    assert counter.released(w1) == pytest.approx(4 * 0.2 * 0.5 + 2 * 0.125 * 0.5)
    assert are([w3, w2], schema, parsed, demo, codes) == pytest.approx((1 / 4 + 2 / 3) / 2)


@pytest.mark.parametrize("fmt", ["arx", "native-gz"])
def test_code_hierarchy_formats_give_the_same_release(fig1, tmp_path: Path, fmt: str) -> None:
    """The code hierarchy as an ARX file (leaf;parent;...;root) or a gzipped native file."""
    import gzip
    import shutil

    for f in HERE.iterdir():
        shutil.copy(f, tmp_path / f.name)
    if fmt == "arx":
        rows = [
            "053.20;053;050-059;001-139;Any",
            "053.71;053;050-059;001-139;Any",
            "458.1;458;451-459;390-459;Any",
            "458.21;458;451-459;390-459;Any",
            "493.2;493;490-496;460-519;Any",
            "494.1;494;490-496;460-519;Any",
        ]
        (tmp_path / "codes.csv").write_text("\n".join(rows) + "\n")
        name = "codes.csv"
    else:
        name = "codes.txt.gz"
        (tmp_path / name).write_bytes(gzip.compress((HERE / "icd9.txt").read_bytes()))
    spec_path = tmp_path / "run.toml"
    spec_path.write_text(
        spec_path.read_text().replace('taxonomy = "icd9.txt"', f'taxonomy = "{name}"')
    )
    spec, reader = load_kkm_spec(spec_path)
    schema = build_kkm_schema(spec, reader)
    rel = render(run_artuc(build_problem(schema, read_rt(schema, HERE / "figure1a.csv"))))
    want = {i: (a, o, g, frozenset(parse_cell(d))) for i, a, o, g, d in FIGURE_3}
    assert _rows(rel) == want
