"""A hostile leader that desynchronises the hospitals cannot learn one hospital's statistics
(issue 19, found by attacking the pairwise sum).

The attack: after an honest sum t, the leader gives hospital A a decision and asks A's new
statistics under sum t+1, while it asks B and C -- who have not applied the decision -- the
statistics they already sent, again, under sum t+1.  Were the masks a function of the pair
seed and the sum number only, they would cancel and ``S_t+1 - S_t`` would be A's change of
statistics alone.  The masks are bound to the chain of instructions each party applied and to
the order (:func:`fedanon.security.keyagree.sum_seeds`): A's masks no longer cancel against
B's and C's (tests/unit/test_pairwise.py), and B and C never compute one state's
statistics twice (the same statistics under two sums): they refuse the hostile sum, the
run fails and publishes nothing.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from conftest import (
    ADULT_NUMERIC,
    EXAMPLES,
    TEST_POLICY,
    random_split,
    read_rows,
    table1_spec,
    write_rows,
)

from fedanon.errors import ProtocolError
from fedanon.leader import run as leader_run
from fedanon.leader.federate import daemons, federation_config
from fedanon.leader.pairwise import PairwiseFederation
from fedanon.leader.run import run_federation
from fedanon.net import rpc
from fedanon.net.convert import sum_order_to_pb
from fedanon.security.pairwise import SumOrder

_ = (ADULT_NUMERIC, TEST_POLICY)
LOOT: dict[str, Any] = {}


def _masked(link: Any, req: Any, run_id: bytes, order: SumOrder, timeout: float) -> np.ndarray:
    """One party's masked vector of ``req`` (the leader's raw view)."""
    out = np.zeros(order.size, dtype=np.uint64)
    stream = link.stub.Contribute(req, timeout=timeout)
    pos = 0
    for _sum, _seq, data in rpc.read_masked(
        stream,
        run_id=run_id,
        round=order.round,
        phase=req.phase,
        layout_hash=order.layout_hash,
        total_len=order.size,
    ):
        words = np.frombuffer(data, dtype="<u8")
        out[pos : pos + words.size] = words
        pos += words.size
    return out


class DesyncFederation(PairwiseFederation):
    """The stock pairwise federation, plus one hostile sum before the engine's second one."""

    victim = 0

    def broadcast(self, update: Any, step: str | None = None, *, chained: bool = False) -> None:
        LOOT.setdefault("updates", []).append((update, chained))
        super().broadcast(update, step, chained=chained)

    def sum(self, phase: Any, round_: int, size: int, digest: bytes, step: str | None = None):  # type: ignore[no-untyped-def]
        if self.sums == 0:
            LOOT["first"] = SumOrder(0, round_, phase, digest, size, self.instructions)
            total = super().sum(phase, round_, size, digest, step)
            LOOT["S0"] = total.view(np.uint64).copy()
            return total
        if "D" not in LOOT and self.instructions > 0:
            first: SumOrder = LOOT["first"]
            t = self.sums
            new = SumOrder(t, round_, phase, digest, size, self.instructions)
            stale = SumOrder(t, first.round, first.phase, first.layout_hash, first.size, 0)
            LOOT["new_order"] = new
            vecs = []
            for i, link in enumerate(self.links):
                if i == self.victim:  # the victim alone gets the decisions, then sum t
                    req = sum_order_to_pb(new, self.run_id)
                    for msg, _step in self._carry:
                        req.carried.append(msg)
                    vecs.append(_masked(link, req, self.run_id, new, 60)[: first.size])
                else:  # the others: the statistics they already sent, again, under sum t
                    req = sum_order_to_pb(stale, self.run_id)
                    try:
                        vecs.append(_masked(link, req, self.run_id, stale, 60))
                    except grpc.RpcError as exc:
                        LOOT.setdefault("refused", []).append(exc.details())
            if LOOT.get("refused"):
                raise ProtocolError("the hospitals refused the hostile sum")
            m = min(first.size, size)
            s1 = np.zeros(m, dtype=np.uint64)
            for v in vecs:
                np.add(s1, v[:m], out=s1)
            LOOT["S1"] = s1
            LOOT["D"] = (s1 - LOOT["S0"][:m]).view(np.int64)
            LOOT["masked_victim"] = vecs[self.victim][:m].copy()
            self.sums += 1
            # now the honest sum t+1: the others get the decision, the victim re-applies it
            # (a no-op): every party is in the same state again, the run goes on as normal
        return super().sum(phase, round_, size, digest, step)


@pytest.mark.parametrize("case", ["table1", "adult"])
def test_a_desynchronised_sum_reveals_no_hospitals_statistics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    LOOT.clear()
    if case == "table1":
        spec = table1_spec(tmp_path)
        header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    else:
        spec = EXAMPLES / "adult" / "run-kanon.toml"
        header, all_rows = read_rows(EXAMPLES / "adult" / "adult.csv.gz")
        rows = random.Random(3).sample(all_rows, 3000)
    work = tmp_path / "w"
    work.mkdir()
    parties = []
    for i, part in enumerate(random_split(rows, 3, random.Random(1))):
        write_rows(work / f"p{i}.csv", header, part)
        parties.append((f"h{i}", work / f"p{i}.csv"))

    def hostile(method: str, *args: Any) -> Any:
        run_id, links, traffic, deadline, pool, keys = args
        return DesyncFederation(run_id, links, traffic, deadline, pool, keys)

    monkeypatch.setattr(leader_run, "new_federation", hostile)
    with daemons(parties, work, policy=TEST_POLICY) as ds:
        cfg = federation_config(ds, work, spec, tmp_path / "o.csv", tmp_path / "o.json")
        with pytest.raises(ProtocolError):
            run_federation(cfg)
    # the others never compute one state's statistics twice: the hostile sum is refused
    assert len(LOOT.get("refused", [])) == 2, LOOT.get("refused")
    assert all("already sent" in d for d in LOOT["refused"]), LOOT["refused"]
    assert not (tmp_path / "o.csv").exists()  # a failed run publishes nothing
