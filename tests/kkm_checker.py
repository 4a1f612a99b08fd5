"""Independent brute-force (k, k^m)-anonymity checker (shares no code with common/kkm).

Works on plain rows of strings: the released demographic cells and the released set cell of
every record.  For every record and every combination of its demographics with up to m of its
released generalized codes, it counts -- by scanning all records, no indexes -- the records
that could be that patient: same demographic cells and a set cell holding all those codes.
A generalized code ``(a b c)`` is one released item.

Also: ``covers`` checks that a release is truthful (each released value contains the original
one, each original code is inside one released item or was suppressed), and
``parse_cell`` splits a released set cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations


def parse_cell(cell: str, sep: str = "|") -> list[frozenset[str]]:
    """Released set cell -> its items, each the frozenset of codes it stands for."""
    items = []
    for part in cell.split(sep) if cell else []:
        part = part.strip()
        if part.startswith("(") and part.endswith(")"):
            items.append(frozenset(part[1:-1].split()))
        else:
            items.append(frozenset([part]))
    return items


def violations(
    demo: Sequence[Sequence[str]], sets: Sequence[str], k: int, m: int, sep: str = "|"
) -> list[tuple[int, tuple[str, ...], tuple[frozenset[str], ...], int]]:
    """Every (record, demographics, code combination, count) seen by fewer than k records.

    ``demo[i]`` = released demographic cells of record i, ``sets[i]`` = its released set cell.
    """
    items = [parse_cell(c, sep) for c in sets]
    bad = []
    n = len(sets)
    for i in range(n):
        mine = items[i]
        for size in range(0, min(m, len(mine)) + 1):
            for combo in combinations(mine, size):
                count = 0
                for j in range(n):
                    if tuple(demo[j]) != tuple(demo[i]):
                        continue
                    if all(x in items[j] for x in combo):
                        count += 1
                if count < k:
                    bad.append((i, tuple(demo[i]), combo, count))
    return bad


def is_kkm_anonymous(
    demo: Sequence[Sequence[str]], sets: Sequence[str], k: int, m: int, sep: str = "|"
) -> bool:
    return not violations(demo, sets, k, m, sep)


def numeric_contains(cell: str, value: float) -> bool:
    cell = cell.strip()
    if cell.startswith("[") and cell.endswith("]"):
        lo, hi = cell[1:-1].split(":")
        return float(lo) <= value <= float(hi)
    return float(cell) == value


def covers(original_codes: Sequence[str], released_cell: str, sep: str = "|") -> tuple[bool, int]:
    """Truthfulness of one released set cell: (ok, number of original codes suppressed).

    ok = every released item holds at least one of the record's original codes (nothing is
    invented) and every original code is in at most one item."""
    items = parse_cell(released_cell, sep)
    mine = set(original_codes)
    if any(not (it & mine) for it in items):
        return False, 0
    lost = 0
    for c in original_codes:
        holders = sum(1 for it in items if c in it)
        if holders > 1:
            return False, lost
        lost += holders == 0
    return True, lost
