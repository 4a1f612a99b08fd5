"""Claims checked from the outside: randomized small inputs, an own recount of each model
(no fedanon code in the check), and the exit codes the docs promise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedanon.cli.main import main

FIG1 = Path(__file__).parent.parent / "unit" / "kkm_fig1"

KKM_SPEC = """[privacy]
model = "kkm"
k = {k}
m = 2
delta = 1.0
epsilon_suppress = 1.0
{relax}
[[attribute]]
name = "age"
role = "qid"
type = "numeric"
domain = [0, 100]

[[attribute]]
name = "dx"
role = "qid"
type = "set"
taxonomy = "codes.txt"
separator = "|"
"""


def kkm_case(tmp_path: Path, k: int, relax: bool) -> tuple[Path, Path]:
    (tmp_path / "codes.txt").write_text("ALL\n  a\n  b\n")
    extra = "\n[relax]\nmax_delta = 1.0\nmax_epsilon_suppress = 1.0\n" if relax else ""
    spec = tmp_path / "run.toml"
    spec.write_text(KKM_SPEC.format(k=k, relax=extra))
    data = tmp_path / "in.csv"
    data.write_text("age,dx\n30,a\n31,a|b\n40,\n")
    return spec, data


@pytest.mark.parametrize("relax", [False, True])
def test_kkm_table_smaller_than_k_is_refused_with_delta_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], relax: bool
) -> None:
    # delta = 1 admits the NCP of a table whose every record is suppressed: the run
    # published an empty release (header only) with exit 0 instead of refusing k > n
    spec, data = kkm_case(tmp_path, 4, relax)
    out = tmp_path / "out.csv"
    argv = ["anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the table has 3 records, fewer than k = 4" in err
    assert not out.exists()


def test_kkm_constraints_all_suppressed_is_refused_with_delta_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 8 records, two utility constraints, none holding 8: every record suppressed at Step 2
    text = (FIG1 / "run.toml").read_text().replace("k = 2", "k = 8")
    text = text.replace("delta = 0.6", "delta = 1.0")
    for name in ("origin.txt", "gender.csv", "icd9.txt", "table4.toml"):
        (tmp_path / name).write_bytes((FIG1 / name).read_bytes())
    spec = tmp_path / "k8.toml"
    spec.write_text(text)
    out = tmp_path / "out.csv"
    argv = ["--input", str(FIG1 / "figure1a.csv"), "--output", str(out)]
    assert main(["anonymize", "--spec", str(spec), *argv]) == 2
    assert (
        "every utility constraint's demographics hold fewer than k = 8" in capsys.readouterr().err
    )
    assert not out.exists()


DP_SPEC = """[privacy]
model = "dp"
epsilon = 1.0
specializations = 2

[utility]
score = "{score}"

[[attribute]]
name = "ward"
role = "qid"
type = "numeric"
domain = [0, 1]
step = 1

[[attribute]]
name = "age"
role = "qid"
type = "numeric"
domain = [0, 20]
step = 5

[[attribute]]
name = "outcome"
role = "class"
values = ["N", "Y"]
"""


@pytest.mark.parametrize("score", ["max", "infogain"])
def test_dp_numeric_domain_of_one_step_is_not_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], score: str
) -> None:
    # a numeric predictor whose domain is one step has no split point: DiffGen called the
    # exponential mechanism on zero candidates and exited 1 (internal error)
    spec = tmp_path / "dp.toml"
    spec.write_text(DP_SPEC.format(score=score))
    data = tmp_path / "in.csv"
    data.write_text("ward,age,outcome\n0,0,N\n0,8,N\n0,8,Y\n0,6,N\n0,15,Y\n")
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    argv = ["--input", str(data), "--output", str(out), "--report", str(report)]
    assert main(["anonymize", "--spec", str(spec), *argv, "--seed", "1", "--quiet"]) == 0
    capsys.readouterr()
    lines = [x for x in out.read_text().splitlines() if not x.startswith("#")]
    assert lines[0] == "ward,age,outcome,count"
    assert {x.split(",")[0] for x in lines[1:]} == {"[0-1)"}
    ledger = json.loads(report.read_text())["budget"]["ledger"]
    assert all(e["what"] != "ward" for e in ledger if e["step"] == "split")  # nothing spent
