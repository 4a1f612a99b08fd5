"""``[privacy] model = "dp"`` in the registry of privacy models (:mod:`fedanon.privacy.base`).

DiffGen is registered like any model: the spec reader parses its ``[privacy]`` keys through
its parameters class (:class:`fedanon.privacy.params.DiffGenParams`), the policy and the audit
read ``as_lkc`` (None: admitted only through ``max_epsilon``, not auditable on a table), and
``fedanon anonymize`` / :func:`fedanon.anonymize` dispatch on the name.

What it shares with the round loop is the statistics layout: a party counts one cell per
record and no sensitive value (:attr:`DiffGen.width` = 1), and the children x classes blocks of
its score ("max" or "infogain", :mod:`fedanon.scores`).  The decisions are not the
deterministic ones of :class:`~fedanon.privacy.base.PrivacyModel` (no candidate is ever
refused on its counts, the choice is randomized, the release is noisy counts): they are
:class:`fedanon.dp.decider.DPDecider`'s, which overrides the phases that would call them.  The
deterministic hooks therefore refuse to run -- a DP spec handed to the LKC
:class:`~fedanon.tds.decide.Decider` stops at round 0 instead of publishing an exact,
non-private generalization.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from fedanon.arrays import IntArray
from fedanon.errors import SpecError
from fedanon.model.params import DiffGenParams
from fedanon.privacy.base import GroupSummary

if TYPE_CHECKING:
    from fedanon.model.spec import RunSpec
    from fedanon.tds.counts import CountsView

MODEL = "dp"
SCORES = ("max", "infogain")  # the utility functions DiffGen samples with (fedanon.dp.utility)
NOT_AUDITABLE = (
    "a differential-privacy spec cannot be audited on a released table: epsilon-DP is a "
    "property of the randomized mechanism that produced the table, not of the table itself "
    "(any table is a possible output)"
)


class DiffGen:
    """The registry entry of ``model = "dp"`` (its parameters: :attr:`params`)."""

    name = "epsilon-differential privacy (DiffGen)"
    params = DiffGenParams
    default_score = "max"  # [utility] score when the spec names none (the seed's choice)
    width = 1  # the records; DiffGen has no sensitive values

    def __init__(self, spec: RunSpec) -> None:
        self.source = spec.source

    def _refuse(self) -> NoReturn:
        raise SpecError(
            "model = 'dp' is not run by the LKC round loop: DiffGen runs with fedanon.dp "
            "(`fedanon anonymize`, fedanon.anonymize, fedanon.dp.run)",
            file=self.source,
            value=MODEL,
        )

    def check_root(self, totals: IntArray) -> None:
        self._refuse()

    def invalid(self, view: CountsView) -> list[tuple[int, int]]:
        self._refuse()

    def final_groups(self, vals: IntArray, totals: IntArray, active: set[int]) -> GroupSummary:
        self._refuse()

    def summary(self, groups: GroupSummary) -> dict[str, object]:
        self._refuse()
