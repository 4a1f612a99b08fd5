"""Unit tests of taxonomies, trees, scores, the shared state and TIPS."""

from __future__ import annotations

import numpy as np
import pytest

from fedanon.errors import ProtocolError, SpecError, TaxonomyError
from fedanon.model.spec import parse_spec
from fedanon.model.taxonomy import interval_leaves, parse_arx, parse_native, parse_taxonomy
from fedanon.model.tree import NO_SPLIT, AttrTree
from fedanon.scores.discernibility import reductions
from fedanon.tds.measures import best_split_discernibility, best_split_infogain, info_gain
from fedanon.tds.state import Phase, SharedState, Update
from fedanon.tds.tips import Tips

JOB = "ANY\n  Blue\n    Janitor\n    Mover\n  White\n    Doctor\n"


def test_native_taxonomy_ranges() -> None:
    t = parse_native(JOB, "job.txt")
    assert t.labels == ("ANY", "Blue", "Janitor", "Mover", "White", "Doctor")
    assert list(t.leaf_lo) == [0, 0, 0, 1, 2, 2] and list(t.leaf_hi) == [3, 2, 1, 2, 3, 3]
    assert t.leaf_index() == {"Janitor": 0, "Mover": 1, "Doctor": 2}


@pytest.mark.parametrize(
    ("text", "msg"),
    [
        ("", "empty"),
        ("A\nB\n", "second root"),
        ("A\n  B\n  B\n", "duplicate"),
        ("A\n    B\n  C\n", "indentation"),
        ("  A\n", "root must not be indented"),
    ],
)
def test_native_taxonomy_errors(text: str, msg: str) -> None:
    with pytest.raises(TaxonomyError, match=msg):
        parse_native(text, "t.txt")


def test_arx_hierarchy_collapses_repeated_levels() -> None:
    t = parse_arx("Male;*\nFemale;*\n", "sex.csv")
    assert t.labels == ("*", "Male", "Female")
    t = parse_arx("a;X;*\nb;X;*\nc;c;*\n", "h.csv")
    assert t.labels == ("*", "X", "a", "b", "c")
    assert parse_taxonomy("a;*\n", "x.CSV").labels == ("*", "a")
    with pytest.raises(TaxonomyError, match="same root"):
        parse_arx("a;*\nb;ANY\n", "h.csv")


def test_static_interval_taxonomy() -> None:
    t = parse_native("[1-99)\n  [1-60)\n  [60-99)\n", "age.txt")
    lo, hi = interval_leaves(t)
    assert list(lo) == [1, 60] and list(hi) == [60, 99]
    with pytest.raises(TaxonomyError, match="inside its parent"):
        interval_leaves(parse_native("[1-50)\n  [1-60)\n", "age.txt"))


def test_dynamic_tree_split_and_child_of() -> None:
    tree = AttrTree.numeric("age", (0.0, 10.0), 1.0)
    assert tree.labels[0] == "[0-10)" and tree.n_leaves == 10
    tree.split(0, 4)
    assert tree.labels[1:] == ["[0-4)", "[4-10)"]
    kids = tree.child_of(np.array([0, 0, 0]), np.array([0, 3, 9]))
    assert list(kids) == [1, 1, 2]
    with pytest.raises(ValueError):
        tree.split(0, 5)
    tree.split(1, NO_SPLIT)
    assert tree.is_leaf(1)


def test_scores() -> None:
    assert info_gain(np.array([[3, 0], [0, 3]])) == pytest.approx(1.0)
    assert info_gain(np.array([[1, 1], [1, 1]])) == 0.0
    # two partitions with children of sizes (2, 2) and (4, 0): |p|^2 - sum |p_c|^2 each
    assert list(reductions(np.array([2, 2, 4, 0]), np.array([0, 2]))) == [16 - 8, 16 - 16]
    # bins: class 0 in bins 0-1, class 1 in bins 2-3 -> split at 2
    assert best_split_infogain(np.array([[3, 0], [2, 0], [0, 4], [0, 1]])) == 2
    assert best_split_infogain(np.array([[0, 0], [5, 2], [0, 0]])) is None
    assert best_split_discernibility(np.array([[4, 0, 0, 4]])) in (1, 2, 3)
    assert best_split_discernibility(np.array([[0, 4, 0, 0]])) is None


def test_spec_validation() -> None:
    base = '[privacy]\nL=1\nK=1\nC=1\n[[attribute]]\nname="a"\nrole="qid"\ntype="numeric"\n'
    spec = parse_spec(base + "domain=[0,10]\n" + '[utility]\nscore="discernibility"\n')
    assert spec.qids[0].dynamic and spec.effective_l == 1
    with pytest.raises(SpecError, match="domain"):
        parse_spec(base + '[utility]\nscore="discernibility"\n')
    with pytest.raises(SpecError, match="unknown key"):
        parse_spec(base + 'domain=[0,10]\ncolour="red"\n[utility]\nscore="discernibility"\n')
    with pytest.raises(SpecError, match="infogain"):
        parse_spec(base + "domain=[0,10]\n")


def _state() -> SharedState:
    trees = [AttrTree.from_taxonomy("job", parse_native(JOB, "job.txt"))]
    return SharedState(trees, n_class=2, n_sens=1, score="infogain")


def test_layouts_are_identical_across_replicas_and_updates_are_checked() -> None:
    a, b = _state(), _state()
    assert a.count_layout().digest == b.count_layout().digest
    upd = Update(round=0, best=(0, 0), children_mask=bytes([1, 1]))
    a.apply(upd)
    b.apply(upd)
    assert a.count_layout().digest == b.count_layout().digest
    assert a.count_layout().digest != _state().count_layout().digest
    with pytest.raises(ProtocolError):
        a.apply(Update(round=1, best=(0, 1), children_mask=bytes([1])))  # wrong mask size
    with pytest.raises(ProtocolError):
        a.apply(Update(round=1, best=(0, 0), children_mask=bytes([1, 1])))  # not in the cut
    assert Phase.SPLIT != Phase.COUNTS


def test_tips_rows_follow_partitions() -> None:
    st = _state()
    leaves = np.array([[0, 2, 1, 2, 0]])
    tips = Tips(leaves, 5)
    applied = st.apply(Update(round=0, best=(0, 0), children_mask=bytes([1, 1])))
    assert applied is not None
    tips.apply(applied, st)
    rows_blue, _ = tips.rows_of(np.array([1]))
    rows_white, _ = tips.rows_of(np.array([2]))
    assert sorted(rows_blue) == [0, 2, 4] and sorted(rows_white) == [1, 3]
    # a child that is empty globally but has local rows is a protocol violation
    st2, tips2 = _state(), Tips(leaves, 5)
    applied2 = st2.apply(Update(round=0, best=(0, 0), children_mask=bytes([1, 0])))
    assert applied2 is not None
    with pytest.raises(ProtocolError):
        tips2.apply(applied2, st2)


def test_too_many_bins_is_a_spec_error() -> None:
    text = (
        '[privacy]\nL=1\nK=1\nC=1\n[utility]\nscore="discernibility"\n'
        '[[attribute]]\nname="w"\nrole="qid"\ntype="numeric"\ndomain=[0, 1500000]\nstep=1\n'
    )
    with pytest.raises(SpecError, match="too many") as err:
        parse_spec(text)
    assert "step of at least" in str(err.value)
