"""`fedanon experiment dp` runs the DiffGen experiment (alias of `fedanon dp-experiment`)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from fedanon.cli.main import main


def test_experiment_dp_quick(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["experiment", "dp", "--out", str(out), "--quick", "--rows", "3000", "--runs", "1"]
    assert main(args) == 0
    names = {p.name for p in out.iterdir()}
    assert names == {"dp_ca.csv", "dp_ca_runs.csv", "dp_ca_max.png", "dp_ca_infogain.png"}
    summary = list(csv.DictReader((out / "dp_ca.csv").open()))
    # the quick grid: epsilon in {0.1, 1}, h in {4, 10}, both scores
    assert {(r["score"], r["epsilon"], r["h"]) for r in summary} == {
        (s, e, h) for s in ("max", "infogain") for e in ("0.1", "1") for h in ("4", "10")
    }
    assert all(r["runs"] == "1" and 0.0 <= float(r["CA_mean"]) <= 1.0 for r in summary)


def test_experiment_dp_bad_runs_exit_2(tmp_path: Path) -> None:
    args = ["experiment", "dp", "--out", str(tmp_path), "--runs", "0", "--rows", "100"]
    with pytest.raises(SystemExit) as stop:  # refused by argparse: exit 2, one line
        main(args)
    assert stop.value.code == 2


def test_runs_refused_for_lkc_experiments(tmp_path: Path) -> None:
    args = ["experiment", "dr", "--out", str(tmp_path), "--runs", "3", "--rows", "100"]
    assert main(args) == 2
