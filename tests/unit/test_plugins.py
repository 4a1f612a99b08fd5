"""A utility score and a privacy model added from outside the library: one class each plus
one registration line, touching no fedanon module.  The engine runs them centralized and
in an in-process federation; the released tables are recounted independently
(tests/checker.py) and the scores against a hand count of the raw table."""

from __future__ import annotations

import csv
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from checker import check_lkc_frame, read_released
from engine_helpers import anonymize
from kanon_plugin import KAnonymity

from fedanon.errors import SpecError
from fedanon.model.spec import parse_spec
from fedanon.privacy.base import PrivacyModel, model_names, register_model
from fedanon.privacy.params import LKCTerms
from fedanon.scores.base import ScoreBook, UtilityScore, register_score, score_names
from fedanon.tds.counts import CountsView

# --- the plug-ins -------------------------------------------------------------------------


class MaxFrequency:
    """The 'max frequency' score: sum over the children of v of their largest class count
    (the records a majority-class guess per child gets right)."""

    name = "maxfreq"
    needs_class = True
    split_classes = True
    child_classes = True

    def split_width(self, n_bins: int, n_parts: int, n_class: int) -> int:
        return n_bins * n_class

    def split_cells(self, n_bins: int, n_parts: int, n_class: int) -> np.ndarray:
        return (np.arange(n_bins, dtype=np.int64) * n_class)[None, :]

    def best_split(self, cells: np.ndarray, n_bins: int, n_parts: int, n_class: int) -> int | None:
        hist = cells.reshape(n_bins, n_class)
        occupied = np.flatnonzero(hist.sum(axis=1) > 0)
        if occupied.size < 2:
            return None
        lo, hi = int(occupied[0]), int(occupied[-1])
        left = np.cumsum(hist, axis=0)[lo:hi]  # split before bin lo+1 .. hi
        right = hist.sum(axis=0) - left
        return lo + 1 + int(np.argmax(left.max(axis=1) + right.max(axis=1)))

    def on_counts(self, view: CountsView, book: ScoreBook, store: object) -> None:
        for entry in view.layout.classes:
            book.set(entry.attr, entry.node, float(view.class_counts(entry).max(axis=1).sum()))

    def on_specialized(self, state: object, applied: object, book: object, store: object) -> None:
        return None


register_score("maxfreq", MaxFrequency)  # the one registration line per plug-in
register_model("kanon", KAnonymity)  # (class in tests/kanon_plugin.py: also an entry point)

# --- helpers --------------------------------------------------------------------------------


def _native_leaves(path: Path) -> dict[str, set[str]]:
    """label -> the leaf labels under it, for an indented native taxonomy (read here, not
    with fedanon's parser)."""
    lines = [ln.rstrip() for ln in path.read_text().splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.lstrip().startswith("#")]
    depth = [(len(ln) - len(ln.lstrip())) // 2 for ln in lines]
    out: dict[str, set[str]] = {}
    for i, ln in enumerate(lines):
        j = i + 1
        while j < len(lines) and depth[j] > depth[i]:
            j += 1
        kids = [lines[t].strip() for t in range(i + 1, j) if t + 1 == j or depth[t + 1] <= depth[t]]
        out[ln.strip()] = set(kids) or {ln.strip()}
    return out


def _spec_copy(src: Path, dst: Path, **privacy_and_utility: str | None) -> Path:
    """Copy a spec folder, replacing `key = ...` lines of [privacy]/[utility] (None: drop)."""
    shutil.copytree(src, dst)
    spec = dst / "run.toml"
    text = spec.read_text()
    for key, value in privacy_and_utility.items():
        lines = text.splitlines()
        hit = [i for i, ln in enumerate(lines) if ln.split("=")[0].strip() == key]
        if value is None:
            lines = [ln for i, ln in enumerate(lines) if i not in hit]
        elif hit:
            lines[hit[0]] = f"{key} = {value}"
        else:
            at = lines.index("[privacy]") + 1
            lines.insert(at, f"{key} = {value}")
        text = "\n".join(lines) + "\n"
    spec.write_text(text)
    return spec


# --- tests ----------------------------------------------------------------------------------


def test_plugins_satisfy_the_protocols_and_are_selectable_by_name() -> None:
    assert isinstance(MaxFrequency(), UtilityScore)
    attrs = (
        '[utility]\nscore = "maxfreq"\n'
        '[[attribute]]\nname = "a"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 10]\n'
        '[[attribute]]\nname = "y"\nrole = "class"\n'
    )
    spec = parse_spec('[privacy]\nmodel = "kanon"\nK = 3\n' + attrs)  # K only: L, C not needed
    assert isinstance(KAnonymity(spec), PrivacyModel)
    assert "maxfreq" in score_names() and "kanon" in model_names()
    assert spec.canonical()["privacy"]["model"] == "kanon"
    assert spec.privacy.params.K == 3 and spec.privacy.sensitive_values == ()
    assert spec.privacy.as_lkc(len(spec.qids)) == LKCTerms(L=1, K=3, C=1.0)
    # the model's own keys: another model's key is an error naming the allowed ones
    with pytest.raises(SpecError, match="unknown key") as err:
        parse_spec('[privacy]\nmodel = "kanon"\nK = 3\nL = 2\n' + attrs)
    assert err.value.value == "L" and err.value.expected == "K, model"
    with pytest.raises(SpecError, match=r"\[privacy\] needs K"):
        parse_spec('[privacy]\nmodel = "kanon"\n' + attrs)
    with pytest.raises(SpecError, match="K must be an integer >= 2"):  # the model's validation
        parse_spec('[privacy]\nmodel = "kanon"\nK = 1\n' + attrs)
    with pytest.raises(SpecError, match="K must be an integer"):
        parse_spec('[privacy]\nmodel = "kanon"\nK = 2.5\n' + attrs)
    with pytest.raises(SpecError, match="no L, K, C parameters"):
        _ = spec.privacy.L
    # LKC still needs its own keys
    with pytest.raises(SpecError, match=r"\[privacy\] needs C"):
        parse_spec("[privacy]\nL = 1\nK = 3\n" + attrs)
    with pytest.raises(SpecError, match="unknown privacy model"):
        parse_spec(
            '[privacy]\nmodel = "nope"\nL = 1\nK = 3\nC = 1\n[utility]\nscore = "maxfreq"\n'
            '[[attribute]]\nname = "a"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 10]\n'
        )
    with pytest.raises(SpecError, match="'maxfreq' needs an attribute with role = 'class'"):
        parse_spec(
            '[privacy]\nL = 1\nK = 3\nC = 1\n[utility]\nscore = "maxfreq"\n'
            '[[attribute]]\nname = "a"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 10]\n'
        )
    with pytest.raises(ValueError, match="already registered"):
        register_score("infogain", MaxFrequency)


def test_max_frequency_score_on_table1(table1_dir: Path, tmp_path: Path) -> None:
    spec = _spec_copy(table1_dir, tmp_path / "t1", score='"maxfreq"')
    out = tmp_path / "released.csv"
    result, _ = anonymize(spec, table1_dir / "table1.csv", out)
    # round 1, recounted from the raw table: every QID's root, children by the taxonomy files
    raw = list(csv.DictReader((table1_dir / "table1.csv").open()))
    root_scores = {}
    for name, tax in (("Job", "job.txt"), ("Sex", "sex.txt")):
        tree = _native_leaves(table1_dir / tax)
        root = next(iter(tree))
        lines = (table1_dir / tax).read_text().splitlines()
        kids = [ln.strip() for ln in lines if ln.startswith("  ") and not ln.startswith("    ")]
        score = 0
        for kid in kids:
            score += max(Counter(r["Transfuse"] for r in raw if r[name] in tree[kid]).values())
        root_scores[(name, root)] = score
    young = Counter(r["Transfuse"] for r in raw if int(r["Age"]) < 60)
    old = Counter(r["Transfuse"] for r in raw if int(r["Age"]) >= 60)
    root_scores[("Age", "[1-99)")] = max(young.values()) + max(old.values())
    assert root_scores == {("Job", "ANY_Job"): 10, ("Sex", "ANY_Sex"): 6, ("Age", "[1-99)"): 8}
    first = result.specializations[0]
    assert (first.attribute, first.value, first.score) == ("Job", "ANY_Job", 10.0)
    released = read_released(out)
    res = check_lkc_frame(released, ["Job", "Sex", "Age"], "Surgery", {"Transgender"}, 2, 2, 0.5)
    assert res.ok, res.first_violation
    assert len(released) == 11


def test_k_anonymity_model_equals_lkc_with_full_qid_and_c_one(
    table1_dir: Path, tmp_path: Path
) -> None:
    kanon = _spec_copy(
        table1_dir, tmp_path / "k", model='"kanon"', L=None, C=None, sensitive_values=None
    )
    lkc = _spec_copy(table1_dir, tmp_path / "l", L="3", C="1.0")
    r1, _ = anonymize(kanon, table1_dir / "table1.csv", tmp_path / "k.csv")
    r2, _ = anonymize(lkc, table1_dir / "table1.csv", tmp_path / "l.csv")
    assert (tmp_path / "k.csv").read_bytes() == (tmp_path / "l.csv").read_bytes()
    assert r1.specializations == r2.specializations
    summary = r1.decider.summary()
    assert "max_confidence" not in summary and summary["min_group_size"] >= 2
    res = check_lkc_frame(read_released(tmp_path / "k.csv"), ["Job", "Sex", "Age"], "Surgery",
                          set(), 3, 2, 1.0)  # fmt: skip
    assert res.ok and res.min_group_size == summary["min_group_size"]


def _privacy_lines(model: str, k: int) -> str:
    """k-anonymity takes K only; LKC with L = |QID| = 3 and C = 1 is the same model."""
    return f'model = "kanon"\nK = {k}\n' if model == "kanon" else f"L = 3\nK = {k}\nC = 1\n"


def _random_case(root: Path, seed: int, model: str, score: str) -> tuple[Path, Path, list[Path]]:
    """A random table (two categorical QIDs, one numeric split at run time), its spec, and
    the table cut in two parties."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(40, 160))
    root.mkdir()
    (root / "a.txt").write_text("ANY\n  A1\n    a\n    b\n  A2\n    c\n    d\n    e\n")
    (root / "b.txt").write_text("ANY\n  x\n  y\n  z\n")
    df = pd.DataFrame(
        {
            "A": rng.choice(list("abcde"), n),
            "B": rng.choice(list("xyz"), n),
            "N": rng.integers(0, 40, n),
            "Y": rng.choice(["p", "q", "r"], n, p=[0.5, 0.3, 0.2]),
            "S": rng.choice(["s1", "s2"], n),
        }
    )
    data = root / "data.csv"
    df.to_csv(data, index=False)
    parts = []
    for i, chunk in enumerate((df.iloc[: n // 3], df.iloc[n // 3 :])):
        parts.append(root / f"p{i}.csv")
        chunk.to_csv(parts[-1], index=False)
    k = int(rng.integers(2, 8))
    (root / "run.toml").write_text(
        f'[privacy]\n{_privacy_lines(model, k)}[utility]\nscore = "{score}"\n'
        '[[attribute]]\nname = "A"\nrole = "qid"\ntype = "categorical"\ntaxonomy = "a.txt"\n'
        '[[attribute]]\nname = "B"\nrole = "qid"\ntype = "categorical"\ntaxonomy = "b.txt"\n'
        '[[attribute]]\nname = "N"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 40]\n'
        '[[attribute]]\nname = "Y"\nrole = "class"\n'
        '[[attribute]]\nname = "S"\nrole = "sensitive"\n'
    )
    return root / "run.toml", data, parts


def _leaves_of(label: str, column: pd.Series, taxonomy: dict[str, set[str]] | None) -> pd.Series:
    """Rows whose raw value lies under a (categorical or interval) label."""
    if taxonomy is not None:
        return column.isin(taxonomy[label])
    m = re.fullmatch(r"\[(.+)-(.+)\)", label)
    assert m is not None, label
    return (column >= float(m[1])) & (column < float(m[2]))


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("score", ["maxfreq", "infogain"])
def test_plugins_on_random_tables_centralized_and_federated(
    tmp_path: Path, seed: int, score: str
) -> None:
    spec, data, parts = _random_case(tmp_path / "case", seed, "kanon", score)
    k = int(next(ln for ln in spec.read_text().splitlines() if ln.startswith("K =")).split()[-1])
    central, federated, lkc_out = tmp_path / "c.csv", tmp_path / "f.csv", tmp_path / "l.csv"
    rc, _ = anonymize(spec, data, central)
    rf, _ = anonymize(spec, data, federated, parts)
    assert central.read_bytes() == federated.read_bytes()  # parties in row order
    assert rc.specializations == rf.specializations
    raw = pd.read_csv(data)
    released = read_released(central)
    res = check_lkc_frame(released, ["A", "B", "N"], "S", set(), 3, k, 1.0)
    assert res.ok, res.first_violation
    assert len(released) == len(raw)
    # k-anonymity = LKC with L = |QID| and C = 1: the built-in model releases the same table
    spec.write_text(spec.read_text().replace(_privacy_lines("kanon", k), _privacy_lines("lkc", k)))
    rl, _ = anonymize(spec, data, lkc_out)
    assert lkc_out.read_bytes() == central.read_bytes()
    assert rl.specializations == rc.specializations
    if score == "maxfreq":  # every chosen score recounted from the raw rows
        taxonomies = {c: _native_leaves(spec.parent / f"{c.lower()}.txt") for c in "AB"}
        assert rc.specializations
        for s in rc.specializations:
            tax = taxonomies.get(s.attribute)
            expected = sum(
                int(raw.loc[_leaves_of(c, raw[s.attribute], tax), "Y"].value_counts().max())
                for c in s.children
                if _leaves_of(c, raw[s.attribute], tax).any()
            )
            assert s.score == expected, s
