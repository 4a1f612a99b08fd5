"""One set of daemons serves several runs at once (state keyed by run id)."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import EXAMPLES, Pool, multiset, random_split, read_rows, write_rows

from fedanon.apispec import Spec
from fedanon.centralized import anonymize_file
from fedanon.leader.federate import federation_config
from fedanon.leader.run import run_federation

pytestmark = pytest.mark.slow


def test_two_runs_at_once_on_the_same_daemons(pool: Pool, tmp_path: Path) -> None:
    header, rows = read_rows(EXAMPLES / "adult" / "adult.csv.gz")
    rows = random.Random(5).sample(rows, 3000)
    for i, part in enumerate(random_split(rows, 3, random.Random(6))):
        write_rows(pool.data(i), header, part)
    union = tmp_path / "union.csv"
    write_rows(union, header, rows)
    specs = [EXAMPLES / "adult" / "run.toml", EXAMPLES / "adult" / "run-discernibility.toml"]
    outs = [tmp_path / f"fed{i}.csv" for i in range(2)]
    cfgs = [
        federation_config(pool.daemons[:3], pool.workdir, s, o, None)
        for s, o in zip(specs, outs, strict=True)
    ]
    with ThreadPoolExecutor(2) as ex:
        results = list(ex.map(run_federation, cfgs))
    for spec, out, res in zip(specs, outs, results, strict=True):
        central = tmp_path / f"central-{spec.stem}.csv"
        rep, _ = anonymize_file(Spec.from_toml(spec), union, central, None, False)
        assert multiset(out) == multiset(central)
        assert res.report["specializations"] == rep["specializations"]
