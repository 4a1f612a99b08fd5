"""A tiny grid of the experiments on the first few thousand Adult rows."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")

from fedanon.apispec import Spec
from fedanon.cli.main import main
from fedanon.evaluation.experiments import (
    DEFAULT_SPEC,
    Grid,
    blow_up,
    load_context,
    run_experiments,
)

BASE = Spec.from_toml(DEFAULT_SPEC)
TINY = Grid(ks=(20, 60), ls=(2, 4), cs=(0.2, 0.3), sizes=(3000, 6000))


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_ce_vs_k_and_naive_tiny(tmp_path: Path) -> None:
    written = run_experiments("ce-vs-k", tmp_path, BASE, rows=3000, grid=TINY)
    assert {p.name for p in written} == {"fig6a_ce_vs_k.csv", "fig6a_ce_vs_k.png"}
    rows = _rows(tmp_path / "fig6a_ce_vs_k.csv")
    assert len(rows) == 4
    for r in rows:
        assert r["status"] == "ok"
        assert 0.0 <= float(r["CE"]) <= 1.0 and 0.0 < float(r["DR"]) <= 1.0
    assert (tmp_path / "fig6a_ce_vs_k.png").stat().st_size > 1000

    run_experiments("distributed-vs-naive", tmp_path, BASE, rows=3000, grid=TINY)
    rows = _rows(tmp_path / "fig8_distributed_vs_naive.csv")
    assert sorted({r["method"] for r in rows}) == ["distributed", "naive"]


def test_scalability_tiny(tmp_path: Path) -> None:
    run_experiments("scalability", tmp_path, BASE, rows=2000, grid=TINY)
    rows = _rows(tmp_path / "fig9_scalability.csv")
    assert [int(r["rows"]) for r in rows] == [3000, 6000]
    for r in rows:
        parts = float(r["read"]) + float(r["anonymize"]) + float(r["write"])
        assert float(r["total"]) == pytest.approx(parts, rel=1e-3)


def test_blow_up_keeps_originals_and_domains() -> None:
    ctx = load_context(
        BASE,
        Path(__file__).resolve().parents[2] / "examples" / "adult" / "adult.csv.gz",
        TINY,
        rows=100,
    )
    data = blow_up(ctx.original, ctx.spec, 350)
    assert all(len(v) == 350 for v in data.values())
    for k, v in ctx.original.items():
        assert data[k][:100] == v  # the originals come first, unchanged
        if k in ("workclass", "salary-class", "marital-status"):
            assert data[k][100:200] == v  # categorical values are kept in variations
    for a in ctx.spec.qids:
        if a.type == "numeric" and a.domain is not None:
            assert all(a.domain[0] <= float(x) < a.domain[1] for x in data[a.name])


def test_unknown_experiment_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["experiment", "nope", "--out", "x"])
    assert exc.value.code == 2
