"""A privacy model from outside fedanon: k-anonymity on the whole QID, with its own
``[privacy]`` keys (only ``K``).  Used by the plug-in tests (registered from the test
module with ``register_model``) and installed as an entry point by test_plugin_install."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedanon.errors import PrivacyError, SpecError
from fedanon.privacy.base import GroupSummary
from fedanon.privacy.params import LKCTerms
from fedanon.tds.counts import CountsView


@dataclass(frozen=True)
class KAnonParams:
    """``[privacy] model = "kanon"`` takes K, and nothing else."""

    KEYS: ClassVar[Mapping[str, str]] = {"K": "int"}
    K: int

    def __post_init__(self) -> None:
        if isinstance(self.K, bool) or not isinstance(self.K, int) or self.K < 2:
            raise SpecError("K must be an integer >= 2", value=str(self.K), column="privacy.K")

    def canonical(self) -> dict[str, Any]:
        return {"K": self.K}

    def as_lkc(self, n_qids: int) -> LKCTerms:
        """k-anonymity is LKC with L = |QID| and C = 1 (no sensitive value bounded)."""
        return LKCTerms(L=n_qids, K=self.K, C=1.0)


class KAnonymity:
    """k-anonymity on the whole QID: every final partition holds 0 or at least K records.
    Partitions are exactly the full-QID groups, so a candidate is invalid when one of the
    children it would create on a new partition is non-empty and smaller than K."""

    name = "k-anonymity"
    width = 1  # records only: no sensitive bookkeeping
    params = KAnonParams

    def __init__(self, spec: Any) -> None:
        self.k = spec.privacy.params.K

    def check_root(self, totals: np.ndarray) -> None:
        if int(totals[0]) < self.k:
            raise PrivacyError(f"fewer than K = {self.k} records")

    def invalid(self, view: CountsView) -> list[tuple[int, int]]:
        out = set()
        for a in range(view.state.m):
            sel, block, _, counts = view.child_counts(a)
            n = counts[:, 0]
            bad = (n > 0) & (n < self.k)
            for node in np.unique(view.new_vals[sel[block[bad]], a]).tolist():
                out.add((a, int(node)))
        return sorted(out)

    def final_groups(self, vals: np.ndarray, totals: np.ndarray, active: set[int]) -> GroupSummary:
        n = totals[:, 0]
        return GroupSummary(int(n.min()), 0.0, int((n < self.k).sum()))

    def summary(self, groups: GroupSummary) -> dict[str, object]:
        return {"min_group_size": groups.min_group_size}


class Opaque(KAnonymity):
    """The same model without an LKC equivalent: policies refuse it, audits exit 2."""

    @dataclass(frozen=True)
    class Params(KAnonParams):
        def as_lkc(self, n_qids: int) -> None:  # type: ignore[override]
            return None

    params = Params
