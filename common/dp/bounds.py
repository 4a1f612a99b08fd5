"""How large a DP release may grow: refused before anything that size is allocated.

DiffGen releases every group of the cross product of the cut, so each specialization
multiplies the groups linked to its value by its number of children: ``specializations =
30`` on Adult makes 26.5 million groups, 1000 would need terabytes.  The bound is on the rows
of the released count table (groups x class values), the same for every spec and every
hospital, and is checked

* when the run starts, from the spec alone (:func:`check_spec_size`: taxonomy and interval
  sizes, h): refused when even the smallest table h specializations can make is too large;
* before every specialization, by the leader (after picking it, before broadcasting it) and
  by each party (before it applies the leader's update): :func:`check_selection`.  The count
  is a function of the spec and the selections the leader broadcast, which every replica
  shares, never of one hospital's records, so a party's refusal tells the leader nothing
  about its data.

Memory: about 300 bytes per table row in one process (partitions, statistics, noise, the
writer: 2.3 GB for the 8.3 million rows of Adult at h = 24), less at a party.  The default
is fixed (not derived from the machine's free memory) so that the leader and every party
refuse the same runs.  ``--expand`` writes one row per counted record: the noisy total is
checked against its own bound (:func:`check_expanded`) before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedanon.errors import InputError
from fedanon.model.tree import AttrTree
from fedanon.tds.state import SharedState

MAX_TABLE_ROWS = 10_000_000  # rows of the count table (groups x class values)
MAX_EXPANDED_ROWS = 100_000_000  # rows of an --expand release (the noisy total)
TABLE_FLAG = "--max-table-rows"
EXPANDED_FLAG = "--max-expanded-rows"


@dataclass(frozen=True)
class BoundAdvice:
    """How a refusal of :func:`check_selection` reads: who holds the bound ("this run" in a
    centralized run, "the leader" in a federation), the flag that raises it (None where the
    command has none: ``federate`` and ``leader run`` keep the daemons' default) and the
    spec file."""

    who: str = "this run"
    flag: str | None = TABLE_FLAG
    source: str | None = None


CENTRALIZED = BoundAdvice()


def _gains(tree: AttrTree, h: int) -> list[int]:
    """What the possible specializations of ``tree`` can add to its cut, the (at most h)
    smallest first: one per split of a numeric interval (a bin range splits in two),
    children - 1 per taxonomy value (each internal value is specialized at most once)."""
    if tree.dynamic:
        return [1] * min(max(tree.n_leaves - 1, 0), h)
    kids = np.asarray(tree.nchild)
    return sorted(int(k) - 1 for k in kids[kids > 0])[:h]


def fewest_groups(trees: Sequence[AttrTree], h: int) -> int:
    """A lower bound on the groups of any run of ``h`` specializations: the run makes
    min(h, every possible specialization) of them (DiffGen stops only when none is left),
    and the cut of an attribute specialized k times holds at least 1 + its k smallest gains.
    The product of the cut sizes is the smallest over every split of the specializations
    among the attributes (exact dynamic programme on the logarithms)."""
    gains = [_gains(t, h) for t in trees]
    n = min(h, sum(len(g) for g in gains))
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    pick: list[list[int]] = []
    for g in gains:
        # k specializations of this attribute: log(1 + its k smallest gains)
        size = np.log1p(np.cumsum([0, *g[:n]], dtype=np.float64))
        ks = np.arange(size.size)
        j = np.arange(n + 1)[:, None] - ks[None, :]
        cand = np.where(j >= 0, best[np.clip(j, 0, n)] + size[None, :], np.inf)
        pick.append(cand.argmin(axis=1).tolist())
        best = cand.min(axis=1)
    # the exact product of the cut sizes the programme chose
    groups, left = 1, n
    for g, choice in zip(reversed(gains), reversed(pick), strict=True):
        used = choice[left]
        groups *= 1 + sum(g[:used])
        left -= used
    return groups


def _advice(flag: str | None) -> str:
    """What to lower: ``flag`` is the command's own bound flag, None where the command has
    none (``fedanon federate`` / ``leader run``: the daemons keep the default bound)."""
    if flag is None:
        return "a smaller h"
    return f"a smaller h (or {flag} N with the memory: ~300 bytes a row)"


def check_spec_size(
    trees: Sequence[AttrTree],
    h: int,
    n_class: int,
    limit: int,
    source: str,
    flag: str | None = TABLE_FLAG,
) -> None:
    """Refuse (exit 2) a spec whose every run makes a table of more than ``limit`` rows."""
    rows = fewest_groups(trees, h) * n_class
    if rows > limit:
        raise InputError(
            f"specializations = {h} makes at least {rows:,} rows (groups x {n_class} class "
            f"values), more than the {limit:,} a DP run may release",
            file=source,
            column="privacy.specializations",
            expected=_advice(flag),
        )


def groups_after(state: SharedState, attr: int, node: int) -> int | None:
    """The groups after specializing ``node`` of attribute ``attr`` (every child created);
    None when (attr, node) is no value of the state (its update is refused elsewhere)."""
    if not (0 <= attr < state.m and 0 <= node < len(state.trees[attr])):
        return None
    ids = state.alive_ids()
    linked = int(np.count_nonzero(state.pvals[ids, attr] == node))
    return int(ids.size) + linked * (int(state.trees[attr].nchild[node]) - 1)


def check_selection(
    state: SharedState,
    attr: int,
    node: int,
    limit: int,
    who: str = "this run",
    flag: str | None = TABLE_FLAG,
    source: str | None = None,
) -> None:
    """Refuse (exit 2) a specialization after which the table would exceed ``limit`` rows,
    before any of its partitions is allocated.  ``who`` holds the bound (this run, the
    leader, this party), ``flag`` raises it (None: the command has no such flag) and
    ``source`` is the spec file named in the message."""
    groups = groups_after(state, attr, node)
    if groups is None:
        return
    rows = groups * state.n_class
    if rows > limit:
        tree = state.trees[attr]
        raise InputError(
            f"specialization {state.round + 1} "
            f"({tree.name}: {tree.labels[node]}) would make {groups:,} groups x "
            f"{state.n_class} class values = {rows:,} rows, more than the {limit:,} "
            f"{who} allows: refused before allocating them",
            file=source,
            column="privacy.specializations",
            expected=_advice(flag),
        )


def check_expanded(noisy_total: int, limit: int) -> None:
    """Refuse (exit 2) an ``--expand`` release of more than ``limit`` rows."""
    if noisy_total > limit:
        raise InputError(
            f"--expand would write {noisy_total:,} rows (the noisy total), more than "
            f"{limit:,}: nothing written",
            expected=f"{EXPANDED_FLAG} N well above {noisy_total:,}: the noisy total is "
            "drawn anew on each run (a re-run writes another number of rows and spends "
            "epsilon again), a larger epsilon (less noise), or no --expand: the count table "
            "holds the same information",
        )


def positive_int(text: str) -> int:
    """An argparse type for the bounds: an integer >= 1."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


__all__ = [
    "CENTRALIZED",
    "EXPANDED_FLAG",
    "MAX_EXPANDED_ROWS",
    "MAX_TABLE_ROWS",
    "TABLE_FLAG",
    "BoundAdvice",
    "check_expanded",
    "check_selection",
    "check_spec_size",
    "fewest_groups",
    "groups_after",
    "positive_int",
]
