"""A daemon keeps its channel to a ring successor between runs (no new TCP + TLS + HTTP/2
set-up in a run's first sum).  A successor that restarted on the same address between two
runs must not break the next run: the kept channel reconnects, or the relay renews it once."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, TEST_POLICY, multiset, read_rows, write_rows

from fedanon.apispec import Spec
from fedanon.centralized import anonymize_file
from fedanon.leader.federate import daemons, federation_config
from fedanon.leader.run import run_federation

pytestmark = pytest.mark.slow


def test_a_successor_restarted_between_runs_on_the_same_address(tmp_path: Path) -> None:
    header, rows = read_rows(EXAMPLES / "adult" / "adult.csv.gz")
    rows = random.Random(11).sample(rows, 3000)
    parts = []
    for i in range(3):
        write_rows(tmp_path / f"d{i}.csv", header, rows[i::3])
        parts.append((f"r{i}", tmp_path / f"d{i}.csv"))
    whole = tmp_path / "whole.csv"
    write_rows(whole, header, rows)
    spec = EXAMPLES / "adult" / "run-kanon.toml"
    anonymize_file(Spec.from_toml(spec), whole, tmp_path / "central.csv", None, False)
    work = tmp_path / "w"
    work.mkdir()
    with daemons(parts, work, policy=TEST_POLICY) as ds:
        cfg = federation_config(ds, work, spec, tmp_path / "a.csv", None)
        run_federation(cfg)  # r0 now holds a channel to r1
        victim = ds[1]
        victim.proc.terminate()
        victim.proc.wait(timeout=10)
        text = victim.config.read_text(encoding="utf-8")
        victim.config.write_text(
            re.sub(r'listen = "127.0.0.1:0"', f'listen = "127.0.0.1:{victim.port}"', text),
            encoding="utf-8",
        )
        log = (work / "r1-again.log").open("wb")
        again = subprocess.Popen(
            [sys.executable, "-m", "fedanon.party", "serve", "--config", str(victim.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        try:
            end = time.monotonic() + 30
            while "serving on port" not in (work / "r1-again.log").read_text(errors="replace"):
                assert again.poll() is None and time.monotonic() < end
                time.sleep(0.05)
            out = run_federation(federation_config(ds, work, spec, tmp_path / "b.csv", None))
        finally:
            again.terminate()
            again.wait(timeout=10)
    assert out.records == len(rows)
    assert multiset(tmp_path / "b.csv") == multiset(tmp_path / "central.csv")
