"""ArtUC Steps 18-22 (and Algorithm 2's Steps 7-21): merge clusters by UL.

Repeatedly the live cluster with the least UL (GenDiag on its codes) is taken; among its
candidate partners the one whose union has the least UL is chosen, provided the release's
NCP stays within the budget and the union's UL is not above the two clusters' UL together
(a merge that raises UL works against Requirement 2; the seed's example merges C1 and C2,
whose union has UL 1.03 < 0.40 + 1.86); without such a partner the cluster is not selected
again.

Candidates (the seed searches every cluster: quadratic, and each candidate costs a GenDiag
run) are the ``neighbours`` nearest live clusters on each side along the Z-order of the
clusters of the same group -- clusters of different groups (utility constraints) are never
merged, which the seed's Definition 9 requires.  GenDiag results of clusters and of
evaluated unions are cached, so a union is evaluated once while both clusters live.  The UL of
a candidate union (Steps 19-20) is GenDiag warm-started from the larger cluster's result
(``gendiag_extend``: only itemsets of the smaller cluster can be rare in the union), an upper
estimate that costs O(smaller cluster) instead of a fresh run over the union; Step 25 then runs
GenDiag afresh on every merged cluster (``State.finalize``).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from fedanon.arrays import Int32Array
from fedanon.kkm.demo import Demographics
from fedanon.kkm.formation import Clusters
from fedanon.kkm.gendiag import GenResult, gendiag, gendiag_extend


class _Rows(Sequence[tuple[int, ...]]):
    """The codes of some records, looked up on access (no copy of a large cluster)."""

    def __init__(self, recs: list[tuple[int, ...]], members: Sequence[int]) -> None:
        self.recs = recs
        self.members = members

    def __len__(self) -> int:
        return len(self.members)

    @overload
    def __getitem__(self, i: int) -> tuple[int, ...]: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[int, ...]]: ...

    def __getitem__(self, i: int | slice) -> tuple[int, ...] | Sequence[tuple[int, ...]]:
        if isinstance(i, slice):
            return [self.recs[r] for r in self.members[i]]
        return self.recs[self.members[i]]


@dataclass
class Codes:
    """What GenDiag needs about the codes."""

    recs: list[tuple[int, ...]]  # per record: its leaf codes
    code_class: Int32Array
    k: int
    m: int
    calls: int = 0
    warm_calls: int = 0

    def run(self, members: Sequence[int]) -> GenResult:
        self.calls += 1
        return gendiag([self.recs[r] for r in members], self.k, self.m, self.code_class)

    def extend(self, base: Sequence[int], start: GenResult, extra: Sequence[int]) -> GenResult:
        self.warm_calls += 1
        recs = self.recs
        return gendiag_extend(
            _Rows(recs, base),
            [recs[r] for r in extra],
            start,
            self.k,
            self.m,
            self.code_class,
        )


@dataclass
class State:
    """Live clusters: members, bounds, NCP, GenDiag result, neighbours along the Z-order."""

    demo: Demographics
    members: list[list[int]]
    group: list[int]
    lo: list[list[int]]  # per attribute, per cluster id
    hi: list[list[int]]
    ncp: list[float]  # NCP of the cluster (sum over its records)
    gen: list[GenResult]
    prev: list[int]
    next: list[int]
    alive: list[bool]
    total_ncp: float
    total_s: int
    total_lost: int
    n_initial: int
    merges: int = 0
    cache: dict[tuple[int, int], GenResult] = field(default_factory=dict)
    cache_keys: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    def live(self) -> list[int]:
        return [c for c, a in enumerate(self.alive) if a]

    def union_ncp(self, c: int, d: int) -> float:
        lo = [np.array([min(x[c], x[d])]) for x in self.lo]
        hi = [np.array([max(x[c], x[d])]) for x in self.hi]
        per = float(self.demo.record_ncp(lo, hi)[0])
        return per * (len(self.members[c]) + len(self.members[d]))

    def neighbours(self, c: int, p: int) -> list[int]:
        out = []
        x = c
        for _ in range(p):
            x = self.prev[x]
            if x < 0:
                break
            out.append(x)
        x = c
        for _ in range(p):
            x = self.next[x]
            if x < 0:
                break
            out.append(x)
        return out

    def order_pair(self, c: int, d: int) -> tuple[int, int]:
        """(larger, smaller) cluster: a union's records are the larger cluster's, then the
        smaller's (GenDiag results keep per-record data in that order)."""
        return (c, d) if len(self.members[c]) >= len(self.members[d]) else (d, c)

    def evaluate(self, c: int, d: int, codes: Codes) -> GenResult:
        key = (c, d) if c < d else (d, c)
        res = self.cache.get(key)
        if res is None:
            big, small = self.order_pair(c, d)
            res = codes.extend(self.members[big], self.gen[big], self.members[small])
            self.cache[key] = res
            self.cache_keys.setdefault(c, []).append(key)
            self.cache_keys.setdefault(d, []).append(key)
        return res

    def merge(self, c: int, d: int, res: GenResult, ncp: float) -> int:
        """Replace c and d by their union (a new id at c's place in the Z-order)."""
        e = len(self.members)
        big, small = self.order_pair(c, d)  # the record order of the evaluated union
        self.members.append(self.members[big] + self.members[small])
        self.group.append(self.group[c])
        for x in self.lo:
            x.append(min(x[c], x[d]))
        for x in self.hi:
            x.append(max(x[c], x[d]))
        self.total_ncp += ncp - self.ncp[c] - self.ncp[d]
        self.total_s += res.s - self.gen[c].s - self.gen[d].s
        self.total_lost += res.lost - self.gen[c].lost - self.gen[d].lost
        self.ncp.append(ncp)
        self.gen.append(res)
        self.alive.append(True)
        self.prev.append(-1)
        self.next.append(-1)
        self._unlink(d)
        p, n = self.prev[c], self.next[c]
        self.prev[e], self.next[e] = p, n
        if p >= 0:
            self.next[p] = e
        if n >= 0:
            self.prev[n] = e
        self.alive[c] = self.alive[d] = False
        self.members[c] = self.members[d] = []
        self.merges += 1
        for gone in (c, d):
            for key in self.cache_keys.pop(gone, []):
                self.cache.pop(key, None)
        return e

    def finalize(self, codes: Codes) -> None:
        """Step 25: GenDiag afresh on every cluster that merging created (its result so far
        is the warm-started estimate used to choose the merges)."""
        for c in self.live():
            if c < self.n_initial:
                continue
            old, new = self.gen[c], codes.run(self.members[c])
            self.gen[c] = new
            self.total_s += new.s - old.s
            self.total_lost += new.lost - old.lost

    def _unlink(self, d: int) -> None:
        p, n = self.prev[d], self.next[d]
        if p >= 0:
            self.next[p] = n
        if n >= 0:
            self.prev[n] = p


def initial_state(cl: Clusters, demo: Demographics, codes: Codes) -> State:
    """Cluster state after Step 17; GenDiag once per cluster (Step 19 needs every UL)."""
    members: list[list[int]] = [[] for _ in range(cl.n)]
    for r, c in enumerate(cl.label.tolist()):
        if c >= 0:
            members[c].append(r)
    per = demo.record_ncp(list(cl.lo), list(cl.hi))
    sizes = np.asarray([len(x) for x in members], dtype=np.float64)
    ncp = (per * sizes).tolist()
    gen = [codes.run(mm) for mm in members]
    prev = [-1] * cl.n
    nxt = [-1] * cl.n
    by_group: dict[int, list[int]] = {}
    for c in np.argsort(cl.order, kind="stable").tolist():
        by_group.setdefault(int(cl.group[c]), []).append(c)
    for chain in by_group.values():
        for a, b in itertools.pairwise(chain):
            nxt[a], prev[b] = b, a
    return State(
        demo,
        members,
        cl.group.tolist(),
        [x.tolist() for x in cl.lo],
        [x.tolist() for x in cl.hi],
        ncp,
        gen,
        prev,
        nxt,
        [True] * cl.n,
        float(sum(ncp)),
        int(sum(g.s for g in gen)),
        int(sum(g.lost for g in gen)),
        cl.n,
    )


def merge_clusters(
    st: State,
    codes: Codes,
    neighbours: int,
    admissible: Callable[[float], bool],
    accept: Callable[[float], bool] | None = None,
) -> bool:
    """The merge loop.  ``admissible(new_total_ncp)`` filters candidates (Algorithm 1: the
    delta budget); ``accept(new_total_ncp)`` is Algorithm 2's question to the data owner about
    the chosen merge -- a refusal ends the loop.  Returns False when a refusal ended it."""
    heap = [(g.ul, c) for c, g in enumerate(st.gen) if st.alive[c]]
    heapq.heapify(heap)
    while heap:
        _, c = heapq.heappop(heap)
        if not st.alive[c]:
            continue
        best: tuple[float, int, int, GenResult, float] | None = None
        for d in st.neighbours(c, neighbours):
            u_ncp = st.union_ncp(c, d)
            new_total = st.total_ncp - st.ncp[c] - st.ncp[d] + u_ncp
            if not admissible(new_total):
                continue
            res = st.evaluate(c, d, codes)
            if res.ul > st.gen[c].ul + st.gen[d].ul + 1e-9:
                continue  # the merge would not lower UL (Requirement 2)
            key = (res.ul, d)
            if best is None or key < best[:2]:
                best = (res.ul, d, 0, res, u_ncp)
        if best is None:
            continue  # no partner: c is not selected again (it may still be a partner)
        _, d, _, res, u_ncp = best
        if accept is not None and not accept(st.total_ncp - st.ncp[c] - st.ncp[d] + u_ncp):
            return False
        e = st.merge(c, d, res, u_ncp)
        heapq.heappush(heap, (res.ul, e))
    return True
