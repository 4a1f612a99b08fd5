"""`fedanon dp-experiment` end to end on a small grid and part of Adult."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from fedanon.apispec import Spec
from fedanon.cli.main import main
from fedanon.dp.experiment import DEFAULT_SPEC, Grid, run_dp_experiment


def test_dp_experiment_small_grid(tmp_path: Path) -> None:
    grid = Grid(("0.5",), (2, 4), ("max", "infogain"), 2)
    written = run_dp_experiment(tmp_path, Spec.from_toml(DEFAULT_SPEC), rows=6000, grid=grid)
    assert {p.name for p in written} == {
        "dp_ca.csv",
        "dp_ca_runs.csv",
        "dp_ca_max.png",
        "dp_ca_infogain.png",
    }
    assert all(p.stat().st_size > 0 for p in written)
    summary = list(csv.DictReader((tmp_path / "dp_ca.csv").open()))
    runs = list(csv.DictReader((tmp_path / "dp_ca_runs.csv").open()))
    assert len(summary) == 4 and len(runs) == 8
    for r in summary:
        assert 0.0 <= float(r["CA_mean"]) <= 1.0
        assert float(r["BA"]) > float(r["LA"]) > 0.5
    assert len({r["seed"] for r in runs}) == 8


def test_dp_experiment_cli_rejects_bad_runs(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stop:  # refused by argparse: exit 2, one line
        main(["dp-experiment", "--out", str(tmp_path), "--runs", "0", "--rows", "100"])
    assert stop.value.code == 2
