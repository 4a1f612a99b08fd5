"""Independent brute-force LKC-privacy checker for released tables.

This module deliberately does NOT import anything from the project (``common``, ``party``,
``leader``): it re-derives Definition 3.1 of Mohammed, Fung, Hung and Lee (TKDD 2010)
directly from a released CSV so that tests can judge the engine's output independently.

Definition 3.1 (LKC-privacy). A table T satisfies LKC-privacy iff for every qid -- a
combination of values on a subset of the QID attributes of size at most L --

1. |T[qid]| >= K, and
2. P(s | qid) = |T[qid and s]| / |T[qid]| <= C for every sensitive value s in S.

Only qids that occur in T matter: a qid matching no record is not linkable (|T[qid]| = 0
would otherwise make every table fail). The checker therefore enumerates every QID subset of
size 1..min(L, |QID|) (``itertools.combinations``), groups the released rows by their values
on the subset, and checks every non-empty group.

Released values are compared as *labels* (strings): a generalized value such as
``Professional`` or ``[30-60)`` is one value, and a raw value such as ``34`` is just a very
specific label. This is exact for single-dimensional (cut-based) generalization, where the
labels used for one attribute are pairwise disjoint nodes of its taxonomy.

The confidence bound is checked per sensitive value (``P(s|qid) <= C`` for *each* s in S),
not for the sum over S, exactly as in the definition. The comparison ``count_s / count > C``
is done in exact integer arithmetic (C is turned into a fraction, see ``_as_fraction``), so
0.2 means exactly 1/5 and a group with P = 1/5 satisfies C = 0.2.

Also reported: the number of equivalence groups on the full QID and the paper's
discernibility ratio DR = sum over full-QID groups |T[qid]|^2 / |T|^2 (Sec. 6.1).
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "CheckResult",
    "SpecParams",
    "Violation",
    "check_lkc",
    "check_lkc_frame",
    "check_released",
    "naive_check_lkc",
    "read_released",
    "spec_params",
]


@dataclass(frozen=True)
class Violation:
    """One group of the released table that breaks LKC-privacy."""

    kind: str  # "K": |T[qid]| < K;  "C": P(s|qid) > C
    subset: tuple[str, ...]  # the QID attributes the adversary knows
    values: tuple[str, ...]  # the group's (generalized) values on ``subset``
    count: int  # |T[qid]|
    sensitive_value: str | None  # the s with the largest confidence in the group (if any)
    sensitive_count: int  # |T[qid and s]|
    confidence: float  # P(s|qid)

    def __str__(self) -> str:
        qid = ", ".join(f"{a}={v}" for a, v in zip(self.subset, self.values, strict=True))
        conf = (
            f"P({self.sensitive_value}|qid) = {self.sensitive_count}/{self.count}"
            f" = {self.confidence:.4f}"
            if self.sensitive_value is not None
            else "no sensitive value"
        )
        return f"[{self.kind}] qid <{qid}>: |T[qid]| = {self.count}, {conf}"


@dataclass(frozen=True)
class CheckResult:
    """Outcome of an LKC-privacy check of a released table."""

    ok: bool
    n_rows: int
    L: int  # the effective L: min(L, |QID|)
    K: int
    C: float
    subsets_checked: int
    min_group_size: int  # over all groups of all checked subsets
    max_confidence: float  # max over groups and s in S of P(s|qid)
    n_violating_groups: int  # summed over all checked subsets
    first_violation: Violation | None
    n_equivalence_groups: int  # groups on the full QID
    discernibility_ratio: float  # DR = sum |T[qid]|^2 / |T|^2 over full-QID groups

    def __str__(self) -> str:
        head = "LKC-privacy holds" if self.ok else "LKC-privacy VIOLATED"
        lines = [
            f"{head} (L={self.L}, K={self.K}, C={self.C}) on {self.n_rows} rows:",
            f"  {self.subsets_checked} QID subsets checked,"
            f" min group size {self.min_group_size}, max confidence {self.max_confidence:.4f},",
            f"  {self.n_equivalence_groups} full-QID groups, DR = {self.discernibility_ratio:.6f}",
        ]
        if self.first_violation is not None:
            lines.append(
                f"  {self.n_violating_groups} violating groups; first: {self.first_violation}"
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class SpecParams:
    """What the checker needs from a run spec (``run.toml``)."""

    qids: list[str]
    sensitive_column: str
    sensitive_values: set[str]
    L: int
    K: int
    C: float


def spec_params(spec_toml: Path) -> SpecParams:
    """Read QIDs, sensitive column/values and L, K, C from a run spec with ``tomllib``."""
    with Path(spec_toml).open("rb") as fh:
        spec = tomllib.load(fh)
    privacy = spec["privacy"]
    attributes = spec["attribute"]
    qids = [a["name"] for a in attributes if a.get("role") == "qid"]
    sensitive = [a["name"] for a in attributes if a.get("role") == "sensitive"]
    if len(sensitive) != 1:
        raise ValueError(f"{spec_toml}: expected exactly one sensitive attribute, got {sensitive}")
    return SpecParams(
        qids=qids,
        sensitive_column=sensitive[0],
        sensitive_values={str(v) for v in privacy.get("sensitive_values", [])},
        L=int(privacy["L"]),
        K=int(privacy["K"]),
        C=float(privacy["C"]),
    )


def read_released(released_csv: Path) -> pd.DataFrame:
    """Read a released table: every cell a string label, nothing turned into NaN.

    ``.gz`` files are decompressed transparently.
    """
    return pd.read_csv(released_csv, dtype=str, keep_default_na=False, na_filter=False)


def check_released(spec_toml: Path, released_csv: Path, **kwargs: bool) -> CheckResult:
    """Check a released CSV against the LKC requirement stated in a run spec."""
    p = spec_params(spec_toml)
    return check_lkc(
        released_csv, p.qids, p.sensitive_column, p.sensitive_values, p.L, p.K, p.C, **kwargs
    )


def check_lkc(
    released_csv: Path,
    qids: list[str],
    sensitive_column: str,
    sensitive_values: set[str],
    L: int,
    K: int,
    C: float,
    *,
    only_max_size: bool = False,
) -> CheckResult:
    """Brute-force LKC-privacy check of a released CSV (see the module docstring)."""
    return check_lkc_frame(
        read_released(released_csv),
        qids,
        sensitive_column,
        sensitive_values,
        L,
        K,
        C,
        only_max_size=only_max_size,
    )


def _as_fraction(c: float) -> Fraction:
    """C as an exact fraction: the nearest one with denominator <= 10**9.

    So 0.2 is exactly 1/5 (not 0.2000000000000000111...) and 0.3333333333333333 is 1/3; any
    C written with at most 9 decimals is taken exactly. The denominator bound also keeps
    ``count * denominator`` within int64 for tables of up to ~9e9 rows.
    """
    return Fraction(repr(float(c))).limit_denominator(10**9)


def _subsets(qids: Sequence[str], L: int, only_max_size: bool) -> Iterable[tuple[int, ...]]:
    sizes = [L] if only_max_size else range(1, L + 1)
    for size in sizes:
        yield from itertools.combinations(range(len(qids)), size)


def _group_codes(codes: list[np.ndarray], cards: list[int], cols: tuple[int, ...]) -> np.ndarray:
    """Dense group ids (0..g-1, numbered in order of first appearance) for a column subset."""
    key = codes[cols[0]]
    bound = cards[cols[0]]
    for c in cols[1:]:
        if bound * cards[c] >= 2**62:  # re-densify before the mixed-radix key could overflow
            key, uniques = pd.factorize(key)
            bound = len(uniques)
        key = key * cards[c] + codes[c]
        bound *= cards[c]
    if len(cols) == 1:
        return key
    dense, _ = pd.factorize(key)
    return dense


def check_lkc_frame(
    table: pd.DataFrame,
    qids: list[str],
    sensitive_column: str,
    sensitive_values: set[str],
    L: int,
    K: int,
    C: float,
    *,
    only_max_size: bool = False,
) -> CheckResult:
    """As :func:`check_lkc`, on an already loaded table (all cells compared as strings).

    ``only_max_size=True`` checks only the subsets of size exactly min(L, |QID|). This gives
    the same ``ok``, ``min_group_size`` and ``max_confidence`` (only ``first_violation`` and
    ``n_violating_groups`` may differ). Proof: let Q' be a QID subset with |Q'| < L' where
    L' = min(L, |QID|), and pick any Q with Q' <= Q <= QID and |Q| = L' (it exists since
    L' <= |QID|). Every non-empty group T[q'] on Q' is the disjoint union of the non-empty
    groups T[q] on Q whose values agree with q' on Q'. Hence (1) |T[q']| = sum |T[q]| >=
    min |T[q]|, so the minimum group size over size-L' subsets is <= that over Q'; and (2) for
    each s, P(s|q') = sum |T[q and s]| / sum |T[q]| is a weighted mean of the P(s|q), so it
    is <= max P(s|q). Thus any K- or C-violation on a smaller subset implies one on a
    size-L' subset, and the extremes are attained at size L'. The default checks all sizes.
    """
    if not qids:
        raise ValueError("no QID attributes given")
    if len(set(qids)) != len(qids):
        raise ValueError(f"duplicate QID attributes: {qids}")
    missing = [c for c in [*qids, sensitive_column] if c not in table.columns]
    if missing:
        raise ValueError(f"released table lacks columns {missing}; has {list(table.columns)}")
    if L < 1 or K < 1 or not 0 < C <= 1:
        raise ValueError(f"invalid thresholds L={L}, K={K}, C={C}")
    n = len(table)
    if n == 0:
        raise ValueError("released table is empty")

    eff_L = min(L, len(qids))
    c_frac = _as_fraction(C)
    c_num, c_den = c_frac.numerator, c_frac.denominator

    # Factorize every QID column once: codes in order of first appearance.
    codes: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    for q in qids:
        col_codes, col_labels = pd.factorize(table[q].astype(str), sort=False)
        codes.append(col_codes.astype(np.int64))
        labels.append(np.asarray(col_labels, dtype=object))
    cards = [max(len(lab), 1) for lab in labels]

    sens_col = table[sensitive_column].astype(str).to_numpy()
    svals = sorted(str(s) for s in sensitive_values)
    indicators = [(s, sens_col == s) for s in svals]

    subsets_checked = 0
    min_group_size = n
    max_conf = 0.0
    n_violating = 0
    first: Violation | None = None

    for cols in _subsets(qids, eff_L, only_max_size):
        subsets_checked += 1
        gid = _group_codes(codes, cards, cols)
        sizes = np.bincount(gid)
        min_group_size = min(min_group_size, int(sizes.min()))
        bad = sizes < K
        # Largest sensitive count per group over s in S, and which s attains it.
        best_s_count = np.zeros_like(sizes)
        best_s_idx = np.full(len(sizes), -1, dtype=np.int64)
        for i, (_, is_s) in enumerate(indicators):
            s_count = np.bincount(gid[is_s], minlength=len(sizes))
            better = s_count > best_s_count
            best_s_count = np.where(better, s_count, best_s_count)
            best_s_idx = np.where(better, i, best_s_idx)
        if indicators:
            # P(s|qid) > C  <=>  s_count * den > num * size  (exact integers)
            c_bad = best_s_count * c_den > c_num * sizes
            bad |= c_bad
            max_conf = max(max_conf, float((best_s_count / sizes).max()))
        nbad = int(bad.sum())
        n_violating += nbad
        if nbad and first is None:
            g = int(np.flatnonzero(bad)[0])  # group ids follow first appearance in the table
            row = int(np.flatnonzero(gid == g)[0])
            values = tuple(str(labels[c][codes[c][row]]) for c in cols)
            si = int(best_s_idx[g])
            first = Violation(
                kind="K" if sizes[g] < K else "C",
                subset=tuple(qids[c] for c in cols),
                values=values,
                count=int(sizes[g]),
                sensitive_value=indicators[si][0] if si >= 0 else None,
                sensitive_count=int(best_s_count[g]),
                confidence=float(best_s_count[g] / sizes[g]),
            )

    full = _group_codes(codes, cards, tuple(range(len(qids))))
    full_sizes = np.bincount(full).astype(np.float64)
    dr = float((full_sizes**2).sum() / float(n) ** 2)

    return CheckResult(
        ok=first is None,
        n_rows=n,
        L=eff_L,
        K=K,
        C=C,
        subsets_checked=subsets_checked,
        min_group_size=min_group_size,
        max_confidence=max_conf,
        n_violating_groups=n_violating,
        first_violation=first,
        n_equivalence_groups=len(full_sizes),
        discernibility_ratio=dr,
    )


def naive_check_lkc(
    rows: Sequence[dict[str, str]],
    qids: list[str],
    sensitive_column: str,
    sensitive_values: set[str],
    L: int,
    K: int,
    C: float,
) -> tuple[bool, int, float]:
    """Slow pure-Python reference (dict counting): ``(ok, min_group_size, max_confidence)``.

    Used to cross-check :func:`check_lkc_frame` on small tables.
    """
    c_frac = _as_fraction(C)
    ok = True
    min_size = len(rows)
    max_conf = Fraction(0)
    for size in range(1, min(L, len(qids)) + 1):
        for subset in itertools.combinations(qids, size):
            counts: dict[tuple[str, ...], int] = {}
            s_counts: dict[tuple[tuple[str, ...], str], int] = {}
            for r in rows:
                key = tuple(r[a] for a in subset)
                counts[key] = counts.get(key, 0) + 1
                if r[sensitive_column] in sensitive_values:
                    sk = (key, r[sensitive_column])
                    s_counts[sk] = s_counts.get(sk, 0) + 1
            for key, cnt in counts.items():
                min_size = min(min_size, cnt)
                if cnt < K:
                    ok = False
                for s in sensitive_values:
                    conf = Fraction(s_counts.get((key, s), 0), cnt)
                    max_conf = max(max_conf, conf)
                    if conf > c_frac:
                        ok = False
    return ok, min_size, float(max_conf)


def check_m_private(
    table: pd.DataFrame,
    provider: str,
    m: int,
    qids: list[str],
    sensitive_column: str,
    sensitive_values: set[str],
    L: int,
    K: int,
    C: float,
) -> list[tuple[str, ...]]:
    """m-privacy (Goryczka, Xiong, Fung) by its definition: the coalitions of 1..m providers
    whose removal leaves rows that violate LKC-privacy (empty: the table is m-private).  A
    coalition holding every row leaves nothing to protect."""
    owners = table[provider].astype(str)
    names = sorted(set(owners))
    failing = []
    for j in range(1, min(m, len(names)) + 1):
        for coalition in itertools.combinations(names, j):
            rest = table[~owners.isin(coalition)]
            if rest.empty:
                continue
            res = check_lkc_frame(
                rest, qids, sensitive_column, sensitive_values, L, K, C, only_max_size=True
            )
            if not res.ok:
                failing.append(coalition)
    return failing
