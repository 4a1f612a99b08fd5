"""Issue 10 item 5 in a federation: party daemons whose tables are over their memory budget
(FEDANON_MEMORY_BUDGET in their environment, as a systemd unit would set it) keep them out of
core and release what daemons holding them in memory release."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from conftest import (
    EXAMPLES,
    TEST_POLICY,
    multiset,
    random_split,
    read_rows,
    table1_spec,
    write_rows,
)

from fedanon.leader.federate import daemons, federation_config
from fedanon.leader.run import run_federation


def _federate(work: Path, spec: Path, budget: str, mp: pytest.MonkeyPatch) -> tuple[bytes, dict]:
    mp.setenv("FEDANON_MEMORY_BUDGET", budget)
    mp.setenv("FEDANON_CHUNK_ROWS", "2")
    header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    parts = random_split(rows, 3, random.Random(4))
    for i, part in enumerate(parts):
        write_rows(work / f"p{i}.csv", header, part)
    out = work / f"fed-{budget}.csv"
    parties = [(f"h{i}", work / f"p{i}.csv") for i in range(3)]
    with daemons(parties, work / budget, policy=TEST_POLICY) as ds:
        res = run_federation(federation_config(ds, work / budget, spec, out, None))
    return out.read_bytes(), res.report


def test_daemons_out_of_core_release_what_in_memory_daemons_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = table1_spec(tmp_path)
    (tmp_path / "off").mkdir()
    (tmp_path / "1").mkdir()
    mem, rep_mem = _federate(tmp_path, spec, "off", monkeypatch)
    ooc, rep_ooc = _federate(tmp_path, spec, "1", monkeypatch)
    assert rep_ooc["specializations"] == rep_mem["specializations"]
    assert rep_ooc["cut"] == rep_mem["cut"]
    assert multiset(tmp_path / "fed-1.csv") == multiset(tmp_path / "fed-off.csv")
    assert ooc == mem
    logs = "".join(p.read_text() for p in (tmp_path / "1").glob("h*.log"))
    assert "codes kept out of core" in logs
