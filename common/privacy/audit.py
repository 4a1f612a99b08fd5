"""An independent re-check of LKC-privacy on any released table (``fedanon audit``).

The released table is taken as text (:mod:`fedanon.privacy.released`): every cell is a label,
compared exactly as written, so ``34``, ``34.0`` and ``[30-60)`` are three different labels.
This works for fedanon's releases and for other tools' exports alike (ARX writes ``;``).
Besides the groups, the table's columns are checked against the spec
(:mod:`fedanon.privacy.columns`): an identifier or an undeclared column violates it too.
Labels and names are printed escaped like log lines (:func:`fedanon.logsafe.safe`).

Definition (Mohammed et al., TKDD 2010, Def. 3.1): a table satisfies LKC-privacy when, for
every combination ``qid`` of values on at most L of the QID attributes that occurs in the
table, the group T[qid] of records carrying it has at least K records and, for every listed
sensitive value s, the confidence P(s | qid) = |T[qid and s]| / |T[qid]| is at most C.

Only subsets of exactly L' = min(L, |QID|) attributes are grouped; the smaller ones are
implied.  Take a subset Q' with |Q'| < L' and any Q with Q' ⊂ Q ⊆ QID and |Q| = L'.  Every
group T[q'] on Q' is the disjoint union of the groups T[q] on Q whose values agree with q'
on Q' (grouping on more columns only splits groups).  Hence |T[q']| = Σ|T[q]| is at least the
smallest of them, and P(s | q') = Σ|T[q and s]| / Σ|T[q]| is a weighted mean of the P(s | q),
so at most the largest.  A group violating K or C on Q' therefore implies one on Q, and the
minimum group size and maximum confidence over all subsets of size <= L are attained at size
L'.  (This is plain counting on labels; it holds for any table, generalized or not.)

The counting here is deliberately separate from the engine's (``common/privacy/lkc.py``,
``stats.py``, ``decide.py``, ``state.py``): the released labels as pandas categoricals,
grouped per subset by ``numpy.unique`` over their codes (one integer per combination), with
no taxonomy, tree or partition of the engine involved, so a counting bug in the engine cannot
hide itself.  C is read as the nearest fraction with denominator at most 10^9 (0.2 is exactly
1/5, 0.3333333333333333 is 1/3) and compared in integers: P(s | qid) <= C holds at equality.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from fedanon.errors import DataError, InputError, SpecError
from fedanon.logsafe import safe
from fedanon.model.spec import RunSpec
from fedanon.privacy.columns import ColumnCheck, check_columns
from fedanon.privacy.maudit import MPrivacyAudit, audit_coalitions, lkc_args
from fedanon.privacy.released import (  # re-exported: the audit's readers
    PARQUET_MAGIC,
    read_release,
    read_released,
    released_frame,
)

__all__ = [
    "PARQUET_MAGIC",
    "AuditResult",
    "GroupViolation",
    "audit_lkc",
    "audit_table",
    "confidence_bound",
    "read_release",
    "read_released",
    "released_columns",
    "released_frame",
]

MAX_DENOMINATOR = 10**9
LABEL_CHARS = 120  # a label as shown in a printed line


@dataclass(frozen=True)
class GroupViolation:
    """One group of the released table that breaks the model (labels only, no record)."""

    kinds: tuple[str, ...]  # "K" (fewer than K records) and/or "C" (confidence above C)
    subset: tuple[str, ...]  # the QID attributes an adversary knows
    values: tuple[str, ...]  # the group's (generalized) labels on ``subset``
    size: int  # |T[qid]|
    sensitive_value: str | None  # the s with the highest confidence in the group
    sensitive_count: int  # |T[qid and s]|

    @property
    def confidence(self) -> float:
        return self.sensitive_count / self.size

    def describe(self) -> str:
        qid = ", ".join(
            f"{safe(a, LABEL_CHARS)}={safe(v, LABEL_CHARS)}"
            for a, v in zip(self.subset, self.values, strict=True)
        )
        text = f"{'+'.join(self.kinds):>3}  size {self.size:>6}  {{{qid}}}"
        if self.sensitive_value is not None:
            text += (
                f"  P({safe(self.sensitive_value, LABEL_CHARS)}) = "
                f"{self.sensitive_count}/{self.size}"
                f" = {self.confidence:.3f}"
            )
        return text


@dataclass(frozen=True)
class AuditResult:
    """Outcome of an LKC audit; ``violations`` holds the worst groups (smallest first, then
    highest confidence first), at most ``limit`` of each kind."""

    ok: bool
    records: int
    L: int  # as given
    K: int
    C: float
    qids: tuple[str, ...]
    subset_size: int  # min(L, |QID|)
    subsets_checked: int
    groups_checked: int
    min_group_size: int
    max_confidence: float
    groups_below_k: int
    groups_above_c: int
    violations: tuple[GroupViolation, ...]
    identifier_columns: tuple[str, ...] = ()  # released although declared identifier
    undeclared_columns: tuple[str, ...] = ()  # released although not in the spec
    withheld_columns: tuple[str, ...] = ()  # declared, never released (a provider column)
    mprivacy: MPrivacyAudit | None = None  # [privacy] m > 0: the coalitions (maudit)

    @property
    def columns(self) -> ColumnCheck:
        return ColumnCheck(self.identifier_columns, self.undeclared_columns, self.withheld_columns)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["violations"] = [{**asdict(v), "confidence": v.confidence} for v in self.violations]
        for key in ("withheld_columns", "mprivacy"):  # only when they say something
            if not out[key]:
                del out[key]
        return {"model": "lkc", **out}

    def summary(self) -> str:
        name = "LKC-privacy"
        if self.mprivacy is not None and self.mprivacy.checked:  # else its line says so
            name = f"m-private LKC-privacy (m = {self.mprivacy.m})"
        head = f"{name} holds" if self.ok else f"{name} VIOLATED"
        lines = [
            f"{head}: L={self.L} K={self.K} C={self.C} on {self.records} records",
            f"  {self.subsets_checked} QID subsets of size {self.subset_size} checked "
            f"(smaller subsets are implied), {self.groups_checked} groups",
            f"  min group size {self.min_group_size} (K = {self.K}), "
            f"max confidence {self.max_confidence:.4f} (C = {self.C})",
            *self.columns.lines(),
            *(self.mprivacy.lines() if self.mprivacy is not None else []),
        ]
        if self.groups_below_k or self.groups_above_c:
            lines.append(
                f"  violating groups: {self.groups_below_k} with fewer than K records, "
                f"{self.groups_above_c} with a confidence above C"
            )
            lines.append("  worst groups (QID labels of the group only; no record is shown):")
            lines.extend(f"    {v.describe()}" for v in self.violations)
        return "\n".join(lines)


def confidence_bound(c: float) -> Fraction:
    """C as an exact fraction (see the module docstring)."""
    return Fraction(repr(float(c))).limit_denominator(MAX_DENOMINATOR)


def audit_lkc(
    table: pd.DataFrame,
    qids: Sequence[str],
    sensitive_column: str | None,
    sensitive_values: Sequence[str],
    L: int,
    K: int,
    C: float,
    *,
    limit: int = 10,
    weights: Any = None,
    source: str | None = None,
) -> AuditResult:
    """Check LKC-privacy of ``table`` (cells compared as strings) by grouping every subset of
    min(L, |QID|) QID columns (see the module docstring).  ``weights`` (one non-negative
    integer per row): each row stands for that many identical records (a table aggregated by
    its distinct rows gives the result of the full table, faster).  ``source``: the file the
    table was read from, named in errors."""
    if not qids or len(set(qids)) != len(qids):
        raise InputError("the QID attributes must be a non-empty list without repeats")
    if L < 1 or K < 1 or not 0 < C <= 1:
        raise InputError(f"invalid thresholds L={L}, K={K}, C={C}")
    if sensitive_values and sensitive_column is None:
        raise InputError("sensitive values given without a sensitive column")
    needed = [*qids, *([sensitive_column] if sensitive_values and sensitive_column else [])]
    missing = [c for c in needed if c not in table.columns]
    if missing:
        raise DataError(
            "the released table lacks a column",
            file=source,
            column=missing[0],
            expected=f"columns named {', '.join(needed)}",
        )
    ones = np.ones(len(table), dtype=np.int64)
    w = ones if weights is None else np.asarray(weights, dtype=np.int64)
    if w.shape != ones.shape or (w < 0).any():
        raise InputError("weights: one non-negative integer per row")
    n = int(w.sum())
    if n == 0:
        raise DataError("the released table has no records")
    size = min(L, len(qids))
    bound = confidence_bound(C)
    num, den = bound.numerator, bound.denominator

    labels: list[pd.Categorical] = [pd.Categorical(table[q].astype(str)) for q in qids]
    codes = [np.asarray(c.codes, dtype=np.int64) for c in labels]
    svals = list(dict.fromkeys(str(s) for s in sensitive_values))
    counts = {"n": w}
    if svals:
        assert sensitive_column is not None
        sens = table[sensitive_column].astype(str).to_numpy()
        for i, s in enumerate(svals):
            counts[f"s{i}"] = (sens == s).astype(np.int64) * w
    mat = np.stack(list(counts.values()), axis=1)  # n, then one column per sensitive value
    cards = [max(1, len(c.categories)) for c in labels]

    min_size, best_conf = n, Fraction(0)
    n_subsets = n_groups = below_k = above_c = 0
    small: list[tuple[tuple[int, float], GroupViolation]] = []
    confident: list[tuple[tuple[float, int], GroupViolation]] = []
    for subset in itertools.combinations(range(len(qids)), size):
        keys, agg = _grouped([codes[i] for i in subset], [cards[i] for i in subset], mat)
        sizes = agg[:, 0]
        if svals:
            smat = agg[:, 1:]
            which = smat.argmax(axis=1)
            top = smat[np.arange(len(sizes)), which]
        else:
            which = np.full(len(sizes), -1)
            top = np.zeros(len(sizes), dtype=np.int64)
        bad_k = sizes < K
        bad_c = top * den > num * sizes  # P(s|qid) > C in integers
        n_subsets += 1
        n_groups += len(sizes)
        below_k += int(bad_k.sum())
        above_c += int(bad_c.sum())
        min_size = min(min_size, int(sizes.min()))
        conf = top / sizes
        g = int(np.argmax(conf))
        best_conf = max(best_conf, Fraction(int(top[g]), int(sizes[g])))
        if not (bad_k.any() or bad_c.any()):
            continue
        for g in _worst(sizes, -conf, bad_k, limit):
            v = _violation(g, subset, keys, qids, labels, sizes, top, which, svals, bad_k, bad_c)
            small.append(((v.size, -v.confidence), v))
        for g in _worst(-conf, sizes, bad_c, limit):
            v = _violation(g, subset, keys, qids, labels, sizes, top, which, svals, bad_k, bad_c)
            confident.append(((-v.confidence, v.size), v))
    worst: dict[tuple[tuple[str, ...], tuple[str, ...]], GroupViolation] = {}
    for _, v in sorted(small, key=lambda t: t[0])[:limit]:
        worst[(v.subset, v.values)] = v
    for _, v in sorted(confident, key=lambda t: t[0])[:limit]:
        worst.setdefault((v.subset, v.values), v)
    return AuditResult(
        ok=below_k == 0 and above_c == 0,
        records=n,
        L=L,
        K=K,
        C=float(C),
        qids=tuple(qids),
        subset_size=size,
        subsets_checked=n_subsets,
        groups_checked=n_groups,
        min_group_size=min_size,
        max_confidence=float(best_conf),
        groups_below_k=below_k,
        groups_above_c=above_c,
        violations=tuple(worst.values()),
    )


def _grouped(cols: list[Any], cards: list[int], mat: Any) -> tuple[Any, Any]:
    """The groups of rows with equal values in ``cols`` (category codes, ``cards`` of each):
    each group's codes (one row per group) and the column sums of ``mat`` over its rows;
    groups whose first column sums to 0 (rows of weight 0) are left out."""
    span = 1
    for card in cards:
        span *= card
    if span < 1 << 62:  # one integer per combination (mixed radix)
        key = np.zeros(len(mat), dtype=np.int64)
        for c, card in zip(cols, cards, strict=True):
            key = key * card + c
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    else:
        _, first, inv = np.unique(np.stack(cols, axis=1), axis=0, return_index=True,
                                  return_inverse=True)  # fmt: skip
    inv = inv.reshape(-1)
    sums = np.stack(
        [np.bincount(inv, weights=mat[:, j], minlength=len(first)) for j in range(mat.shape[1])],
        axis=1,
    )
    sums = np.rint(sums).astype(np.int64)
    keep = sums[:, 0] > 0  # a row of weight 0 stands for no record
    keys = np.stack([c[first] for c in cols], axis=1)
    return keys[keep], sums[keep]


def _worst(first: Any, then: Any, mask: Any, limit: int) -> list[int]:
    """Up to ``limit`` positions where ``mask`` holds, by ``first`` then ``then`` (lowest
    first)."""
    pos = np.flatnonzero(mask)
    return [int(p) for p in pos[np.lexsort((then[pos], first[pos]))][:limit]]


def _violation(
    g: int,
    subset: tuple[int, ...],
    index: Any,  # the codes of each group, one row per group
    qids: Sequence[str],
    labels: list[pd.Categorical],
    sizes: Any,
    top: Any,
    which: Any,
    svals: list[str],
    bad_k: Any,
    bad_c: Any,
) -> GroupViolation:
    kinds = tuple(k for k, bad in (("K", bad_k[g]), ("C", bad_c[g])) if bad)
    key = tuple(index[g])  # the group's category codes
    values = tuple(str(labels[i].categories[int(c)]) for i, c in zip(subset, key, strict=True))
    return GroupViolation(
        kinds=kinds,
        subset=tuple(qids[i] for i in subset),
        values=values,
        size=int(sizes[g]),
        sensitive_value=svals[int(which[g])] if svals else None,
        sensitive_count=int(top[g]),
    )


def released_columns(spec: RunSpec) -> list[str]:
    """The columns an LKC audit reads: the QIDs and, when values are listed, the sensitive one."""
    sens = spec.sensitive_attr
    extra = [sens.name] if sens is not None and spec.privacy.sensitive_values else []
    prov = [spec.provider_attr.name] if spec.provider_attr is not None else []
    return [*(a.name for a in spec.qids), *extra, *prov]


def audit_table(
    table: pd.DataFrame,
    spec: RunSpec,
    *,
    limit: int = 10,
    header: Sequence[str] | None = None,
    source: str | None = None,
    sep: str | None = None,
    weights: Any = None,
) -> AuditResult:
    """:func:`audit_lkc` (``weights``: see there) with the QIDs, sensitive values and L, K, C
    of a run spec -- for a model other than LKC, the LKC-privacy it amounts to exactly
    (k-anonymity: L = |QID|, C = 1); a model stating none cannot be audited on a table
    (SpecError, exit 2).  The released table's ``header`` (``table``'s columns when None) is
    held to the column rule (:func:`fedanon.privacy.columns.check_columns`): DataError for a
    missing or repeated column, a violation for an identifier or undeclared one."""
    p = spec.privacy
    terms = p.as_lkc(len(spec.qids))
    if terms is None:
        raise SpecError(
            f"privacy model {p.model!r} cannot be audited on a table: it states no "
            "LKC-privacy it amounts to, and the audit recounts LKC-privacy only (no check is "
            "better than a check of something else)",
            file=spec.source,
            value=p.model,
            expected="an LKC spec, a model with an LKC equivalent, or model = 'kkm'",
        )
    prov = spec.provider_attr.name if spec.provider_attr is not None else None
    m = spec.m
    cols = check_columns(
        [str(c) for c in table.columns] if header is None else header,
        [a.name for a in spec.released_attrs],
        [a.name for a in spec.attributes if a.role == "identifier"],
        # m > 0: the provider column is the audit's input (joined by the auditor); else a
        # release carrying it is a violation (it tells whose records they are)
        optional=[prov] if prov is not None and m > 0 else [],
        withheld=[prov] if prov is not None and m == 0 else [],
        source=source,
        sep=sep,
    )
    maudit = audit_coalitions(table, spec, terms, recount=audit_lkc, limit=limit, weights=weights)
    res = audit_lkc(table, *lkc_args(spec, terms), limit=limit, weights=weights, source=source)
    return replace(
        res,
        ok=res.ok and cols.ok and (maudit is None or maudit.ok),
        identifier_columns=cols.identifiers,
        undeclared_columns=cols.undeclared,
        withheld_columns=cols.withheld,
        mprivacy=maudit,
    )
