"""ArtUC (the seed's Algorithm 1): a (k, k^m)-anonymous release under utility constraints.

Phases: record grouping by utility constraint (Steps 1-2, ``constraints.group_records``),
cluster formation by NCP (Steps 3-16, ``formation``), cluster merging by UL subject to delta
(Steps 17-22, ``merging``), (k, k^m)-anonymization of every cluster with GenDiag, the CBA
adaptation (Steps 23-27, ``gendiag``).  A requirement that cannot be met raises
:class:`RequirementNotMet` (exit 2) saying which, by how much, and what to change.

Readings of the seed (its text is extracted from a PDF; where it is garbled or open, the
worked examples decide):

1. NCP (Def. 3, Example 3): numeric range length / domain length with the domain the data's
   min..max unless the spec declares one ((47-44)/(51-19) = 0.094; the text's "0.097" is a
   typo); categorical leaves under the node / all leaves; 0 for a single value or leaf.
2. Figure 4's Origin hierarchy lists Germany but the data has Italy; with Europe = {France,
   Greece, Italy, Spain, Portugal} and Africa = {Algeria, Nigeria, Ghana} (8 leaves) the
   Figure 3 release has NCP sum 4.271, the seed's 4.28 = 4 x 0.656 + 2 x 0.7 + 2 x 0.125 with
   record 6's 0.698 rounded to 0.7.
3. UL (Def. 5, Example 4): UL(u~) = 2^|u~| - 1 for a generalized code of >= 2 codes and 0 for a
   single code (the example's (2^0 - 1) = 0 and (2^2 - 1) = 3); sigma(r) = the number of codes
   in r's generalized codes; UL(record 6) = 3 / (2^3 - 1) = 0.43.  The seed's dataset total
   0.441 uses 3/4 for records 6 and 7, contradicting its own 0.43; we compute 0.361.  s(r) is a
   count of codes (record 5 has UL 1), so UL(r) can exceed 1.
4. Record grouping: a record belongs to the group of the constraint whose demographics contain
   its values; constraints' demographics are equal or disjoint in some attribute (Table 4).
   Groups smaller than k are suppressed (Step 2); suppressed records count NCP = sum of the
   weights (everything lost) in NCP(D), whose denominator is the input size.
5. Steps 13 and 20 search "the clusters": only clusters of the same group qualify, otherwise a
   merged cluster would break its utility constraint (Definition 9).
6. Step 19: "the cluster with minimum UL" uses UL summed over its records (Definition 6); a
   selected cluster without an admissible partner is not selected again ("until C does not
   change"); a merge whose union has a higher UL than the two clusters is not admissible (it
   works against Requirement 2; the seed's example merge lowers UL).  Partners are searched
   among Z-order neighbours, and a candidate union's UL is GenDiag warm-started from the
   larger cluster; GenDiag runs afresh on the final clusters (see ``merging``).
7. epsilon_suppress is a share of the input's code entries (record, code): at most that share
   may be suppressed.  The seed's epsilon is a count of codes compared with GenDiag's s (the
   codes of every suppressed element, summed over clusters), default 0.06 x |distinct codes|;
   that sum can exceed the number of distinct codes, so a share of it has no fixed scale,
   while a share of entries is what a study loses.  The report gives both numbers.
8. Table 4's u2 = {053.20, 053.70} is read as {053.20, 053.71} (Example 5 says 053.20 and
   053.71 lie in u2; 053.70 is not in the data).  GenDiag (Appendix A) suppresses an element
   from every record of the cluster ("from p, Q and all records of C'"), and its Step 9 "C" is
   read as C' (the cluster being anonymized).  Section 4.2's epsilon = 2 codes becomes
   epsilon_suppress = 0.1 of the 19 code entries in the test fixture (one entry is suppressed).
9. A released record lists each generalized code once; a generalized code of several codes is
   written ``(c1 c2 ...)`` (the seed's ``(c1, c2)`` without the comma, so CSV needs no quotes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedanon.arrays import IntArray
from fedanon.errors import PrivacyError
from fedanon.kkm.constraints import group_records
from fedanon.kkm.demo import Attr, Demographics, categorical_attr, numeric_attr
from fedanon.kkm.formation import Clusters, form_clusters
from fedanon.kkm.io import RTTable
from fedanon.kkm.merging import Codes, State, initial_state, merge_clusters
from fedanon.kkm.schema import KkmSchema


class RequirementNotMet(PrivacyError):
    """ArtUC stopped at Step 16 (NCP > delta) or Step 26 (too many suppressed codes)."""


@dataclass
class Problem:
    """An RT-dataset ready for ArtUC."""

    schema: KkmSchema
    table: RTTable
    demo: Demographics
    group: IntArray
    codes: Codes
    n_distinct: int

    @property
    def k(self) -> int:
        return self.schema.spec.privacy.k

    @property
    def entries(self) -> int:
        return int(self.table.codes.size)

    @property
    def max_suppressed(self) -> int:
        return int(self.schema.spec.privacy.epsilon_suppress * self.entries + 1e-9)

    def dataset_ncp(self, total: float, suppressed_records: int) -> float:
        full = sum(a.weight for a in self.demo.attrs)
        return (total + suppressed_records * full) / self.table.n


@dataclass
class Outcome:
    """The anonymized clusters and what it took."""

    problem: Problem
    clusters: Clusters
    state: State
    suppressed_records: IntArray
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ncp(self) -> float:
        return self.problem.dataset_ncp(self.state.total_ncp, int(self.suppressed_records.size))


def build_problem(schema: KkmSchema, table: RTTable) -> Problem:
    spec = schema.spec
    attrs: list[Attr] = []
    for a, w, vals, (lo, hi) in zip(
        spec.qids, spec.weights, table.qid, table.num_range, strict=True
    ):
        if a.type == "numeric":
            attrs.append(numeric_attr(a.name, w, vals, lo, hi))
        else:
            attrs.append(categorical_attr(a.name, w, vals, schema.trees[a.name]))
    demo = Demographics(tuple(attrs))
    cat = {a.name: schema.trees[a.name] for a in spec.qids if a.type == "categorical"}
    group = group_records(schema.constraints, spec.qids, table.qid, cat)
    if (group < 0).any():
        i = int(np.flatnonzero(group < 0)[0])
        raise table.error(
            i,
            "record lies outside the demographics of every utility constraint",
            expected=f"constraints in {schema.constraints.source} that cover every record",
        )
    flat, ip = table.codes.tolist(), table.indptr.tolist()
    recs = [tuple(flat[ip[i] : ip[i + 1]]) for i in range(table.n)]
    present = np.unique(table.codes)
    codes = Codes(
        recs,
        schema.constraints.code_class,
        spec.privacy.k,
        spec.privacy.m,
    )
    return Problem(schema, table, demo, group, codes, int(present.size))


def clusters_of(problem: Problem) -> tuple[Clusters, IntArray]:
    """Steps 1-15 and 17: the clusters, and the records suppressed with their group."""
    spec = problem.schema.spec
    cl = form_clusters(problem.demo, problem.group, problem.k, spec.tuning.window)
    return cl, np.flatnonzero(cl.label < 0)


def all_suppressed(problem: Problem, dropped: IntArray) -> None:
    """Refuse a run whose Step 2 suppressed every record (the table, or each utility
    constraint's demographics, holds fewer than k records): nothing would be released.
    Called before the NCP bound, so that such a run is neither blamed on delta (which every
    suppressed record pushes to its maximum) nor, with delta = 1, published empty."""
    n, k = problem.table.n, problem.k
    if n < k:
        raise RequirementNotMet(
            f"the table has {n} records, fewer than k = {k}: no record can share its "
            f"demographics and codes with {k} records, so every record would be suppressed",
            file=problem.table.source,
            column="privacy.k",
            expected=f"k <= {n}, or a table of at least {k} records",
        )
    if dropped.size == n:
        raise RequirementNotMet(
            f"every utility constraint's demographics hold fewer than k = {problem.k} of the "
            f"{problem.table.n} records (Step 2): all would be suppressed, nothing released",
            file=problem.table.source,
            column="privacy.k",
            expected="a smaller k, or utility constraints whose demographics hold k records",
        )


def run_artuc(problem: Problem) -> Outcome:
    spec = problem.schema.spec
    priv = spec.privacy
    t0 = time.perf_counter()
    cl, dropped = clusters_of(problem)
    all_suppressed(problem, dropped)  # also when delta = 1 admits the all-suppressed NCP
    t1 = time.perf_counter()
    st = initial_state(cl, problem.demo, problem.codes)
    ncp0 = problem.dataset_ncp(st.total_ncp, int(dropped.size))
    if ncp0 > priv.delta + 1e-12:  # Step 16
        raise RequirementNotMet(
            f"the NCP of the k-anonymous clusters is {ncp0:.4f}, above delta = {priv.delta} "
            "(Requirement 1, Step 16): no merging can lower it",
            column="privacy.delta",
            expected=f"delta >= {ncp0:.4f}, or a [relax] section (Algorithm 2)",
        )
    t2 = time.perf_counter()
    budget = priv.delta * problem.table.n - dropped.size * sum(a.weight for a in problem.demo.attrs)
    merge_clusters(st, problem.codes, spec.tuning.neighbours, lambda tot: tot <= budget + 1e-9)
    t3 = time.perf_counter()
    st.finalize(problem.codes)  # Step 25
    t4 = time.perf_counter()
    if st.total_lost > problem.max_suppressed:  # Step 26
        raise RequirementNotMet(
            f"{st.total_lost} of {problem.entries} code entries would be suppressed, above "
            f"epsilon_suppress = {priv.epsilon_suppress} (Requirement 4, Step 26)",
            column="privacy.epsilon_suppress",
            expected=f"epsilon_suppress >= {st.total_lost / max(1, problem.entries):.4f}, a "
            "larger delta (bigger clusters need less suppression), or a [relax] section",
        )
    out = Outcome(problem, cl, st, dropped)
    out.stats.update(
        algorithm="ArtUC (Algorithm 1)",
        initial_clusters=cl.n,
        initial_ncp=ncp0,
        merges=st.merges,
        gendiag_runs=problem.codes.calls,
        gendiag_warm_runs=problem.codes.warm_calls,
        seconds={
            "formation": t1 - t0,
            "initial_gendiag": t2 - t1,
            "merging": t3 - t2,
            "final_gendiag": t4 - t3,
        },
    )
    return out
