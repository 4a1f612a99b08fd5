"""An independent check of m-privacy on a table that carries its provider column
(``fedanon audit`` of a spec with ``[privacy] m > 0``).

By the definition (Goryczka, Xiong, Fung), by brute force: for every coalition S of at most
m providers, the records whose provider is not in S are audited for LKC-privacy by
:func:`fedanon.privacy.audit.audit_lkc` (S's rows get weight 0: they stand for no record).
Nothing of the engine's m-privacy search (:mod:`fedanon.privacy.mprivacy`: top-j counts,
candidate groups) is used, so a bug there cannot hide itself here.  A coalition that holds
every record leaves nothing to protect: it passes.

The provider column is never part of a release; the auditor joins it (a centralized release
keeps the input's row order), so the audit reads it as its input, not as a released column.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fedanon.logsafe import safe
from fedanon.model.params import LKCTerms
from fedanon.model.spec import RunSpec

MAX_COALITIONS = 100_000  # beyond this a brute-force audit is refused as unreasonable
NAME_CHARS = 60


@dataclass(frozen=True)
class CoalitionFailure:
    """A coalition whose removal leaves a table violating LKC-privacy."""

    providers: tuple[str, ...]
    records_left: int
    groups_below_k: int
    groups_above_c: int
    min_group_size: int
    max_confidence: float


@dataclass(frozen=True)
class MPrivacyAudit:
    m: int
    checked: bool  # False: the table has no provider column
    providers: int = 0
    coalitions_checked: int = 0
    failures: tuple[CoalitionFailure, ...] = ()  # at most ``limit``
    failing_coalitions: int = 0

    @property
    def ok(self) -> bool:
        return self.failing_coalitions == 0

    def lines(self) -> list[str]:
        if not self.checked:
            return [
                f"  m-privacy (m = {self.m}) NOT checked: the table has no provider column "
                "(join it to audit the coalitions)"
            ]
        head = "holds" if self.ok else "VIOLATED"
        out = [
            f"  m-privacy (m = {self.m}) {head}: {self.coalitions_checked} coalitions of at "
            f"most {self.m} of {self.providers} providers removed, the rest recounted"
        ]
        for f in self.failures:
            who = ", ".join(f"'{safe(p, NAME_CHARS)}'" for p in f.providers)
            out.append(
                f"    without {{{who}}}: {f.records_left} records, "
                f"{f.groups_below_k} groups below K (min size {f.min_group_size}), "
                f"{f.groups_above_c} above C (max confidence {f.max_confidence:.3f})"
            )
        return out


def audit_mprivacy(
    table: pd.DataFrame,
    provider: str,
    m: int,
    qids: Sequence[str],
    sensitive_column: str | None,
    sensitive_values: Sequence[str],
    L: int,
    K: int,
    C: float,
    *,
    recount: Callable[..., Any],
    limit: int = 10,
    weights: Any = None,
) -> MPrivacyAudit:
    """Remove every coalition of 1..m providers in turn and audit the rest with ``recount``
    (:func:`fedanon.privacy.audit.audit_lkc`; ``weights`` as there)."""
    from fedanon.errors import InputError

    owners = table[provider].astype(str).to_numpy()
    names = sorted(set(owners.tolist()))
    base = np.ones(len(table), dtype=np.int64) if weights is None else np.asarray(weights)
    sizes = [len(list(itertools.combinations(names, j))) for j in range(1, min(m, len(names)) + 1)]
    if sum(sizes) > MAX_COALITIONS:
        raise InputError(f"{sum(sizes)} coalitions are too many for a brute-force audit")
    checked, failing = 0, 0
    failures: list[CoalitionFailure] = []
    for j in range(1, min(m, len(names)) + 1):
        for coalition in itertools.combinations(names, j):
            checked += 1
            w = np.where(np.isin(owners, coalition), 0, base).astype(np.int64)
            left = int(w.sum())
            if left == 0:  # the coalition holds every record: nothing left to protect
                continue
            res = recount(
                table, qids, sensitive_column, sensitive_values, L, K, C, limit=1, weights=w
            )
            if res.ok:
                continue
            failing += 1
            if len(failures) < limit:
                failures.append(
                    CoalitionFailure(
                        coalition,
                        left,
                        res.groups_below_k,
                        res.groups_above_c,
                        res.min_group_size,
                        res.max_confidence,
                    )
                )
    return MPrivacyAudit(m, True, len(names), checked, tuple(failures), failing)


LKCArgs = tuple[list[str], str | None, tuple[str, ...], int, int, float]


def lkc_args(spec: RunSpec, terms: LKCTerms) -> LKCArgs:
    """What a spec's table is audited against, in the order
    :func:`fedanon.privacy.audit.audit_lkc` takes it after the table: the QID columns, the
    sensitive column, the sensitive values, L, K and C."""
    sens = spec.sensitive_attr
    return (
        [a.name for a in spec.qids],
        sens.name if sens is not None else None,
        terms.sensitive_values,
        terms.L,
        terms.K,
        terms.C,
    )


def audit_coalitions(
    table: pd.DataFrame,
    spec: RunSpec,
    terms: LKCTerms,
    *,
    recount: Callable[..., Any],
    limit: int = 10,
    weights: Any = None,
) -> MPrivacyAudit | None:
    """The m-privacy part of ``fedanon audit`` for a spec (None: m = 0); unchecked when the
    table has no provider column."""
    m, prov = spec.m, spec.provider_attr
    if m == 0:
        return None
    if prov is None or prov.name not in table.columns:
        return MPrivacyAudit(m, checked=False)
    return audit_mprivacy(
        table,
        prov.name,
        m,
        *lkc_args(spec, terms),
        recount=recount,
        limit=limit,
        weights=weights,
    )
