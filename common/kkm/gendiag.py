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
(capped at k), then by the distance of u and u' in the hierarchy's order of the codes (codes
are generalized along the hierarchy: siblings first), then by code order; Q's order is fixed
by the supports when Q is built; a generalization is applied to p, Q and every record.  A pair
counts as "found" (Step 7) only if generalizing could still make p frequent: when even all
codes of each element's constraint together appear with the rest of p in fewer than k
records, GenDiag suppresses at once instead of generalizing codes it would then suppress.

Representation: one Python int per generalized code as a bitset of the records holding it, so
the support of an itemset is the popcount of an AND; a union-find maps original codes to
their generalized code.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

from fedanon.arrays import Int32Array


@dataclass(frozen=True)
class GenResult:
    """The anonymized codes of one cluster."""

    tokens: tuple[tuple[int, ...], ...]  # generalized codes (sorted leaf codes), kept ones
    token_of: dict[int, int]  # original code -> index into tokens (absent = suppressed)
    suppressed: tuple[int, ...]  # original codes suppressed from the cluster
    s: int  # the seed's count: codes in every suppressed element, summed
    ul: float  # UL of the cluster: sum over its records (Definition 6)
    lost: int  # code entries (record, code) suppressed
    # for warm starts, in the cluster's record order: records of every generalized code (by
    # its first code), and every record's UL and suppressed entries
    masks: dict[int, int] = field(default_factory=dict, repr=False, compare=False)
    rec_ul: list[float] = field(default_factory=list, repr=False, compare=False)
    rec_lost: list[int] = field(default_factory=list, repr=False, compare=False)


class _Codes:
    """Generalized codes of one cluster under construction.  A generalized code is named by
    its smallest (first in hierarchy order) leaf code; per constraint class the live ones are
    kept sorted, with a count of their sizes."""

    def __init__(
        self,
        recs: Sequence[Sequence[int]],
        code_class: Int32Array,
        start: GenResult | None = None,
        offset: int = 0,
    ) -> None:
        """``start``: generalized and suppressed codes (and their records' bits) to begin with
        -- a warm start; ``recs`` are then the records added after the first ``offset``."""
        self.root: dict[int, int] = {}
        self.mask: dict[int, int] = {}
        self.members: dict[int, list[int]] = {}
        self.size: dict[int, int] = {}
        self.class_union: dict[int, int] = {}
        self.dead: set[int] = set()  # suppressed original codes
        self.touched: set[int] = set()  # generalized codes merged or suppressed
        root, mask, members, dead = self.root, self.mask, self.members, self.dead
        if start is not None:
            dead.update(start.suppressed)
            for c in start.suppressed:
                root[c] = c
            mask.update(start.masks)
            for tok in start.tokens:
                members[tok[0]] = list(tok)
                for c in tok:
                    root[c] = tok[0]
        for i, r in enumerate(recs, offset):
            bit = 1 << i
            for c in r:
                if c in dead:
                    continue
                t = root.get(c)
                if t is None:
                    root[c] = c
                    members[c] = [c]
                    mask[c] = bit
                else:
                    mask[t] |= bit
        for t, mm in members.items():
            self.size[t] = len(mm)
        self.cls = {t: int(code_class[t]) for t in mask}
        self.order: dict[int, list[int]] = {}
        for t in sorted(mask):
            self.order.setdefault(self.cls[t], []).append(t)
        self.sizes: dict[int, Counter[int]] = {x: Counter() for x in self.order}
        for t in mask:
            self.sizes[self.cls[t]][self.size[t]] += 1

    def support(self, p: Sequence[int]) -> int:
        it = iter(p)
        acc = self.mask[next(it)]
        for t in it:
            acc &= self.mask[t]
        return acc.bit_count()

    def _drop(self, t: int) -> None:
        lst = self.order[self.cls[t]]
        del lst[bisect_left(lst, t)]

    def merge(self, u: int, v: int) -> int:
        """Merge v into u (u < v); returns u."""
        self.touched.update((u, v))
        moved = self.members.pop(v)
        for c in moved:
            self.root[c] = u
        self.mask[u] |= self.mask.pop(v)
        self.members[u].extend(moved)
        sizes = self.sizes[self.cls[u]]
        su, sv = self.size[u], self.size.pop(v)
        sizes[su] -= 1
        sizes[sv] -= 1
        sizes[su + sv] += 1
        self.size[u] = su + sv
        self._drop(v)
        return u

    def suppress(self, e: int) -> int:
        self.touched.add(e)
        cls = self.cls[e]
        self.dead.update(self.members[e])
        del self.mask[e]
        self.class_union.pop(cls, None)
        self._drop(e)
        size = self.size.pop(e)
        self.sizes[cls][size] -= 1
        return size


def gendiag(recs: Sequence[Sequence[int]], k: int, m: int, code_class: Int32Array) -> GenResult:
    """Make the cluster ``recs`` (each a sequence of distinct leaf codes in hierarchy
    pre-order numbering) k^m-anonymous; ``code_class`` maps a code to its constraint."""
    st = _Codes(recs, code_class)
    s = 0
    if m > 0 and len(recs) >= k:
        counts: Counter[tuple[int, ...]] = Counter()
        for r in recs:
            for size in range(1, min(m, len(r)) + 1):
                counts.update(combinations(r, size))
        s = _process(st, sorted((-n, p) for p, n in counts.items() if n < k), k, len(recs))
    return _result(st, recs, s)


def gendiag_extend(
    base: Sequence[Sequence[int]],
    extra: Sequence[Sequence[int]],
    start: GenResult,
    k: int,
    m: int,
    code_class: Int32Array,
) -> GenResult:
    """GenDiag on ``base + extra`` (in that record order) warm-started from ``start`` =
    the GenDiag result of ``base``.

    ``base`` is k^m-anonymous under ``start``: an itemset seen in ``base`` has support >= k
    there, so only itemsets that appear in ``extra`` can be rare in the union; they form Q.
    The result is k^m-anonymous (the same argument as GenDiag's) but keeps ``start``'s
    generalizations and suppressions, so its UL is an upper estimate of a fresh GenDiag run.
    Cost: O(extra + generalized codes + base records whose codes change), not O(base);
    ``base`` is only indexed for those records.
    """
    nb = len(base)
    if nb < k or not start.rec_ul:  # GenDiag(base) did nothing: start afresh
        return gendiag([*(base[i] for i in range(nb)), *extra], k, m, code_class)
    st = _Codes(extra, code_class, start, offset=nb)
    s = start.s
    if m > 0:
        seen: set[tuple[int, ...]] = set()
        for r in extra:
            toks = sorted({st.root[c] for c in r if c not in st.dead})
            for size in range(1, min(m, len(toks)) + 1):
                seen.update(combinations(toks, size))
        queue = []
        for p in seen:
            n = st.support(p)
            if n < k:
                queue.append((-n, p))
        queue.sort()
        s += _process(st, queue, k, nb + len(extra))
    tokens, token_of, suppressed, sizes = _tokens(st)
    rec_ul = [*start.rec_ul, *([0.0] * len(extra))]
    rec_lost = [*start.rec_lost, *([0] * len(extra))]
    ul, lost = start.ul, start.lost
    changed = 0
    for t in st.touched:
        changed |= start.masks.get(t, 0)
    rows = []
    while changed:
        low = changed & -changed
        rows.append(low.bit_length() - 1)
        changed ^= low
    for i in [*rows, *range(nb, nb + len(extra))]:
        r = base[i] if i < nb else extra[i - nb]
        r_ul, r_lost = _record(r, token_of, sizes)
        ul += r_ul - rec_ul[i]
        lost += r_lost - rec_lost[i]
        rec_ul[i], rec_lost[i] = r_ul, r_lost
    return GenResult(tokens, token_of, suppressed, s, ul, lost, dict(st.mask), rec_ul, rec_lost)


def _process(st: _Codes, queue: list[tuple[int, tuple[int, ...]]], k: int, n: int) -> int:
    """Steps 3-14 over Q (itemsets of codes, mapped to their current generalized codes)."""
    s = 0
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
        while 0 < sup < k:
            pick = _best_pair(st, p, k) if _reachable(st, p, k) else None
            if pick is not None:
                u, v = pick
                st.merge(u, v)
                p = sorted({u if t == v else t for t in p})
                sup = st.support(p)
                continue
            while p and 0 < sup < k:
                e = min(p, key=lambda t: (mask[t].bit_count(), t))
                s += st.suppress(e)
                p.remove(e)
                sup = st.support(p) if p else n
    return s


def _reachable(st: _Codes, p: list[int], k: int) -> bool:
    """Can generalization alone make p frequent?  Upper bound: every element of p
    generalized with all codes of its constraint present in the cluster."""
    acc = -1
    for t in p:
        cls = st.cls[t]
        union = st.class_union.get(cls)
        if union is None:
            union = 0
            for v in st.order[cls]:
                union |= st.mask[v]
            st.class_union[cls] = union
        acc &= union
    return acc.bit_count() >= k if acc >= 0 else True


def _best_pair(st: _Codes, p: list[int], k: int) -> tuple[int, int] | None:
    """Step 6: least UL (sizes), then the most support for p (capped at k), then the nearest
    code in hierarchy order (distance between first codes), then code order."""
    best: tuple[int, int, int, int, int] | None = None
    mask, size = st.mask, st.size
    for u in p:
        rest = -1
        for t in p:
            if t != u:
                rest &= mask[t]
        su = size[u]
        smin = _smallest_mate(st.sizes[st.cls[u]], su)
        if smin is None or (best is not None and su + smin > best[0]):
            continue
        lst = st.order[st.cls[u]]
        i = bisect_left(lst, u)
        mu = mask[u]
        # right side: distance grows with j, so the first candidate of the highest support wins
        r_sup, r_v = -1, -1
        for j in range(i + 1, len(lst)):
            v = lst[j]
            if size[v] != smin:
                continue
            sup = ((mu | mask[v]) & rest).bit_count()
            if sup > r_sup:
                r_sup, r_v = (k, v) if sup >= k else (sup, v)
                if sup >= k:
                    break
        l_sup, l_v = -1, -1
        for j in range(i - 1, -1, -1):  # left: distance grows as j falls
            v = lst[j]
            if r_sup == k and u - v > r_v - u:
                break  # cannot beat the right side's candidate any more
            if size[v] != smin:
                continue
            sup = ((mu | mask[v]) & rest).bit_count()
            if sup > l_sup:
                l_sup, l_v = (k, v) if sup >= k else (sup, v)
                if sup >= k:
                    break
        found: tuple[int, int, int] | None = None  # (-sup, distance, v)
        if r_v >= 0:
            found = (-r_sup, r_v - u, r_v)
        if l_v >= 0 and (found is None or (-l_sup, u - l_v, l_v) < found):
            found = (-l_sup, u - l_v, l_v)
        if found is None:
            continue
        v = found[2]
        key = (su + smin, found[0], found[1], min(u, v), max(u, v))
        if best is None or key < best:
            best = key
    return None if best is None else (best[3], best[4])


def _smallest_mate(sizes: Counter[int], own: int) -> int | None:
    """The smallest size of another live generalized code of the class."""
    for sz in sorted(sizes):
        if sizes[sz] - (1 if sz == own else 0) > 0:
            return sz
    return None


def _tokens(
    st: _Codes,
) -> tuple[tuple[tuple[int, ...], ...], dict[int, int], tuple[int, ...], list[int]]:
    roots = sorted(st.mask)  # live generalized codes
    index = {r: i for i, r in enumerate(roots)}
    tokens = tuple(tuple(sorted(st.members[r])) for r in roots)
    token_of: dict[int, int] = {}
    suppressed: list[int] = []
    for c, root in st.root.items():
        if root in index:
            token_of[c] = index[root]
        else:
            suppressed.append(c)
    return tokens, token_of, tuple(sorted(suppressed)), [len(t) for t in tokens]


def _record(r: Sequence[int], token_of: dict[int, int], sizes: list[int]) -> tuple[float, int]:
    """UL(r) and the number of r's codes suppressed."""
    toks = {token_of[c] for c in r if c in token_of}
    kept = sum(1 for c in r if c in token_of)
    return record_ul([sizes[t] for t in toks]) + (len(r) - kept), len(r) - kept


def _result(st: _Codes, recs: Sequence[Sequence[int]], s: int) -> GenResult:
    tokens, token_of, suppressed, sizes = _tokens(st)
    rec_ul: list[float] = []
    rec_lost: list[int] = []
    for r in recs:
        r_ul, r_lost = _record(r, token_of, sizes)
        rec_ul.append(r_ul)
        rec_lost.append(r_lost)
    return GenResult(
        tokens, token_of, suppressed, s, sum(rec_ul), sum(rec_lost), dict(st.mask), rec_ul, rec_lost
    )


def record_ul(sizes: Sequence[int]) -> float:
    """UL(r) without suppression: sum of UL(u~) / (2^sigma(r) - 1), sigma(r) = sum of sizes;
    UL(u~) = 2^|u~| - 1 for a generalized code of >= 2 codes and 0 for a single code
    (Example 4: UL((494.1)) = 0, UL((458.1, 458.21)) = 3, UL(record 6) = 3/7)."""
    sigma = sum(sizes)
    if sigma == 0:
        return 0.0
    num = sum((1 << a) - 1 for a in sizes if a >= 2)
    return num / ((1 << sigma) - 1) if num else 0.0
