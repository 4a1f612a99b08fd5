"""m-privacy for LKC (Goryczka, Xiong, Fung, *m-Privacy for Collaborative Data Publishing*).

A release is m-private with respect to LKC-privacy when, for every coalition S of at most m
providers (hospitals), the records *not* contributed by S satisfy it: for every group g of
every QID subset of size L', the rest r = |g| - |g ∩ S| is 0 or at least K, and no sensitive
value s holds more than a share C of the rest (|g_s| - |g_s ∩ S| <= C * r).

Identity part: over coalitions of one size j the smallest rest is |g| - top_j(g) (the j
largest per-provider counts), so the test is ``|g| - top_j(g)`` in {0} or >= K for every
j = 0..m.  (Checking j = m alone is not enough: with counts A = 8, B = 3, K = 10, m = 2 the
top two leave 0 records, but {A} alone leaves B's 3.)  Confidence part: every coalition of
size 0..m, compared exactly in integers (C as a fraction, as :func:`fedanon.privacy.lkc.
violations`).  Both parts are monotone under specialization (a group that fails has a
sub-group that fails), so the search checks only the candidate the selector would take and
falls back to the next one (:class:`fedanon.tds.ports.CoalitionCheck`).

Only the groups a candidate (b, x) creates can change: on the QID subsets of size L' that
contain b, the groups whose b-value is a child of x.  They are made of the children of the
partitions on Link_x only, so a party counts, per partition on the link and child slot, its
records and sensitive values (:func:`cell_counts`); every party groups these cells the same
way from the shared state alone (:func:`group_index`).  Centralized runs split the counts by
the ``role = "provider"`` column (:class:`LocalCoalitionCheck`); federated runs keep each
hospital's counts secret (:mod:`fedanon.party.mpc`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations

import numpy as np

from fedanon.arrays import Codes, IntArray
from fedanon.errors import ProtocolError, SpecError
from fedanon.model.spec import RunSpec
from fedanon.privacy.lkc import composite_key, effective_subsets, stack_keys
from fedanon.tds.party import EngineParty
from fedanon.tds.ports import Candidate
from fedanon.tds.state import SharedState
from fedanon.tds.tips import Tips, child_slot_by_leaf

MAX_DENOMINATOR = 10**9


def link_of(state: SharedState, b: int, x: int) -> IntArray:
    """The alive partitions holding value x on attribute b (ascending)."""
    ids = state.alive_ids()
    return np.asarray(ids[state.pvals[ids, b] == x], dtype=np.int64)


def group_index(state: SharedState, b: int, x: int, l_eff: int) -> tuple[IntArray, int]:
    """The groups specializing (b, x) creates: per QID subset of size L' containing b (its
    other attributes among the active ones) and per cell (partition on the link, child slot;
    row-major), the group id in 0..G-1.  Returns ((n_subsets, n_cells) ids, G).  A function
    of the shared state only: every party numbers the groups alike."""
    tree = state.trees[b]
    link = link_of(state, b, x)
    k = int(tree.nchild[x])
    kids = np.asarray(tree.children[x], dtype=np.int64)
    vals = state.pvals[np.repeat(link, k)].astype(np.int64)
    child = np.tile(kids, link.size)
    subsets = effective_subsets(b, None, state.active - {b}, l_eff)
    keys = [
        composite_key(
            [vals[:, o] for o in others] + [child],
            [len(state.trees[o]) for o in others] + [len(tree)],
            child.size,
        )
        for others in subsets
    ]
    if not keys or child.size == 0:
        return np.zeros((0, child.size), dtype=np.int64), 0
    _, inv = np.unique(stack_keys(keys), return_inverse=True)
    inv = inv.reshape(len(subsets), child.size).astype(np.int64)
    return inv, int(inv.max()) + 1


def cell_counts(
    state: SharedState,
    tips: Tips,
    leaves: Codes,
    sens: Codes,
    b: int,
    x: int,
    owner: Codes | None = None,
    n_owners: int = 1,
) -> IntArray:
    """(n_owners, n_cells, width) counts of the rows on Link_x: per owner (``owner`` code per
    row; all rows owner 0 when None), partition on the link and child slot of x: the records,
    then one cell per sensitive value (``sens`` codes 1..width-1)."""
    link = link_of(state, b, x)
    k = int(state.trees[b].nchild[x])
    w = state.width
    n_cells = link.size * k
    out = np.zeros(n_owners * n_cells * w, dtype=np.int64)
    slot_of_leaf = child_slot_by_leaf(state, b, x)
    for rows, which in tips.pieces(link):
        slot = slot_of_leaf[np.asarray(leaves[b][rows], dtype=np.int64)]
        cell = np.asarray(which, dtype=np.int64) * k + slot
        if owner is not None:
            cell += np.asarray(owner[rows], dtype=np.int64) * n_cells
        out += np.bincount(cell * w, minlength=out.size)
        if w > 1:
            s = np.asarray(sens[rows], dtype=np.int64)
            hit = s > 0
            out += np.bincount(cell[hit] * w + s[hit], minlength=out.size)
    return out.reshape(n_owners, n_cells, w)


def group_counts(cells: IntArray, index: IntArray, n_groups: int) -> IntArray:
    """(n_owners, G, width): the cell counts summed into the groups of ``index``."""
    n_owners, _, w = cells.shape
    flat = index.reshape(-1)
    out = np.zeros((n_owners, n_groups, w), dtype=np.int64)
    if flat.size == 0:
        return out
    reps = index.shape[0]
    for p in range(n_owners):
        for j in range(w):
            weights = np.tile(cells[p, :, j], reps)
            out[p, :, j] = np.bincount(flat, weights=weights, minlength=n_groups).astype(np.int64)
    return out


@dataclass(frozen=True)
class CoalitionQuery:
    """The leader's question to every hospital in a federated m-private run: check number
    ``check`` (0, 1, ...: asked in this order), of ``candidate`` in the state after
    ``instructions`` applied Instructions.  ``candidate`` None: the fully generalized table
    (its one group), asked once, as check 0: before it no Instruction can specialize
    anything (a hospital admits only candidates that passed a check), so the table is the
    fully generalized one whatever Instructions came first."""

    check: int
    instructions: int
    candidate: Candidate | None

    def __post_init__(self) -> None:
        if self.candidate is None:
            if self.check:
                raise ProtocolError("the fully generalized table is checked first, only")
            return
        b, x = self.candidate
        if min(self.check, self.instructions, b, x) < 0:
            raise ProtocolError("a coalition check with a negative number or candidate")


def root_counts(party: EngineParty, owner: Codes | None = None, n_owners: int = 1) -> IntArray:
    """(n_owners, 1, width): the one group of the fully generalized table, per owner (all
    rows owner 0 when ``owner`` is None): its records, then one cell per sensitive value."""
    w = party.state.width
    o = np.zeros(party.table.n_rows, dtype=np.int64) if owner is None else np.asarray(owner)
    out = np.zeros((n_owners, 1, w), dtype=np.int64)
    out[:, 0, 0] = np.bincount(o, minlength=n_owners)
    if w > 1:
        s = np.asarray(party.table.sens, dtype=np.int64)
        hit = s > 0
        cells = np.bincount(o[hit] * w + s[hit], minlength=n_owners * w)
        out[:, 0, 1:] = cells.reshape(n_owners, w)[:, 1:]
    return out


def own_groups(spec: RunSpec, party: EngineParty, candidate: Candidate | None) -> IntArray:
    """(G, width): one hospital's records (then sensitive values) in each group specializing
    ``candidate`` creates, numbered as every hospital numbers them (:func:`group_index`);
    candidate None: the fully generalized table's one group."""
    if candidate is None:
        root: IntArray = root_counts(party)[0]
        return root
    b, x = candidate
    st = party.state
    if not (0 <= b < st.m and 0 <= x < len(st.trees[b]) and st.candidate_mask(b)[x]):
        raise ProtocolError(f"coalition check of ({b}, {x}): not a candidate of this state")
    index, n_groups = group_index(st, b, x, spec.effective_l)
    cells = cell_counts(st, party.tips, party.table.qid_leaves, party.table.sens, b, x)
    own: IntArray = group_counts(cells, index, n_groups)[0]
    return own


def coalitions(n_owners: int, m: int) -> Iterator[tuple[int, ...]]:
    """Every coalition of 0..m owners (the empty one: plain LKC on all records)."""
    for j in range(min(m, n_owners) + 1):
        yield from combinations(range(n_owners), j)


def violating_groups(groups: IntArray, m: int, k: int, c: float) -> IntArray:
    """Per group of ``groups`` (n_owners, G, width): whether some coalition of at most m
    owners leaves a rest that violates LKC (identity: 0 < rest < K; confidence: a sensitive
    value above C of the rest)."""
    n = groups[:, :, 0]
    total = n.sum(axis=0)
    ranked = -np.sort(-n, axis=0)  # per group, the largest owner's count first
    top = np.zeros_like(total)
    bad = np.zeros(total.shape, dtype=bool)
    for j in range(min(m, n.shape[0]) + 1):
        if j:
            top = top + ranked[j - 1]
        rest = total - top
        bad |= (rest > 0) & (rest < k)
    if groups.shape[2] > 1:
        frac = Fraction(repr(float(c))).limit_denominator(MAX_DENOMINATOR)
        all_s = groups[:, :, 1:].sum(axis=0)
        for s in coalitions(n.shape[0], m):
            idx = np.asarray(s, dtype=np.int64)
            rest_n = total - n[idx].sum(axis=0)
            rest_s = all_s - groups[idx, :, 1:].sum(axis=0)
            bad |= (rest_s * frac.denominator > frac.numerator * rest_n[:, None]).any(axis=1)
    return bad


def m_private(groups: IntArray, m: int, k: int, c: float) -> bool:
    return not bool(violating_groups(groups, m, k, c).any())


def provider_codes(spec: RunSpec, party: EngineParty) -> tuple[Codes, int]:
    """The provider code of every row and the number of providers (a centralized m-private
    run needs the ``role = "provider"`` column)."""
    col = party.table.provider
    if col is None:
        raise SpecError(
            f"[privacy] m = {spec.m} needs to know which hospital contributed each record: "
            'declare that column with role = "provider" (read, never released), or run the '
            "spec federated (each hospital is a provider)",
            file=spec.source,
            column="privacy.m",
        )
    return col.codes, max(1, len(col.values))


class LocalCoalitionCheck:
    """The :class:`~fedanon.tds.ports.CoalitionCheck` of a run on one machine: the party's
    rows split by their provider column."""

    def __init__(self, spec: RunSpec, party: EngineParty) -> None:
        self.m = spec.m
        self.k, self.c = spec.privacy.K, spec.privacy.C
        self.l_eff = spec.effective_l
        self.party = party
        self.owner, self.n_owners = provider_codes(spec, party)
        self.checked = 0
        self.rejected = 0

    def passes(self, candidate: Candidate) -> bool:
        b, x = candidate
        p = self.party
        st = p.state
        index, n_groups = group_index(st, b, x, self.l_eff)
        cells = cell_counts(
            st, p.tips, p.table.qid_leaves, p.table.sens, b, x, self.owner, self.n_owners
        )
        ok = m_private(group_counts(cells, index, n_groups), self.m, self.k, self.c)
        self.checked += 1
        self.rejected += not ok
        return ok

    def passes_root(self) -> bool:
        groups = root_counts(self.party, self.owner, self.n_owners)
        return m_private(groups, self.m, self.k, self.c)

    def summary(self) -> dict[str, object]:
        return {
            "m": self.m,
            "providers": self.n_owners,
            "candidates_checked": self.checked,
            "candidates_rejected": self.rejected,
        }


def local_check(spec: RunSpec, party: EngineParty) -> LocalCoalitionCheck | None:
    """The coalition check of a centralized run (None: m = 0, plain LKC)."""
    return LocalCoalitionCheck(spec, party) if spec.m > 0 else None
