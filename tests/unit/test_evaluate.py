"""Utility metrics on hand-computed cases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")

from fedanon.apispec import Spec
from fedanon.cli.main import main
from fedanon.errors import InputError
from fedanon.evaluation.evaluate import (
    baseline,
    discernibility_ratio,
    evaluate_files,
    evaluate_tables,
    split_rows,
)
from fedanon.model.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[2]
TABLE1 = ROOT / "examples" / "table1"


def _csv(path: Path) -> dict[str, list[str]]:
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    rows = [line.split(",") for line in lines[1:] if line]
    return {h: [r[i] for r in rows] for i, h in enumerate(header)}


def test_dr_of_paper_table2() -> None:
    # Table II groups on (Job, Sex, Age): Nontechnical/M/[30-60) rows 1,3,5,6 -> 4;
    # Professional/F/[30-60) 2,7 -> 2; Professional/M/[1-30) 4,9 -> 2;
    # Professional/M/[30-60) 8 -> 1; Technical/F/[60-99) 10,11 -> 2.
    # DR = (16 + 4 + 4 + 1 + 4) / 11^2 = 29 / 121.
    t2 = _csv(TABLE1 / "table2.csv")
    dr, groups = discernibility_ratio(t2, ["Job", "Sex", "Age"])
    assert groups == 5
    assert dr == pytest.approx(29 / 121)


def test_dr_extremes() -> None:
    assert discernibility_ratio({"a": ["x"] * 10}, ["a"]) == (1.0, 1)
    assert discernibility_ratio({"a": [str(i) for i in range(10)]}, ["a"]) == (0.1, 10)


SPEC = """
[privacy]
L = 1
K = 1
C = 1.0
[utility]
score = "infogain"
[[attribute]]
name = "q"
role = "qid"
type = "categorical"
taxonomy = "q.txt"
[[attribute]]
name = "y"
role = "class"
"""


def _separable(n: int = 90) -> dict[str, list[str]]:
    q = ["a" if i % 3 else "b" for i in range(n)]
    return {"q": q, "y": ["yes" if v == "a" else "no" for v in q]}


def test_ce_zero_and_ue_majority_when_qids_carry_all_signal() -> None:
    spec = parse_spec(SPEC)
    data = _separable()
    base = baseline(spec, data)
    m = evaluate_tables(spec, data, data, base)
    assert m.CE == 0.0
    assert m.BE == 0.0
    # Without the QID there is no feature: the tree predicts the majority class ("yes", 2/3),
    # so UE is the minority share of the test set; stratified split keeps it at 1/3.
    y = np.asarray(data["y"])
    test_minority = float(np.mean(y[base.test] != "yes"))
    assert test_minority == pytest.approx(1 / 3)
    assert pytest.approx(test_minority) == m.UE
    # A fully generalized release loses the signal: CE becomes the majority error too.
    flat = {"q": ["*"] * len(y), "y": data["y"]}
    assert pytest.approx(m.UE) == evaluate_tables(spec, data, flat, base).CE


def test_split_is_stratified_and_deterministic() -> None:
    labels = ["a"] * 60 + ["b"] * 30
    tr, te = split_rows(labels)
    tr2, te2 = split_rows(labels)
    assert np.array_equal(tr, tr2) and np.array_equal(te, te2)
    assert len(te) == 30 and len(tr) == 60
    assert sum(labels[i] == "b" for i in te) == 10
    assert not set(tr.tolist()) & set(te.tolist())


def test_released_in_other_order_is_rejected() -> None:
    spec = parse_spec(SPEC)
    data = _separable()
    shuffled = {k: v[::-1] for k, v in data.items()}
    with pytest.raises(InputError, match="class column differs"):
        evaluate_tables(spec, data, shuffled)


def test_cli_on_table1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.json"
    rc = main(
        [
            "evaluate",
            "--spec",
            str(TABLE1 / "run.toml"),
            "--original",
            str(TABLE1 / "table1.csv"),
            "--released",
            str(TABLE1 / "table2.csv"),
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    assert "DR  discernibility ratio" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["DR"] == pytest.approx(29 / 121)
    assert doc["records"] == 11 and doc["groups"] == 5
    spec, _ = load_spec(TABLE1 / "run.toml")
    direct = evaluate_files(
        Spec.from_toml(TABLE1 / "run.toml").run_spec, TABLE1 / "table1.csv", TABLE1 / "table2.csv"
    )
    assert direct.as_dict() == doc
    assert spec.class_attr is not None


def test_cli_mismatched_tables_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    lines = (TABLE1 / "table2.csv").read_text().splitlines()
    bad.write_text("\n".join(lines[:5]) + "\n")
    rc = main(
        [
            "evaluate",
            "--spec",
            str(TABLE1 / "run.toml"),
            "--original",
            str(TABLE1 / "table1.csv"),
            "--released",
            str(bad),
        ]
    )
    assert rc == 2
