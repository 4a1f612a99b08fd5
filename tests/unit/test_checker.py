"""Tests of the independent LKC-privacy checker (tests/checker.py) and of the example data."""

from __future__ import annotations

import csv
import itertools
import re
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from checker import (
    CheckResult,
    check_lkc,
    check_lkc_frame,
    check_released,
    naive_check_lkc,
    spec_params,
)
from hypothesis import given, settings
from hypothesis import strategies as st

# --------------------------------------------------------------------------------------------
# The paper's running example: Table II satisfies (2, 2, 50%)-privacy, Table I does not.
# --------------------------------------------------------------------------------------------


def test_table2_satisfies_lkc(table1_dir: Path) -> None:
    r = check_released(table1_dir / "run.toml", table1_dir / "table2.csv")
    assert r.ok, str(r)
    assert r.first_violation is None
    assert r.n_violating_groups == 0
    assert r.n_rows == 11
    assert r.L == 2
    assert r.subsets_checked == 3 + 3  # {Job}, {Sex}, {Age} and the three pairs
    assert r.min_group_size == 2
    # <Nontechnical, M> holds records 1, 3, 5, 6; two of them are Transgender.
    assert r.max_confidence == pytest.approx(0.5)
    # Full-QID groups: <Nontechnical,M,[30-60)> x4, <Professional,F,[30-60)> x2,
    # <Professional,M,[1-30)> x2, <Professional,M,[30-60)> x1, <Technical,F,[60-99)> x2.
    assert r.n_equivalence_groups == 5
    assert r.discernibility_ratio == pytest.approx((16 + 4 + 4 + 1 + 4) / 121)


def test_table1_violates_lkc(table1_dir: Path) -> None:
    r = check_released(table1_dir / "run.toml", table1_dir / "table1.csv")
    assert not r.ok
    assert r.min_group_size == 1
    # The paper's attribute linkage: <M, 34> -> records #1 and #5, both Transgender.
    assert r.max_confidence == pytest.approx(1.0)
    v = r.first_violation
    assert v is not None
    # Single attributes come first; Carpenter is the first value of Job held by < 2 records.
    assert (v.kind, v.subset, v.values, v.count) == ("K", ("Job",), ("Carpenter",), 1)
    assert "Carpenter" in str(r)


def test_table1_paper_linkages(table1_dir: Path) -> None:
    """The identity and attribute linkages of Example 1 are found as violating groups."""
    table = pd.read_csv(table1_dir / "table1.csv", dtype=str)
    # Only the pair {Job, Age}: <Mover, 34> is the unique record #5.
    r = check_lkc_frame(table, ["Job", "Age"], "Surgery", {"Transgender"}, 2, 2, 1.0)
    assert not r.ok
    assert r.min_group_size == 1
    # Only {Sex, Age} with K = 1: <M, 34> gives P(Transgender) = 100% > 50% (<34> alone too;
    # only_max_size skips it so that the pair is reported).
    args = (table, ["Sex", "Age"], "Surgery", {"Transgender"}, 2, 1, 0.5)
    assert check_lkc_frame(*args).first_violation.values == ("34",)
    r = check_lkc_frame(*args, only_max_size=True)
    assert not r.ok
    assert r.max_confidence == 1.0
    v = r.first_violation
    assert v is not None and v.kind == "C"
    assert (v.subset, v.values, v.count, v.sensitive_count) == (
        ("Sex", "Age"),
        ("M", "34"),
        2,
        2,
    )
    assert v.sensitive_value == "Transgender"


def test_only_max_size_agrees_on_paper_tables(table1_dir: Path) -> None:
    p = spec_params(table1_dir / "run.toml")
    for name in ("table1.csv", "table2.csv"):
        args = (table1_dir / name, p.qids, p.sensitive_column, p.sensitive_values, p.L, p.K, p.C)
        full, fast = check_lkc(*args), check_lkc(*args, only_max_size=True)
        assert (full.ok, full.min_group_size, full.max_confidence) == (
            fast.ok,
            fast.min_group_size,
            fast.max_confidence,
        )
        assert fast.subsets_checked == 3


def test_spec_params_table1(table1_dir: Path) -> None:
    p = spec_params(table1_dir / "run.toml")
    assert p.qids == ["Job", "Sex", "Age"]
    assert p.sensitive_column == "Surgery"
    assert p.sensitive_values == {"Transgender"}
    assert (p.L, p.K, p.C) == (2, 2, 0.5)


# --------------------------------------------------------------------------------------------
# Small hand-made cases.
# --------------------------------------------------------------------------------------------


def _frame(rows: list[tuple[str, ...]], columns: str = "A,B,S") -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns.split(","))


def _check(table: pd.DataFrame, L: int, K: int, C: float, s: set[str] | None = None):
    return check_lkc_frame(table, ["A", "B"], "S", {"x"} if s is None else s, L, K, C)


def test_k_only_violation() -> None:
    # No sensitive value at all; <a2> (and <a2, b1>) is held by one record only.
    t = _frame([("a1", "b1", "n"), ("a1", "b1", "n"), ("a1", "b1", "n"), ("a2", "b1", "n")])
    r = _check(t, 2, 2, 0.5)
    assert not r.ok
    assert r.max_confidence == 0.0
    v = r.first_violation
    assert v is not None
    assert (v.kind, v.subset, v.values, v.count) == ("K", ("A",), ("a2",), 1)
    assert v.sensitive_value is None
    # {A} -> 1 group bad, {B} fine, {A,B} -> 1 group bad
    assert r.n_violating_groups == 2
    assert _check(t, 2, 1, 0.5).ok


def test_c_only_violation() -> None:
    # Every group has >= 3 records, but <a2> has 2 of 3 records with the sensitive value x.
    t = _frame(
        [
            ("a1", "b1", "x"),
            ("a1", "b1", "n"),
            ("a1", "b1", "n"),
            ("a2", "b1", "x"),
            ("a2", "b1", "x"),
            ("a2", "b1", "n"),
        ]
    )
    r = _check(t, 2, 3, 0.5)
    assert not r.ok
    assert r.min_group_size == 3
    assert r.max_confidence == pytest.approx(2 / 3)
    v = r.first_violation
    assert v is not None
    assert (v.kind, v.subset, v.values, v.count) == ("C", ("A",), ("a2",), 3)
    assert (v.sensitive_value, v.sensitive_count) == ("x", 2)
    assert v.confidence == pytest.approx(2 / 3)
    assert _check(t, 2, 3, 0.7).ok
    assert not _check(t, 2, 4, 0.7).ok  # now K: groups of 3 < 4


def test_confidence_bound_is_inclusive_and_exact() -> None:
    # One x in every group of 5: P = 1/5 = 0.2 exactly, which is allowed for C = 0.2
    # (0.2 as a float is slightly above 1/5; the check must not flag 1/5 > 0.2).
    t = _frame([("a", "b", "x")] + [("a", "b", "n")] * 4)
    assert _check(t, 2, 5, 0.2).ok
    assert not _check(t, 2, 5, 0.19).ok
    # 3/10 with C = 0.3
    t = _frame([("a", "b", "x")] * 3 + [("a", "b", "n")] * 7)
    assert _check(t, 2, 1, 0.3).ok
    # C = 1/3 given as a float; 1000 of 3000 is exactly 1/3 (no int64 overflow either).
    t = _frame([("a", "b", "x")] * 1000 + [("a", "b", "n")] * 2000)
    assert _check(t, 2, 1, 1 / 3).ok
    assert not _check(t, 2, 1, 0.333).ok


def test_confidence_is_per_sensitive_value() -> None:
    # P(x|qid) = P(y|qid) = 1/4 <= 0.3 although x or y together is 1/2: Definition 3.1 bounds
    # each s in S separately.
    t = _frame([("a", "b", "x"), ("a", "b", "y"), ("a", "b", "n"), ("a", "b", "n")])
    r = _check(t, 2, 1, 0.3, {"x", "y"})
    assert r.ok
    assert r.max_confidence == pytest.approx(0.25)
    # A sensitive value absent from the table is harmless.
    assert _check(t, 2, 1, 0.3, {"z"}).max_confidence == 0.0


def test_violation_visible_only_with_two_known_values() -> None:
    # Each single value is shared by 2 records, each pair is unique.
    t = _frame([("a1", "b1", "n"), ("a1", "b2", "n"), ("a2", "b1", "n"), ("a2", "b2", "n")])
    assert _check(t, 1, 2, 1.0).ok
    r = _check(t, 2, 2, 1.0)
    assert not r.ok
    assert r.first_violation is not None and r.first_violation.subset == ("A", "B")
    # L larger than |QID| is clamped to |QID|.
    r = _check(t, 5, 2, 1.0)
    assert r.L == 2 and r.subsets_checked == 3 and not r.ok
    assert r.n_equivalence_groups == 4
    assert r.discernibility_ratio == pytest.approx(4 / 16)


def test_wide_keys_do_not_overflow() -> None:
    # Five columns with >= 2**16 labels each: a naive mixed-radix int64 group key would wrap
    # around (2**80 combinations) and merge rows 0 and 1, which differ only in column A.
    n = 2**16
    cols = ["A", "B", "C", "D", "E"]
    data = {c: [f"{c}{i}" for i in range(n)] for c in cols}
    for c in cols[1:]:
        data[c][1] = data[c][0]
        data[c].append(f"{c}1")  # keep exactly 2**16 labels in B..E
    data["A"].append("Aextra")
    data["S"] = ["n"] * (n + 1)
    table = pd.DataFrame(data)
    assert [table[c].nunique() for c in cols] == [n + 1, n, n, n, n]
    r = check_lkc_frame(table, cols, "S", set(), 5, 2, 1.0, only_max_size=True)
    assert r.min_group_size == 1 and not r.ok
    assert r.n_equivalence_groups == n + 1


def test_labels_are_compared_as_strings(tmp_path: Path) -> None:
    # "01" and "1", "NA" and "" are different labels; nothing is parsed as a number or NaN.
    f = tmp_path / "t.csv"
    f.write_text("A,B,S\n01,NA,n\n1,,n\n1,,n\n01,NA,n\n")
    r = check_lkc(f, ["A", "B"], "S", set(), 2, 2, 1.0)
    assert r.ok and r.n_equivalence_groups == 2


def test_bad_arguments(tmp_path: Path) -> None:
    t = _frame([("a", "b", "n")])
    with pytest.raises(ValueError, match="lacks columns"):
        check_lkc_frame(t, ["A", "Z"], "S", set(), 1, 1, 1.0)
    with pytest.raises(ValueError, match="thresholds"):
        check_lkc_frame(t, ["A"], "S", set(), 1, 1, 0.0)
    with pytest.raises(ValueError, match="no QID"):
        check_lkc_frame(t, [], "S", set(), 1, 1, 1.0)


@st.composite
def _tables(draw: st.DrawFn) -> tuple[list[dict[str, str]], int, int, float]:
    n = draw(st.integers(1, 25))
    alphabet = {"A": ["a", "b"], "B": ["b", "c", "d"], "C": ["1", "2"], "D": ["p", "q", "r"]}
    rows = [
        {
            **{col: draw(st.sampled_from(vals)) for col, vals in alphabet.items()},
            "S": draw(st.sampled_from(["x", "y", "n"])),
        }
        for _ in range(n)
    ]
    L = draw(st.integers(1, 5))
    K = draw(st.integers(1, 4))
    C = draw(st.sampled_from([0.2, 0.25, 1 / 3, 0.5, 0.6, 1.0]))
    return rows, L, K, C


@settings(max_examples=150, deadline=None)
@given(_tables())
def test_fast_checker_agrees_with_naive_reference(
    case: tuple[list[dict[str, str]], int, int, float],
) -> None:
    rows, L, K, C = case
    qids, sens = ["A", "B", "C", "D"], {"x", "y"}
    ok, min_size, max_conf = naive_check_lkc(rows, qids, "S", sens, L, K, C)
    table = pd.DataFrame(rows)
    for only_max in (False, True):
        r = check_lkc_frame(table, qids, "S", sens, L, K, C, only_max_size=only_max)
        assert (r.ok, r.min_group_size) == (ok, min_size)
        assert r.max_confidence == pytest.approx(max_conf)
        assert r.ok == (r.first_violation is None)
    # DR from the full-QID groups, counted by hand.
    groups: dict[tuple[str, ...], int] = {}
    for row in rows:
        key = tuple(row[q] for q in qids)
        groups[key] = groups.get(key, 0) + 1
    r = check_lkc_frame(table, qids, "S", sens, L, K, C)
    assert r.n_equivalence_groups == len(groups)
    assert r.discernibility_ratio == pytest.approx(
        sum(v * v for v in groups.values()) / len(rows) ** 2
    )


# --------------------------------------------------------------------------------------------
# Adult: the checker on 45,223 rows.
# --------------------------------------------------------------------------------------------


def test_adult_raw_violates_and_suppressed_satisfies(
    adult_dir: Path, adult_csv: Path, tmp_path: Path
) -> None:
    spec = adult_dir / "run.toml"
    p = spec_params(spec)
    assert len(p.qids) == 13 and p.sensitive_column == "marital-status"
    assert (p.L, p.K, p.C) == (4, 20, 0.2)
    raw = check_released(spec, adult_csv)
    assert not raw.ok and raw.min_group_size == 1
    assert raw.subsets_checked == 13 + 78 + 286 + 715
    # Every QID generalized to the root: one group; Divorced 13.9%, Separated 3.1% <= 20%.
    table = pd.read_csv(adult_csv, dtype=str, keep_default_na=False)
    for q in p.qids:
        table[q] = "*"
    released = tmp_path / "released.csv"
    table.to_csv(released, index=False)
    r: CheckResult = check_released(spec, released)
    assert r.ok, str(r)
    assert r.min_group_size == 45_223
    assert r.max_confidence == pytest.approx(6297 / 45_223)
    assert (r.n_equivalence_groups, r.discernibility_ratio) == (1, 1.0)


# --------------------------------------------------------------------------------------------
# Consistency of the example data (parsed here independently of the engine).
# --------------------------------------------------------------------------------------------

_NATIVE_INDENT = re.compile(r"^( *)(\S.*?)\s*$")


def _parse_native(path: Path) -> dict[str, str | None]:
    """Native taxonomy -> {label: parent label} (root maps to None)."""
    entries: list[tuple[int, str]] = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _NATIVE_INDENT.match(line)
        assert m is not None and "\t" not in line, f"{path}: bad line {line!r}"
        entries.append((len(m.group(1)), m.group(2)))
    assert entries and entries[0][0] == 0, f"{path}: the first line must be the unindented root"
    widths = {d for d, _ in entries if d > 0}
    unit = min(widths) if widths else 1
    parent: dict[str, str | None] = {}
    stack: list[str] = []
    for depth, label in entries:
        assert depth % unit == 0, f"{path}: inconsistent indentation at {label!r}"
        level = depth // unit
        assert level <= len(stack), f"{path}: {label!r} skips a level"
        assert (level == 0) == (not parent), f"{path}: exactly one root expected"
        del stack[level:]
        assert label not in parent, f"{path}: duplicate label {label!r}"
        parent[label] = stack[-1] if stack else None
        stack.append(label)
    return parent


def _parse_arx(path: Path) -> dict[str, str | None]:
    """ARX hierarchy (leaf;parent;...;*) -> {label: parent label} (root maps to None)."""
    parent: dict[str, str | None] = {}
    with path.open(newline="") as fh:
        rows = [r for r in csv.reader(fh, delimiter=";") if r]
    assert len({len(r) for r in rows}) == 1, f"{path}: ragged rows"
    for r in rows:
        assert r[-1] == "*", f"{path}: root must be *"
        for child, par in itertools.pairwise([*r, None]):
            assert parent.setdefault(child, par) == par, f"{path}: {child!r} has two parents"
    return parent


def _load_taxonomy(path: Path) -> dict[str, str | None]:
    return _parse_arx(path) if path.suffix == ".csv" else _parse_native(path)


def _leaves(parent: dict[str, str | None]) -> set[str]:
    return set(parent) - {p for p in parent.values() if p is not None}


def _ancestors_or_self(parent: dict[str, str | None], label: str) -> list[str]:
    out: list[str] = []
    node: str | None = label
    while node is not None:
        out.append(node)
        node = parent[node]
    return out


def _interval(label: str) -> tuple[int, int]:
    m = re.fullmatch(r"\[(\d+)-(\d+)\)", label)
    assert m is not None, label
    return int(m.group(1)), int(m.group(2))


def test_table1_files_match_the_paper(table1_dir: Path) -> None:
    t1 = pd.read_csv(table1_dir / "table1.csv", dtype=str)
    t2 = pd.read_csv(table1_dir / "table2.csv", dtype=str)
    cols = ["ID", "Job", "Sex", "Age", "Transfuse", "Surgery"]
    assert list(t1.columns) == cols and list(t2.columns) == cols
    assert len(t1) == len(t2) == 11
    assert list(t1["ID"]) == list(t2["ID"]) == [str(i) for i in range(1, 12)]
    assert t1.loc[4].tolist() == ["5", "Mover", "M", "34", "Y", "Transgender"]
    for c in ("ID", "Transfuse", "Surgery"):
        assert list(t1[c]) == list(t2[c])
    job = _parse_native(table1_dir / "job.txt")
    sex = _parse_native(table1_dir / "sex.txt")
    age = _parse_native(table1_dir / "age.txt")
    assert _leaves(job) == {
        "Janitor",
        "Mover",
        "Carpenter",
        "Technician",
        "Doctor",
        "Lawyer",
    }
    assert _ancestors_or_self(job, "Janitor") == [
        "Janitor",
        "Nontechnical",
        "Blue-collar",
        "ANY_Job",
    ]
    assert _ancestors_or_self(job, "Lawyer") == [
        "Lawyer",
        "Professional",
        "White-collar",
        "ANY_Job",
    ]
    assert sex == {"ANY_Sex": None, "M": "ANY_Sex", "F": "ANY_Sex"}
    assert _leaves(age) == {"[1-30)", "[30-60)", "[60-99)"}
    assert _ancestors_or_self(age, "[1-30)") == ["[1-30)", "[1-60)", "[1-99)"]
    # Every interval lies inside its parent and the children partition the parent.
    for label, par in age.items():
        lo, hi = _interval(label)
        kids = sorted(_interval(k) for k, p in age.items() if p == label)
        if kids:
            assert kids[0][0] == lo and kids[-1][1] == hi
            assert all(a[1] == b[0] for a, b in itertools.pairwise(kids))
        if par is not None:
            plo, phi = _interval(par)
            assert plo <= lo < hi <= phi
    # Table II generalizes Table I along the taxonomies, record by record.
    for (_, r1), (_, r2) in zip(t1.iterrows(), t2.iterrows(), strict=True):
        assert r2["Job"] in _ancestors_or_self(job, r1["Job"])
        assert r2["Sex"] in _ancestors_or_self(sex, r1["Sex"])
        lo, hi = _interval(r2["Age"])
        assert r2["Age"] in age and lo <= int(r1["Age"]) < hi


def _spec(path: Path) -> dict:
    with path.open("rb") as fh:
        return tomllib.load(fh)


ADULT_SPECS = ["run.toml", "run-discernibility.toml", "run-kanon.toml"]


@pytest.mark.parametrize("spec_name", ADULT_SPECS)
def test_adult_spec_consistent_with_data(adult_dir: Path, adult_csv: Path, spec_name: str) -> None:
    spec = _spec(adult_dir / spec_name)
    data = pd.read_csv(adult_csv, dtype=str, keep_default_na=False)
    assert len(data) == 45_223
    attrs = {a["name"]: a for a in spec["attribute"]}
    assert len(attrs) == len(spec["attribute"])
    assert list(attrs) == list(data.columns), "every column declared once, in order"
    assert attrs["salary-class"]["role"] == "class"
    assert attrs["marital-status"]["role"] == "sensitive"
    assert set(spec["privacy"]["sensitive_values"]) == {"Divorced", "Separated"}
    assert set(spec["privacy"]["sensitive_values"]) <= set(data["marital-status"])
    for name, a in attrs.items():
        assert a["role"] in {"qid", "sensitive", "class", "other", "identifier"}
        if a["role"] != "qid":
            assert "taxonomy" not in a and "domain" not in a
            continue
        if a["type"] == "categorical":
            tax_path = adult_dir / a["taxonomy"]
            tax = _load_taxonomy(tax_path)
            missing = set(data[name]) - _leaves(tax)
            assert not missing, f"{name}: values not leaves of {tax_path.name}: {missing}"
        else:
            assert a["type"] == "numeric" and "taxonomy" not in a
            lo, hi = a["domain"]
            step = a["step"]
            values = data[name].astype(int)
            assert lo <= values.min() and values.max() < hi, f"{name}: domain misses data"
            assert (hi - lo) % step == 0 and (hi - lo) // step <= 256, name


def test_adult_spec_settings(adult_dir: Path) -> None:
    main, disc, kanon = (_spec(adult_dir / n) for n in ADULT_SPECS)
    for s in (main, disc):
        assert s["privacy"]["L"] == 4 and s["privacy"]["K"] == 20
        assert s["privacy"]["C"] == pytest.approx(0.2)
        assert sum(a["role"] == "qid" for a in s["attribute"]) == 13
    assert main["utility"]["score"] == "infogain"
    assert disc["utility"]["score"] == "discernibility"
    assert main["attribute"] == disc["attribute"]
    kq = [a["name"] for a in kanon["attribute"] if a["role"] == "qid"]
    assert kq == [
        "workclass",
        "education",
        "occupation",
        "relationship",
        "race",
        "sex",
        "native-country",
    ]
    assert (kanon["privacy"]["L"], kanon["privacy"]["K"], kanon["privacy"]["C"]) == (7, 20, 1)


def test_relationship_taxonomy(adult_dir: Path) -> None:
    tax = _parse_native(adult_dir / "taxonomies" / "relationship.txt")
    assert _leaves(tax) == {
        "Husband",
        "Wife",
        "Own-child",
        "Other-relative",
        "Not-in-family",
        "Unmarried",
    }
    assert sum(p is None for p in tax.values()) == 1
