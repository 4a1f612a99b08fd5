"""The paper's worked example (Table I, Fig. 2, Examples 3-4)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from checker import check_released
from engine_helpers import anonymize

from fedanon.tds.measures import info_gain


def test_score_any_job_matches_example_3() -> None:
    # Blue-collar: 5 Y, 1 N; White-collar: 0 Y, 5 N  (Example 3)
    assert info_gain(np.array([[5, 1], [0, 5]])) == pytest.approx(0.6396, abs=1e-3)


def test_first_two_specializations_follow_example_4(table1_dir: Path, tmp_path: Path) -> None:
    result, _ = anonymize(table1_dir / "run.toml", table1_dir / "table1.csv", tmp_path / "o.csv")
    specs = result.specializations
    assert (specs[0].attribute, specs[0].value) == ("Job", "ANY_Job")
    assert specs[0].score == pytest.approx(0.6396, abs=1e-3)
    assert set(specs[0].children) == {"Blue-collar", "White-collar"}
    assert (specs[1].attribute, specs[1].value) == ("Age", "[1-99)")


def test_released_table_is_private_and_maximal(table1_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "released.csv"
    _, (party,) = anonymize(table1_dir / "run.toml", table1_dir / "table1.csv", out)
    res = check_released(table1_dir / "run.toml", out)
    assert res.ok, res.first_violation
    # maximal: each remaining non-leaf cut value, specialized alone, breaks (2,2,50%)
    st = party.state
    rows = list(csv.DictReader(out.open()))
    raw = list(csv.DictReader((table1_dir / "table1.csv").open()))
    tried = 0
    for a, tree in enumerate(st.trees):
        for x in np.flatnonzero(st.in_cut[a] & (tree.nchild > 0)):
            leaves = party.table.qid_leaves[a]
            child = tree.child_of(np.full(leaves.size, x), leaves)
            name = tree.name
            spec_rows = [dict(r) for r in rows]
            for i, r in enumerate(spec_rows):
                if r[name] == tree.labels[x]:
                    r[name] = tree.labels[int(child[i])]
            f = tmp_path / f"spec_{name}_{x}.csv"
            with f.open("w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(spec_rows)
            assert not check_released(table1_dir / "run.toml", f).ok, (name, tree.labels[x])
            tried += 1
    assert tried > 0
    assert len(raw) == len(rows) == 11


def test_checker_accepts_table2_rejects_table1(table1_dir: Path) -> None:
    assert check_released(table1_dir / "run.toml", table1_dir / "table2.csv").ok
    assert not check_released(table1_dir / "run.toml", table1_dir / "table1.csv").ok


def test_cli_writes_table_and_report(table1_dir: Path, tmp_path: Path) -> None:
    out, rep = tmp_path / "r.csv", tmp_path / "r.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedanon.cli",
            "anonymize",
            "--spec",
            str(table1_dir / "run.toml"),
            "--input",
            str(table1_dir / "table1.csv"),
            "--output",
            str(out),
            "--report",
            str(rep),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "released 11 records" in proc.stdout
    header = out.read_text().splitlines()[0]
    assert header == "Job,Sex,Age,Transfuse,Surgery"  # identifier dropped, input order kept
    import json

    report = json.loads(rep.read_text())
    assert report["specializations"][0]["value"] == "ANY_Job"
    assert report["min_group_size"] >= 2 and report["max_confidence"] <= 0.5
    assert set(report["cut"]) == {"Job", "Sex", "Age"}


def test_nothing_can_be_specialized(table1_dir: Path, tmp_path: Path) -> None:
    """K = |T|: the root is private but every specialization breaks it; the fully
    generalized table is released."""
    for f in table1_dir.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    spec = tmp_path / "run.toml"
    spec.write_text(spec.read_text().replace("K = 2", "K = 11").replace("C = 0.5", "C = 1.0"))
    out = tmp_path / "released.csv"
    result, _ = anonymize(spec, tmp_path / "table1.csv", out)
    assert result.specializations == ()
    assert check_released(spec, out).ok
    rows = list(csv.DictReader(out.open()))
    assert {(r["Job"], r["Sex"], r["Age"]) for r in rows} == {("ANY_Job", "ANY_Sex", "[1-99)")}
    assert result.decider.summary()["groups"] == 1
