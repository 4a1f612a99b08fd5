"""The pairwise secure sum with real daemons (issue 19): the release is byte-identical to the
ring's, hospitals never call each other, and a leader that swaps or replays a hospital's key
is caught (exit 2, naming the hospital)."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, Pool, read_rows, table1_spec

from fedanon.leader import run as leader_run
from fedanon.leader.federate import federation_config
from fedanon.leader.links import PartyRejected
from fedanon.leader.pairwise import new_federation
from fedanon.leader.run import run_federation

pytestmark = pytest.mark.slow
BENCH = Path(__file__).resolve().parents[2] / "bench" / "specs"


def _both(pool: Pool, tmp: Path, spec: Path, header: list[str], rows: list[list[str]], n: int):  # type: ignore[no-untyped-def]
    out = {}
    for method in ("pairwise", "ring"):
        d = tmp / method
        d.mkdir()
        rep = pool.compare(spec, header, rows, n, 5, d, secure_sum=method)
        out[method] = ((d / "fed.csv").read_bytes(), rep)
    return out


@pytest.mark.parametrize(
    ("case", "n"),
    [("table1", 3), ("run-kanon.toml", 4), ("adult-free.toml", 3), ("run.toml", 5)],
)
def test_release_is_byte_identical_in_both_modes(
    pool: Pool, tmp_path: Path, case: str, n: int
) -> None:
    if case == "table1":
        spec = table1_spec(tmp_path)
        header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    else:
        spec = (BENCH if case.startswith("adult-") else EXAMPLES / "adult") / case
        header, all_rows = read_rows(EXAMPLES / "adult" / "adult.csv.gz")
        rows = random.Random(3).sample(all_rows, 3000)
    got = _both(pool, tmp_path, spec, header, rows, n)
    assert got["pairwise"][0] == got["ring"][0]
    pw, ring = got["pairwise"][1]["federation"], got["ring"][1]["federation"]
    assert pw["sums"] == ring["sums"] and pw["union"]["method"] == ring["union"]["method"]
    assert pw["secure_sum"] == "pairwise" and ring["secure_sum"] == "ring"


def _tampering(monkeypatch: pytest.MonkeyPatch, tamper: Any) -> None:
    def fake(method: str, *args: Any) -> Any:
        *rest, keys = args
        return new_federation(method, *rest, tamper(dict(keys)))

    monkeypatch.setattr(leader_run, "new_federation", fake)


def _run(pool: Pool, tmp: Path) -> None:
    spec = table1_spec(tmp)
    header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    from conftest import random_split, write_rows

    for i, part in enumerate(random_split(rows, 3, random.Random(1))):
        write_rows(pool.data(i), header, part)
    cfg = federation_config(pool.daemons[:3], pool.workdir, spec, tmp / "o.csv", tmp / "o.json")
    run_federation(cfg)


def test_swapped_key_stops_the_run_naming_the_hospital(
    pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [d.name for d in pool.daemons[:3]]

    def swap(keys: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(keys)
        out[names[1]], out[names[2]] = keys[names[2]], keys[names[1]]
        return out

    _tampering(monkeypatch, swap)
    with pytest.raises(PartyRejected) as err:
        _run(pool, tmp_path)
    assert err.value.party in names[1:] and err.value.exit_code == 2
    assert f"key of {err.value.party} failed verification" in str(err.value)
    assert not (tmp_path / "o.csv").exists()


def test_replayed_key_stops_the_run_naming_the_hospital(
    pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [d.name for d in pool.daemons[:3]]
    earlier: dict[str, Any] = {}

    def keep(keys: Mapping[str, Any]) -> dict[str, Any]:
        earlier.update(keys)
        return dict(keys)

    _tampering(monkeypatch, keep)
    (tmp_path / "first").mkdir()
    _run(pool, tmp_path / "first")  # a complete run: its keys are now stale

    def replay(keys: Mapping[str, Any]) -> dict[str, Any]:
        return {**keys, names[0]: earlier[names[0]]}

    _tampering(monkeypatch, replay)
    with pytest.raises(PartyRejected) as err:
        _run(pool, tmp_path)
    assert err.value.party == names[0] and err.value.exit_code == 2
    assert not (tmp_path / "o.csv").exists()


def test_pairwise_is_the_default(pool: Pool, tmp_path: Path) -> None:
    cfg = federation_config(
        pool.daemons[:3], pool.workdir, tmp_path / "s", tmp_path / "o.csv", None
    )
    assert cfg.secure_sum == "pairwise"
    _run(pool, tmp_path)
    import json

    rep = json.loads((tmp_path / "o.json").read_text())
    assert rep["federation"]["secure_sum"] == "pairwise"


class _CountingStub:
    """A PartyStub that counts the leader's Instruct and Contribute calls."""

    def __init__(self, stub: Any, counts: Counter[str]) -> None:
        self._stub = stub
        self._counts = counts

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._stub, name)
        if name not in ("Instruct", "Contribute"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._counts[name] += 1
            return attr(*args, **kwargs)

        return call


@pytest.mark.parametrize("secure_sum", ["pairwise", "ring"])
def test_a_decision_travels_inside_the_next_sum(
    pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secure_sum: str
) -> None:
    """Pairwise: one call per hospital and sum (the decisions ride in the Contribute order),
    no Instruct call at all; the ring still instructs every party directly."""
    counts: Counter[str] = Counter()
    real = leader_run.connect_links

    def counting(*args: Any) -> Any:
        links = real(*args)
        for link in links:
            link.stub = _CountingStub(link.stub, counts)  # type: ignore[assignment]
        return links

    monkeypatch.setattr(leader_run, "connect_links", counting)
    spec = table1_spec(tmp_path)
    header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    rep = pool.compare(spec, header, rows, 3, 2, tmp_path, secure_sum=secure_sum)
    fed = rep["federation"]
    if secure_sum == "pairwise":
        assert counts["Instruct"] == 0
        assert counts["Contribute"] == 3 * fed["sums"]
    else:
        assert counts["Instruct"] >= 3 * fed["rounds"] and counts["Contribute"] == 0


def test_a_hospital_policy_refuses_the_ring_unless_listed(tmp_path: Path) -> None:
    """[policy] secure_sum defaults to pairwise only: a ring run is refused at Prepare,
    naming the policy line (exit 2), before any statistic leaves; listed, it runs."""
    from conftest import TEST_POLICY, policy_daemons

    spec = table1_spec(tmp_path)
    header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    from conftest import random_split, write_rows

    parties = []
    for i, part in enumerate(random_split(rows, 3, random.Random(4))):
        write_rows(tmp_path / f"d{i}.csv", header, part)
        parties.append((f"h{i}", tmp_path / f"d{i}.csv"))
    careful = dataclasses.replace(TEST_POLICY, secure_sum=("pairwise",))
    policies = {"h0": TEST_POLICY, "h1": careful, "h2": TEST_POLICY}
    with policy_daemons(parties, tmp_path, policies) as ds:
        out = tmp_path / "o.csv"
        cfg = federation_config(ds, tmp_path, spec, out, None, secure_sum="ring")
        with pytest.raises(PartyRejected) as err:
            run_federation(cfg)
        assert err.value.party == "h1" and err.value.rule == "secure_sum"
        assert err.value.exit_code == 2
        assert 'secure_sum = "ring" is not in secure_sum = ["pairwise"]' in str(err.value)
        assert not out.exists()
        run_federation(federation_config(ds, tmp_path, spec, out, None, secure_sum="pairwise"))
        assert out.exists()
