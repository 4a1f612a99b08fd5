"""``[privacy] model = "dp"`` in the registry of privacy models (:mod:`fedanon.privacy.base`).

DiffGen is registered like any model: the spec reader parses its ``[privacy]`` keys through
its parameters class (:class:`fedanon.privacy.params.DiffGenParams`), the policy and the audit
read ``as_lkc`` (None: admitted only through ``max_epsilon``, not auditable on a table), and
``fedanon anonymize`` / :func:`fedanon.anonymize` dispatch on the name.

It is no :class:`fedanon.tds.ports.PrivacyModel`: DiffGen refuses no candidate on exact counts.
It runs the engine's round loop by composition (:mod:`fedanon.dp.decider`): the exponential
mechanism as the selector, noisy counts as the releaser, DiffGen's statistics layout at the
parties (:mod:`fedanon.dp.party`).  Handed to the deterministic
:class:`~fedanon.tds.decide.Decider` (or a record-releasing party), a DP spec is refused when
they are built (:func:`fedanon.tds.ports.make_model`), before any statistic is counted: it
never publishes an exact, non-private generalization.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedanon.model.params import DiffGenParams

if TYPE_CHECKING:
    from fedanon.model.spec import RunSpec

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

    def __init__(self, spec: RunSpec) -> None:
        self.source = spec.source
