"""GenDiag: the seed's adaptation of CBA that makes one cluster k^m-anonymous (Appendix A).

Within a cluster every record carries the same generalized demographics, so (k, k^m)-anonymity
of the cluster is k^m-anonymity of its codes: every set of at most m (generalized) codes that
appears in some record of the cluster appears in at least k of them.

1. Q = the sets of <= m codes that appear in 1..k-1 records, most frequent first.
2. For each p in Q, while p appears in fewer than k records: generalize a code u of p with a
   code u' of the same utility constraint into the generalized code (u u') with the least
   UL = 2^|(u u')| - 1 (weight 1); if there is none, suppress the element of p that appears in
   the fewest records (from every record of the cluster) until p is frequent or gone.

Readings (the seed leaves these open): u' ranges over the codes present in the cluster (a
code absent from it adds UL without support); ties on UL are broken by the support p reaches
(capped at k), then by the depth of the lowest common ancestor of u and u' in the code
hierarchy (codes are generalized along the hierarchy), then by code order; Q's order is fixed
by the supports when Q is built; a generalization is applied to p, Q and every record.  A pair
counts as "found" (Step 7) only if generalizing could still make p frequent: when even all
codes of each element's constraint together appear with the rest of p in fewer than k
records, GenDiag suppresses at once instead of generalizing codes it would then suppress.

Representation: one Python int per generalized code as a bitset of the records holding it, so
the support of an itemset is the popcount of an AND; a union-find maps original codes to
their generalized code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]


@dataclass(frozen=True)
class GenResult:
    """The anonymized codes of one cluster."""

    tokens: tuple[tuple[int, ...], ...]  # generalized codes (sorted leaf codes), kept ones
    token_of: dict[int, int]  # original code -> index into tokens (absent = suppressed)
    suppressed: tuple[int, ...]  # original codes suppressed from the cluster
    s: int  # the seed's count: codes in every suppressed element, summed
    ul: float  # UL of the cluster: sum over its records (Definition 6)


class _Codes:
    """Generalized codes of one cluster under construction."""

    def __init__(self, recs: Sequence[Sequence[int]], anc: dict[int, tuple[int, ...]]) -> None:
        self.root: dict[int, int] = {}
        self.mask: dict[int, int] = {}
        self.members: dict[int, list[int]] = {}
        self.span: dict[int, tuple[int, int]] = {}
        self.anc = anc
        for i, r in enumerate(recs):
            bit = 1 << i
            for c in r:
                if c in self.mask:
                    self.mask[c] |= bit
                else:
                    self.mask[c] = bit
                    self.root[c] = c
                    self.members[c] = [c]
                    self.span[c] = (c, c)
        self.dead: set[int] = set()  # suppressed original codes

    def support(self, p: Sequence[int]) -> int:
        it = iter(p)
        acc = self.mask[next(it)]
        for t in it:
            acc &= self.mask[t]
        return acc.bit_count()

    def lca_depth(self, lo: int, hi: int) -> int:
        a, b = self.anc[lo], self.anc[hi]
        d = 0
        while d < len(a) and a[d] == b[d]:
            d += 1
        return d - 1

    def merge(self, u: int, v: int) -> None:
        moved = self.members.pop(v)
        for c in moved:
            self.root[c] = u
        self.mask[u] |= self.mask.pop(v)
        self.members[u].extend(moved)
        (a, b), (c, d) = self.span[u], self.span.pop(v)
        self.span[u] = (min(a, c), max(b, d))

    def suppress(self, e: int) -> int:
        self.dead.update(self.members[e])
        del self.mask[e]
        return len(self.members[e])


def gendiag(
    recs: Sequence[Sequence[int]],
    k: int,
    m: int,
    code_class: I32,
    anc: dict[int, tuple[int, ...]],
) -> GenResult:
    """Make the cluster ``recs`` (each a sequence of distinct leaf codes) k^m-anonymous.

    ``anc[c]`` is the ancestor row of leaf code ``c`` (``Tree.anc``), for the tie-break.
    """
    st = _Codes(recs, anc)
    s = 0
    if m > 0 and len(recs) >= k:
        counts: Counter[tuple[int, ...]] = Counter()
        for r in recs:
            for size in range(1, min(m, len(r)) + 1):
                counts.update(combinations(r, size))
        queue = sorted(((-n, p) for p, n in counts.items() if n < k))
        by_class: dict[int, list[int]] = {}
        for c in st.mask:
            by_class.setdefault(int(code_class[c]), []).append(c)
        root, dead, mask = st.root, st.dead, st.mask
        for _, p0 in queue:
            if not dead.isdisjoint(p0):
                continue
            if len(p0) == 1:
                p = [root[p0[0]]]
                sup = mask[p[0]].bit_count()
            else:
                p = sorted({root[c] for c in p0})
                sup = st.support(p)
            if sup >= k:
                continue
            while 0 < sup < k:
                pick = (
                    _best_pair(st, p, k, code_class, by_class)
                    if _reachable(st, p, k, code_class, by_class)
                    else None
                )
                if pick is not None:
                    u, v = pick
                    st.merge(u, v)
                    by_class[int(code_class[u])].remove(v)
                    p = sorted({u if t == v else t for t in p})
                    sup = st.support(p)
                    continue
                while p and 0 < sup < k:
                    e = min(p, key=lambda t: (st.mask[t].bit_count(), t))
                    s += st.suppress(e)
                    by_class[int(code_class[e])].remove(e)
                    p.remove(e)
                    sup = st.support(p) if p else len(recs)
    return _result(st, recs, s)


def _reachable(
    st: _Codes, p: list[int], k: int, code_class: I32, by_class: dict[int, list[int]]
) -> bool:
    """Can generalization alone make p frequent?  Upper bound: every element of p
    generalized with all codes of its constraint present in the cluster."""
    acc = -1
    for t in p:
        union = 0
        for v in by_class[int(code_class[t])]:
            union |= st.mask[v]
        acc &= union
    return acc.bit_count() >= k if acc >= 0 else True


def _best_pair(
    st: _Codes, p: list[int], k: int, code_class: I32, by_class: dict[int, list[int]]
) -> tuple[int, int] | None:
    best: tuple[int, int, int, int, int] | None = None
    pick: tuple[int, int] | None = None
    for u in p:
        rest = 0
        first = True
        for t in p:
            if t != u:
                rest = st.mask[t] if first else rest & st.mask[t]
                first = False
        mu, su = st.mask[u], len(st.members[u])
        lo_u, hi_u = st.span[u]
        for v in by_class[int(code_class[u])]:
            if v == u:
                continue
            size = su + len(st.members[v])
            if best is not None and size > best[0]:
                continue
            union = mu | st.mask[v]
            sup = min(k, (union & rest).bit_count() if not first else union.bit_count())
            lo_v, hi_v = st.span[v]
            depth = st.lca_depth(min(lo_u, lo_v), max(hi_u, hi_v))
            key = (size, -sup, -depth, min(u, v), max(u, v))
            if best is None or key < best:
                best, pick = key, (min(u, v), max(u, v))
    return pick


def _result(st: _Codes, recs: Sequence[Sequence[int]], s: int) -> GenResult:
    roots = sorted(r for r in st.mask)  # live generalized codes
    index = {r: i for i, r in enumerate(roots)}
    tokens = tuple(tuple(sorted(st.members[r])) for r in roots)
    token_of: dict[int, int] = {}
    suppressed: list[int] = []
    for c, root in st.root.items():
        if root in index:
            token_of[c] = index[root]
        else:
            suppressed.append(c)
    sizes = [len(t) for t in tokens]
    ul = 0.0
    for r in recs:
        toks = {token_of[c] for c in r if c in token_of}
        lost = len(r) - sum(1 for c in r if c in token_of)
        ul += record_ul([sizes[t] for t in toks]) + lost
    return GenResult(tokens, token_of, tuple(sorted(suppressed)), s, ul)


def record_ul(sizes: Sequence[int]) -> float:
    """UL(r) without suppression: sum of UL(u~) / (2^sigma(r) - 1), sigma(r) = sum of sizes;
    UL(u~) = 2^|u~| - 1 for a generalized code of >= 2 codes and 0 for a single code
    (Example 4: UL((494.1)) = 0, UL((458.1, 458.21)) = 3, UL(record 6) = 3/7)."""
    sigma = sum(sizes)
    if sigma == 0:
        return 0.0
    num = sum((1 << a) - 1 for a in sizes if a >= 2)
    return num / ((1 << sigma) - 1) if num else 0.0
