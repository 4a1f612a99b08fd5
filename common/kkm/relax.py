"""The seed's Algorithm 2: progressive relaxation of Requirements 1 (delta) and 4 (epsilon).

When ArtUC cannot meet delta or epsilon_suppress, Algorithm 2 lets the data owner decide, as
the clusters are merged one by one, whether the current NCP and number of suppressed codes are
acceptable.  A command line has no owner to ask, so ``[relax]`` in the spec scripts one
(:class:`ThresholdOwner`):

* the NCP of the k-anonymous clusters (Step 3) is accepted up to ``max_delta``;
* a merge (Step 14) is accepted while the NCP stays within delta, or -- relaxing delta -- within
  ``max_delta`` as long as more than epsilon_suppress of the code entries are still suppressed
  (more NCP is only worth paying for fewer suppressions);
* the suppressions (Step 17) are accepted up to ``max_epsilon_suppress``.

Every question and answer is recorded; the report says which requirement was relaxed, to what.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fedanon.kkm.artuc import (
    Outcome,
    Problem,
    RequirementNotMet,
    all_suppressed,
    clusters_of,
)
from fedanon.kkm.merging import initial_state, merge_clusters


@dataclass
class ThresholdOwner:
    delta: float
    max_delta: float
    epsilon: float
    max_epsilon: float
    questions: list[dict[str, Any]] = field(default_factory=list)

    def initial_ncp_ok(self, ncp: float) -> bool:
        ok = ncp <= self.max_delta + 1e-12
        self.questions.append({"step": 3, "ncp": ncp, "accepted": ok})
        return ok

    def merge_ok(self, ncp: float, suppressed_share: float) -> bool:
        ok = ncp <= self.delta + 1e-12 or (
            ncp <= self.max_delta + 1e-12 and suppressed_share > self.epsilon
        )
        if not ok or ncp > self.delta + 1e-12:
            self.questions.append(
                {"step": 14, "ncp": ncp, "suppressed": suppressed_share, "accepted": ok}
            )
        return ok

    def suppression_ok(self, share: float) -> bool:
        ok = share <= self.max_epsilon + 1e-12
        self.questions.append({"step": 17, "suppressed": share, "accepted": ok})
        return ok


def run_relaxed(problem: Problem, owner: ThresholdOwner) -> Outcome:
    spec = problem.schema.spec
    cl, dropped = clusters_of(problem)
    all_suppressed(problem, dropped)
    st = initial_state(cl, problem.demo, problem.codes)  # Steps 1-2
    entries = max(1, problem.entries)
    ncp0 = problem.dataset_ncp(st.total_ncp, int(dropped.size))
    if not owner.initial_ncp_ok(ncp0):  # Steps 3-4
        raise RequirementNotMet(
            f"even the k-anonymous clusters have NCP {ncp0:.4f}, above [relax] max_delta = "
            f"{owner.max_delta} (Algorithm 2, Step 3)",
            column="relax.max_delta",
            expected=f"max_delta >= {ncp0:.4f}",
        )
    full = sum(a.weight for a in problem.demo.attrs)
    n = problem.table.n

    def accept(total: float) -> bool:
        return owner.merge_ok((total + dropped.size * full) / n, st.total_lost / entries)

    merge_clusters(st, problem.codes, spec.tuning.neighbours, lambda _t: True, accept)
    st.finalize(problem.codes)
    share = st.total_lost / entries
    if not owner.suppression_ok(share):  # Steps 17-20
        raise RequirementNotMet(
            f"{share:.4f} of the code entries would be suppressed, above [relax] "
            f"max_epsilon_suppress = {owner.max_epsilon} (Algorithm 2, Step 20)",
            column="relax.max_epsilon_suppress",
            expected=f"max_epsilon_suppress >= {share:.4f}, or a larger max_delta",
        )
    out = Outcome(problem, cl, st, dropped)
    ncp = out.ncp
    relaxed: dict[str, Any] = {}
    if ncp > owner.delta + 1e-12:
        relaxed["delta"] = {"requested": owner.delta, "released": ncp, "limit": owner.max_delta}
    if share > owner.epsilon + 1e-12:
        relaxed["epsilon_suppress"] = {
            "requested": owner.epsilon,
            "released": share,
            "limit": owner.max_epsilon,
        }
    out.stats.update(
        algorithm="ArtUC with progressive relaxation (Algorithm 2)",
        initial_clusters=cl.n,
        initial_ncp=ncp0,
        merges=st.merges,
        gendiag_runs=problem.codes.calls,
        gendiag_warm_runs=problem.codes.warm_calls,
        relaxed=relaxed,
        owner_questions=owner.questions,
    )
    return out
