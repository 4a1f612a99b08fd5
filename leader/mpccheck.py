"""The leader's side of m-privacy across hospitals (``[privacy] m > 0``).

* Before any party is contacted (:func:`check_mpc_parties`): an honest majority (at least
  2m + 1 hospitals) and every hospital's MPC address (``[[party]] mpc_address`` of
  federation.toml), handed to every party at Prepare;
* per candidate the Decider would take (:class:`FederatedCoalitionCheck`, the engine's
  :class:`fedanon.tds.ports.CoalitionCheck`): ``CoalitionCheck`` at every hospital at once;
  each hospital feeds its own counts of the candidate's groups to its MPC worker, the workers
  compute among themselves and open one bit, which every hospital answers.  The leader sees
  that bit and nothing else; answers that disagree abort the run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from fedanon.errors import ConfigError, FedanonError, RunAborted
from fedanon.leader.config import FederationConfig
from fedanon.leader.links import Link, Traffic
from fedanon.leader.ring import RingFederation
from fedanon.leader.watch import Call, probe_status, wait_all
from fedanon.model.spec import RunSpec
from fedanon.net import rpc
from fedanon.net.convert import coalition_to_pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.privacy.mprivacy import CoalitionQuery
from fedanon.tds.ports import Candidate

log = logging.getLogger(__name__)
CHECK_TIMEOUT_S = 600.0  # one check: the hospitals' workers compute it together
STEP = "coalition checks"  # where their bytes are counted in the report

__all__ = ["FederatedCoalitionCheck", "check_mpc_parties"]


def check_mpc_parties(spec: RunSpec, cfg: FederationConfig) -> dict[str, str]:
    """The MPC workers' addresses by party (empty for m = 0); refuses a federation without an
    honest majority or without an MPC address for a hospital."""
    if spec.m <= 0:
        return {}
    n = len(cfg.parties)
    if n < 2 * spec.m + 1:
        raise ConfigError(
            f"[privacy] m = {spec.m} needs an honest majority for its MPC: at least "
            f"{2 * spec.m + 1} hospitals, the federation has {n}",
            file=cfg.source,
            expected=f"at least {2 * spec.m + 1} [[party]] tables, or a smaller m",
        )
    missing = [p.name for p in cfg.parties if not p.mpc_address]
    if missing:
        raise ConfigError(
            f"[privacy] m = {spec.m}: [[party]] {missing[0]} has no mpc_address (where its "
            "MPC worker listens: [mpc] listen of its party.toml)",
            file=cfg.source,
            expected='e.g. mpc_address = "alice.example:7500"',
        )
    return {p.name: p.mpc_address for p in cfg.parties}


class FederatedCoalitionCheck:
    """:class:`fedanon.tds.ports.CoalitionCheck` over the hospitals' MPC."""

    def __init__(
        self,
        spec: RunSpec,
        run_id: bytes,
        links: Sequence[Link],
        fed: RingFederation,
        traffic: Traffic,
        pool: ThreadPoolExecutor,
        deadline: rpc.Deadline,
    ) -> None:
        self.m = spec.m
        self.run_id = run_id
        self.links = list(links)
        self.fed = fed  # its ``instructions``: the Instructions sent so far
        self.traffic = traffic
        self.pool = pool
        self.deadline = deadline
        self.asked = 0  # checks asked (the number of the next), the root's included
        self.checked = 0  # candidates checked
        self.rejected = 0

    def passes(self, candidate: Candidate) -> bool:
        ok = self._ask(candidate)
        self.checked += 1
        self.rejected += not ok
        return ok

    def passes_root(self) -> bool:
        return self._ask(None)

    def _ask(self, candidate: Candidate | None) -> bool:
        # the state the candidate was chosen in: after every Instruction sent so far
        query = CoalitionQuery(self.asked, self.fed.instructions, candidate)
        req = coalition_to_pb(query, self.run_id)
        label = f"coalition check {self.asked}"
        timeout = min(CHECK_TIMEOUT_S, self.deadline.remaining())

        def ask(stub: pb_grpc.PartyStub) -> bool:
            reply = stub.CoalitionCheck(req, timeout=timeout)
            self.traffic.add(STEP, sent=req.ByteSize(), received=reply.ByteSize())
            return bool(reply.passes)

        calls = [Call(lk, label, self.pool.submit(lk.call, label, ask)) for lk in self.links]

        def probe() -> FedanonError | None:
            return probe_status(self.run_id, self.links, label, self.deadline, self.traffic, STEP)

        self.traffic.timed("network", lambda: wait_all(calls, probe, self.deadline))
        answers = {bool(c.future.result()) for c in calls}
        if len(answers) != 1:
            raise RunAborted(f"{label}: the hospitals' MPC workers answered differently")
        ok = answers.pop()
        self.asked += 1
        log.info("%s: %s", label, "passes" if ok else "fails (the next candidate is checked)")
        return ok

    def summary(self) -> dict[str, object]:
        return {
            "m": self.m,
            "providers": len(self.links),
            "candidates_checked": self.checked,
            "candidates_rejected": self.rejected,
        }
