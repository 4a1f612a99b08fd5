"""The protocol over delayed links (bench/wanproxy.py in front of every party).

Distributed == centralized still holds when every link has a one-way delay; a party killed
mid-round is detected within seconds, named, and the run aborts without output; and a sum
costs about (n + 1) / 2 round trips, not the n + 2 of nested relays (the link counts).
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from conftest import (
    EXAMPLES,
    TEST_POLICY,
    Pool,
    multiset,
    random_split,
    read_rows,
    table1_spec,
    write_rows,
)
from wanproxy import DelayProxy

from fedanon.apispec import Spec
from fedanon.centralized import anonymize_file
from fedanon.leader.config import FederationConfig, PartyAddress
from fedanon.leader.federate import Daemon, daemons, federation_config
from fedanon.leader.links import PartyFailed
from fedanon.leader.run import run_federation

pytestmark = pytest.mark.slow


@contextmanager
def delayed(cfg: FederationConfig, delay: float) -> Iterator[list[DelayProxy]]:
    """The same federation, every party behind a proxy with a one-way ``delay``: the
    leader's links and (through Prepare) the ring's."""
    with ExitStack() as stack:
        proxies = []
        for p in cfg.parties:
            host, _, port = p.address.rpartition(":")
            proxies.append(stack.enter_context(DelayProxy((host, int(port)), delay)))
        yield proxies


def behind(cfg: FederationConfig, proxies: Sequence[DelayProxy]) -> FederationConfig:
    parties = tuple(
        PartyAddress(p.name, f"127.0.0.1:{px.port}")
        for p, px in zip(cfg.parties, proxies, strict=True)
    )
    return dataclasses.replace(cfg, parties=parties)


def _compare(
    pool: Pool,
    spec: Path,
    rows: list[list[str]],
    header: list[str],
    n: int,
    tmp: Path,
    delay: float,
    union: str = "auto",
) -> dict[str, object]:
    rng = random.Random(7)
    for i, part in enumerate(random_split(rows, n, rng)):
        write_rows(pool.data(i), header, part)
    whole = tmp / "union.csv"
    write_rows(whole, header, rows)
    cfg = federation_config(
        pool.daemons[:n], pool.workdir, spec, tmp / "fed.csv", None, union=union
    )
    with delayed(cfg, delay) as proxies:
        out = run_federation(behind(cfg, proxies))
        assert all(px.connections > 0 for px in proxies)  # the links really were delayed
    central, _ = anonymize_file(Spec.from_toml(spec), whole, tmp / "central.csv", None, False)
    assert multiset(tmp / "fed.csv") == multiset(tmp / "central.csv")
    assert out.report["specializations"] == central["specializations"]
    assert out.report["cut"] == central["cut"]
    return out.report


@pytest.mark.parametrize(
    ("spec_name", "n_rows", "n"),
    [("run.toml", 3000, 3), ("run-kanon.toml", 3000, 4)],
)
def test_delayed_links_release_what_the_centralized_run_does(
    pool: Pool, tmp_path: Path, spec_name: str, n_rows: int, n: int
) -> None:
    header, rows = read_rows(EXAMPLES / "adult" / "adult.csv.gz")
    rows = random.Random(n_rows).sample(rows, n_rows)
    rep = _compare(pool, EXAMPLES / "adult" / spec_name, rows, header, n, tmp_path, 0.005)
    fed = rep["federation"]
    assert isinstance(fed, dict)
    # one sum per phase of every round, plus the union (run.toml has numeric QIDs: SPLIT sums)
    assert fed["sums"] >= fed["rounds"] + 1, fed
    secs = fed["seconds"]
    # every RPC counts as network: the 5 ms links dominate what the leader waits for
    assert secs["network"] >= 0.5 * secs["total"], secs


def test_delayed_links_sketch_union(pool: Pool, tmp_path: Path) -> None:
    """Table 1 (a column without declared values): the union is the sketch, whose length
    histogram a party adds only after the final Instruction (sent without waiting) is
    applied, and whose sketch only after the Instruction with its layout and key."""
    header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    rep = _compare(pool, table1_spec(tmp_path), rows, header, 3, tmp_path, 0.005)
    fed = rep["federation"]
    assert isinstance(fed, dict) and fed["union"]["method"] == "sketch"


def test_delayed_links_mixnet_union(pool: Pool, tmp_path: Path) -> None:
    """The mix-net on request: a party builds its batch (UnionBatch) only once the final
    Instruction, sent without waiting for acknowledgements, is applied."""
    header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    rep = _compare(pool, table1_spec(tmp_path), rows, header, 3, tmp_path, 0.005, "mixnet")
    fed = rep["federation"]
    assert isinstance(fed, dict) and fed["union"]["method"] == "mixnet"


def test_party_killed_mid_round_under_delay(tmp_path: Path) -> None:
    header, rows = read_rows(EXAMPLES / "adult" / "adult.csv.gz")
    rows = random.Random(5).sample(rows, 3000)
    parts = []
    for i in range(3):
        write_rows(tmp_path / f"d{i}.csv", header, rows[i::3])
        parts.append((f"k{i}", tmp_path / f"d{i}.csv"))
    work = tmp_path / "w"
    work.mkdir()
    spec = EXAMPLES / "adult" / "run-kanon.toml"
    with daemons(parts, work, policy=TEST_POLICY) as ds:
        victim: Daemon = ds[1]  # the middle of the ring: only its neighbours talk to it
        out = tmp_path / "out.csv"
        cfg = federation_config(ds, work, spec, out, tmp_path / "rep.json")
        killed: list[float] = []

        def kill() -> None:
            time.sleep(0.015)  # the next sum is on its way through the ring
            os.kill(victim.proc.pid, signal.SIGKILL)
            victim.proc.wait()
            killed.append(time.monotonic())

        def progress(round_: int, _spec: object) -> None:
            if round_ == 2 and not killed:
                threading.Thread(target=kill, daemon=True).start()

        with delayed(cfg, 0.010) as proxies, pytest.raises(PartyFailed) as err:
            run_federation(behind(cfg, proxies), progress=progress)
        took = time.monotonic() - killed[0]
        msg = str(err.value)
        assert err.value.party == victim.name, msg
        assert f"party {victim.name}" in msg and "round" in msg, msg
        assert took < 10.0, took  # detected within seconds (the run's deadline is an hour)
        assert not out.exists() and not (tmp_path / "rep.json").exists()
        for d in ds:
            if d is not victim:
                assert "aborted by the leader" in (work / f"{d.name}.log").read_text()
