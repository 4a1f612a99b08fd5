"""Several specializations in one round, where one per round would provably take them next.

The rule (README, "Several specializations in one round"): after Best, the next candidates
v1, v2, ... of the round's ranking are specialized in the same round while each v_j

* shares no alive partition with Best or an earlier v_i (the rounds skipped would neither
  check nor rescore it: LKC marks invalid only from the new partitions' counts, InfoGain
  scores a value once, when it enters the cut);
* beats, by the engine's sort key, the best key any child of Best or of an earlier v_i can
  get: InfoGain(c) <= H(T[c]), the class entropy of T[c] (a row of the parent's children x
  classes counts);
* and no child of Best or of an earlier v_i awaits a numeric SPLIT round.

Old candidates ranked below v_j stay below it (their scores do not change, invalidation only
removes some).  :func:`check_chain` re-checks every choice with the real scores afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from fedanon.arrays import IntArray
from fedanon.errors import InternalError
from fedanon.tds.measures import entropy_rows
from fedanon.tds.state import SharedState

Key = tuple[float, int, int, int]
KeyFn = Callable[..., Key]  # (attr, node[, score]) -> Key
Node = tuple[int, int]
SLACK = 1e-12  # a positive entropy bound is raised by this share before comparing


def rank_key(score: float, a: int, order: int, x: int) -> Key:
    """The engine's order of candidates: highest score, then attribute, then value order."""
    return (-score, a, order, x)


def child_bounds(
    st: SharedState, v: Node, class_counts: dict[Node, IntArray], key: KeyFn
) -> list[Key] | None:
    """The best key every child of v that can become a candidate may reach, or None when
    that cannot be bounded (a child awaits a numeric split, or no class counts)."""
    a, x = v
    tree = st.trees[a]
    kids = tree.children[x]
    if any(tree.needs_split(c) for c in kids):
        return None
    cc = class_counts.get(v)
    if cc is None or cc.shape[0] != len(kids):
        return None
    out = []
    for i, c in enumerate(kids):
        if tree.nchild[c] == 0:  # a leaf is never a candidate
            continue
        # the same float function InfoGain computes H(T[c]) with (IG(c) = H(T[c]) - x, x >= 0)
        ub = float(entropy_rows(np.ascontiguousarray(cc[i : i + 1]))[0])
        out.append(key(a, int(c), ub * (1 + SLACK) if ub > 0 else 0.0))
    return out


def chain_after(
    best: Node,
    ranking: Sequence[Node],
    st: SharedState,
    class_counts: dict[Node, IntArray],
    key: KeyFn,
) -> list[Node]:
    """Best, then the longest prefix of the rest of ``ranking`` (all valid candidates,
    best first) the rule allows, in order."""
    if not ranking or ranking[0] != best:
        raise InternalError("the ranking does not start with the best candidate")
    pv = st.pvals[st.alive_ids()]
    bounds = child_bounds(st, best, class_counts, key)
    if bounds is None:
        return [best]
    picked = [best]
    links = [pv[:, best[0]] == best[1]]
    for v in ranking[1:]:
        on = pv[:, v[0]] == v[1]
        if any(bool((on & link).any()) for link in links):
            break
        k = key(*v)
        if any(not k < b for b in bounds):
            break
        more = child_bounds(st, v, class_counts, key)
        if more is None:
            break
        picked.append(v)
        links.append(on)
        bounds += more
    return picked


def check_chain(
    chain: Sequence[Node],
    found: Sequence[set[Node]],
    st: SharedState,
    key: KeyFn,
) -> None:
    """After the statistics of a chained round: with the real scores, each chain[j] (j >= 1)
    beat every child of chain[0..j-1] still valid at that point and was itself valid --
    what one specialization per round would have decided.  ``found[i]``: the candidates
    found invalid in the state right after chain[i]."""
    seen: set[Node] = set()
    kids: list[Node] = []
    for j in range(1, len(chain)):
        seen |= found[j - 1]
        a, x = chain[j - 1]
        tree = st.trees[a]
        kids += [(a, int(c)) for c in tree.children[x] if tree.nchild[c] > 0]
        v = chain[j]
        if v in seen:
            raise InternalError(f"several specializations per round: {v} became invalid")
        kv = key(*v)
        for c in kids:
            if c not in seen and not kv < key(*c):
                raise InternalError(
                    f"several specializations per round: {c} would have come before {v}"
                )
