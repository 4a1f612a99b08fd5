"""`fedanon audit`: an independent re-check of a released table against a spec."""

from __future__ import annotations

import ast
import csv
import gzip
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from checker import check_lkc_frame
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedanon.cli.main import main
from fedanon.errors import InputError
from fedanon.privacy.audit import audit_lkc, read_released

FIG1 = Path(__file__).parent / "kkm_fig1"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["audit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def released_table1(table1_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "released.csv"
    spec = str(table1_dir / "run.toml")
    data = str(table1_dir / "table1.csv")
    assert main(["anonymize", "--spec", spec, "--input", data, "--output", str(out)]) == 0
    return out


def test_raw_table1_is_violated(table1_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, raw = table1_dir / "run.toml", table1_dir / "table1.csv"
    code, out, _ = run(capsys, "--spec", str(spec), "--released", str(raw))
    assert code == 3
    assert "VIOLATED" in out
    assert "min group size 1 (K = 2)" in out
    assert "max confidence 1.0000 (C = 0.5)" in out
    # the worst group: one record, Transgender for sure
    assert "{Job=Janitor, Age=34}  P(Transgender) = 1/1 = 1.000" in out
    # groups are shown by their QID labels only: no identifier, class or other sensitive value
    for never in ("ID=", "Transfuse", "Plastic", "Urology", "Vascular", "Janitor,M,34"):
        assert never not in out


def test_own_release_of_table1_holds(
    table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    released = released_table1(table1_dir, tmp_path)
    capsys.readouterr()
    report = tmp_path / "audit.json"
    code, out, _ = run(
        capsys,
        "--spec",
        str(table1_dir / "run.toml"),
        "--released",
        str(released),
        "--json",
        str(report),
    )
    assert code == 0, out
    assert "LKC-privacy holds" in out
    doc = json.loads(report.read_text())
    assert doc["ok"] is True
    assert (doc["min_group_size"], doc["max_confidence"]) == (2, 0.5)
    assert doc["subsets_checked"] == 3 and doc["subset_size"] == 2
    assert doc["violations"] == []


def test_only_confidence_violated(
    table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The paper's Table II, with record 6 turned Transgender: every group keeps >= 2 records,
    # but {Nontechnical, M, [30-60)} now has 3 Transgender records out of 4.
    rows = list(csv.reader((table1_dir / "table2.csv").open()))
    assert rows[6][0] == "6" and rows[6][5] == "Plastic"
    rows[6][5] = "Transgender"
    table = tmp_path / "c_only.csv"
    with table.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    report = tmp_path / "audit.json"
    code, out, _ = run(
        capsys,
        "--spec",
        str(table1_dir / "run.toml"),
        "--released",
        str(table),
        "--json",
        str(report),
    )
    assert code == 3
    assert "min group size 2 (K = 2)" in out
    assert "max confidence 0.7500 (C = 0.5)" in out
    assert "0 with fewer than K records" in out
    assert "P(Transgender) = 3/4 = 0.750" in out
    doc = json.loads(report.read_text())
    assert doc["groups_below_k"] == 0 and doc["groups_above_c"] > 0
    assert {tuple(v["kinds"]) for v in doc["violations"]} == {("C",)}
    worst = doc["violations"][0]
    assert (worst["size"], worst["sensitive_count"], worst["sensitive_value"]) == (
        4,
        3,
        "Transgender",
    )
    assert worst["confidence"] == 0.75


def test_arx_style_export(
    table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ARX exports with ';', quotes cells at will and writes '*' for a suppressed value."""
    released = released_table1(table1_dir, tmp_path)
    capsys.readouterr()
    frame = pd.read_csv(released, dtype=str, keep_default_na=False)
    frame.loc[frame["Job"] == "Technical", "Job"] = "*"
    arx = tmp_path / "arx.csv.gz"
    with gzip.open(arx, "wt", newline="") as fh:
        frame.to_csv(fh, sep=";", index=False, quoting=csv.QUOTE_NONNUMERIC)
    spec = str(table1_dir / "run.toml")
    code, out, _ = run(capsys, "--spec", spec, "--released", str(arx), "--sep", ";")
    assert code == 0, out
    assert "on 11 records" in out
    code, _, err = run(capsys, "--spec", spec, "--released", str(arx))
    assert code == 2
    assert "separator ','" in err and "Job" in err


def test_arx_export_violating_k(
    table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = pd.read_csv(table1_dir / "table1.csv", dtype=str)
    arx = tmp_path / "arx.csv"
    raw.drop(columns=["ID"]).to_csv(arx, sep=";", index=False)
    code, out, _ = run(
        capsys, "--spec", str(table1_dir / "run.toml"), "--released", str(arx), "--sep", ";"
    )
    assert code == 3 and "min group size 1" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("Job,Sex,Surgery\nJanitor,M,Plastic\n", "lacks a column"),
        ("Job,Sex,Age,Surgery\nJanitor,M,[1-99),Plastic\nMover,M\n", "line 3"),
        ("Job,Sex,Age,Surgery\n", "no records"),
        ("", "empty"),
        ("Job,Job,Sex,Age,Surgery\nA,A,M,1,P\n", "twice"),
    ],
)
def test_bad_released_table_is_exit_2(
    table1_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    message: str,
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    code, out, err = run(capsys, "--spec", str(table1_dir / "run.toml"), "--released", str(bad))
    assert code == 2
    assert message in err
    assert "Janitor" not in err and "Plastic" not in err  # no cell in an error message
    assert out == ""


def test_dp_spec_cannot_be_audited(
    adult_dir: Path, table1_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        capsys,
        "--spec",
        str(adult_dir / "dp.toml"),
        "--released",
        str(table1_dir / "table2.csv"),
    )
    assert code == 2
    assert "property of the randomized mechanism" in err


def test_json_must_not_overwrite_an_input(
    table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t.csv"
    table.write_bytes((table1_dir / "table2.csv").read_bytes())
    spec = str(table1_dir / "run.toml")
    code, _, err = run(capsys, "--spec", spec, "--released", str(table), "--json", str(table))
    assert code == 2 and "--json" in err
    assert table.read_bytes() == (table1_dir / "table2.csv").read_bytes()


def test_kkm_spec_goes_to_the_kkm_audit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    released = tmp_path / "fig1.csv"
    spec = str(FIG1 / "run.toml")
    data = str(FIG1 / "figure1a.csv")
    assert main(["anonymize", "--spec", spec, "--input", data, "--output", str(released)]) == 0
    capsys.readouterr()
    report = tmp_path / "a.json"
    code, out, _ = run(capsys, "--spec", spec, "--released", str(released), "--json", str(report))
    assert code == 0, out
    assert "(k, k^m)-anonymity holds: k=2 m=2 on 8 records" in out
    assert json.loads(report.read_text())["model"] == "kkm"
    # the raw figure-1 table is not (2, 2^2)-anonymous
    raw = pd.read_csv(FIG1 / "figure1a.csv", dtype=str).drop(columns=["id", "name"])
    raw_path = tmp_path / "raw.csv"
    raw.to_csv(raw_path, index=False)
    code, out, _ = run(capsys, "--spec", spec, "--released", str(raw_path))
    assert code == 3 and "VIOLATED" in out


def test_worst_groups_are_limited_and_ordered(
    table1_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def shown(top: int) -> list[str]:
        code, out, _ = run(
            capsys,
            "--spec",
            str(table1_dir / "run.toml"),
            "--released",
            str(table1_dir / "table1.csv"),
            "--top",
            str(top),
        )
        assert code == 3
        return [" ".join(line.split()[:3]) for line in out.splitlines() if line.startswith("    ")]

    # the smallest groups (the more confident first), then the most confident not yet shown:
    # with two of each, the two most confident groups are the two smallest ones
    assert shown(2) == ["K+C size 1", "K+C size 1"]
    assert shown(3) == ["K+C size 1", "K+C size 1", "K size 1", "C size 2"]


def test_values_are_compared_as_written() -> None:
    frame = pd.DataFrame({"a": ["34", "34.0", "34", "34.0"], "s": ["x", "y", "x", "y"]})
    res = audit_lkc(frame, ["a"], "s", ["x"], 1, 2, 1.0)
    assert res.ok and res.groups_checked == 2
    res = audit_lkc(frame, ["a"], "s", ["x"], 1, 3, 1.0)
    assert not res.ok and res.min_group_size == 2


def test_confidence_bound_is_exact() -> None:
    # 1 of 3 records with s: P = 1/3 holds for C written as 0.3333333333333333, not below
    frame = pd.DataFrame({"a": ["q"] * 3, "s": ["x", "y", "y"]})
    assert audit_lkc(frame, ["a"], "s", ["x"], 1, 1, 1 / 3).ok
    assert not audit_lkc(frame, ["a"], "s", ["x"], 1, 1, 0.333).ok
    frame = pd.DataFrame({"a": ["q"] * 5, "s": ["x", "y", "y", "y", "y"]})
    assert audit_lkc(frame, ["a"], "s", ["x"], 1, 1, 0.2).ok


def test_read_released_keeps_text(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_bytes(b'\xef\xbb\xbfa;b;c\nNA;007; x \n"1;2";;3\n')
    frame = read_released(path, ["a", "b"], ";")
    assert frame.to_dict("list") == {"a": ["NA", "1;2"], "b": ["007", ""]}
    with pytest.raises(InputError, match="separator"):
        read_released(path, ["a"], ";;")
    path.write_text("a\tb\nx\ty\n")
    assert read_released(path, ["b"], "\\t").to_dict("list") == {"b": ["y"]}


def test_audit_does_not_use_the_engine_counting_code() -> None:
    source = (Path(__file__).parents[2] / "common" / "privacy" / "audit.py").read_text()
    imported = {
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module is not None
    }
    engine = {
        "fedanon.privacy.lkc",
        "fedanon.tds.stats",
        "fedanon.tds.decide",
        "fedanon.tds.state",
        "fedanon.tds.tips",
    }
    assert not imported & engine, imported & engine


LABELS = ["a", "b", "[1-5)", "*"]


@st.composite
def tables(draw: st.DrawFn) -> tuple[pd.DataFrame, list[str], list[str], int, int, float]:
    """Small label alphabets and repeated rows, so that groups of every size occur and the
    smallest group or the highest confidence can sit at any subset size."""
    n_qids = draw(st.integers(1, 4))
    qids = [f"q{i}" for i in range(n_qids)]
    alphabets = [LABELS[: draw(st.integers(1, len(LABELS)))] for _ in qids]
    distinct = draw(
        st.lists(
            st.tuples(
                st.tuples(*(st.sampled_from(a) for a in alphabets)),
                st.sampled_from(["s1", "s2", "t"]),
                st.integers(1, 4),
            ),
            min_size=1,
            max_size=12,
        )
    )
    rows = [(*key, s) for key, s, times in distinct for _ in range(times)]
    frame = pd.DataFrame(rows, columns=[*qids, "S"], dtype=object)
    sensitive = draw(st.lists(st.sampled_from(["s1", "s2"]), max_size=2, unique=True))
    L = draw(st.integers(1, 5))
    K = draw(st.integers(1, 6))
    C = draw(
        st.one_of(
            st.sampled_from([1 / 3, 0.2, 0.25, 0.5, 2 / 3, 0.75, 1.0]),
            st.floats(0.01, 1.0),
        )
    )
    return frame, qids, sensitive, L, K, C


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_audit_agrees_with_the_brute_force_checker(
    case: tuple[pd.DataFrame, list[str], list[str], int, int, float],
) -> None:
    frame, qids, sensitive, L, K, C = case
    ours = audit_lkc(frame, qids, "S", sensitive, L, K, C)
    ref = check_lkc_frame(frame, qids, "S", set(sensitive), L, K, C)  # every subset size
    assert ours.ok == ref.ok
    assert ours.min_group_size == ref.min_group_size
    assert ours.max_confidence == ref.max_confidence
    assert ours.subsets_checked == math.comb(len(qids), min(L, len(qids)))
    assert (ours.groups_below_k + ours.groups_above_c > 0) == (not ref.ok)
    assert all(v.size < K or v.confidence > C for v in ours.violations)


def test_parquet_releases(
    table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pyarrow")
    spec = str(table1_dir / "run.toml")
    released = tmp_path / "released.parquet"
    argv = ["--spec", spec, "--input", str(table1_dir / "table1.csv"), "--output", str(released)]
    assert main(["anonymize", *argv]) == 0
    capsys.readouterr()
    code, out, _ = run(capsys, "--spec", spec, "--released", str(released))
    assert code == 0 and "min group size 2" in out
    raw = tmp_path / "raw.pq"
    pd.read_csv(table1_dir / "table1.csv").to_parquet(raw)  # Age as int64: compared as "34"
    code, out, _ = run(capsys, "--spec", spec, "--released", str(raw))
    assert code == 3 and "{Job=Janitor, Age=34}" in out
    pd.read_csv(table1_dir / "table1.csv").drop(columns=["Sex"]).to_parquet(raw)
    code, _, err = run(capsys, "--spec", spec, "--released", str(raw))
    assert code == 2 and "'Sex'" in err
