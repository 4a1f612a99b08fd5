"""The interface of a privacy model, and the registry that selects one by name.

A privacy model decides which specializations are allowed, from the same global count
vectors the scores read (in the spirit of Flower's ``Strategy``: the round loop calls it, it
never sees a record).  Every party counts, per new partition and per child of each candidate
value, :attr:`PrivacyModel.width` cells: the number of records, then ``width - 1`` cells of
its own choosing -- one per sensitive value, which is the only per-record input a party
provides (its ``sens`` codes: 0 = not sensitive, j = the j-th sensitive value).

Adding a model: one module with a class implementing :class:`PrivacyModel` built from the
run spec, plus one line -- an entry in :data:`BUILTIN` (``"name": "module:Class"``),
``register_model("name", Class)`` from the caller's own code, or an entry point in group
``fedanon.models`` of an installed package (:mod:`fedanon.plugins`; what daemons use).  The
spec selects it with ``[privacy] model = "name"`` (default ``"lkc"``).  The class's ``params``
attribute is its parameters class (:mod:`fedanon.privacy.params`: the ``[privacy]`` keys it
takes; :class:`~fedanon.privacy.params.LKCParams` when absent), read back from
``spec.privacy.params``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from fedanon import plugins
from fedanon.arrays import IntArray
from fedanon.privacy.params import LKCParams, ModelParams

if TYPE_CHECKING:
    from fedanon.model.spec import RunSpec
    from fedanon.tds.counts import CountsView


@dataclass(frozen=True)
class GroupSummary:
    """The final partitions judged by the model (exact comparisons)."""

    min_group_size: int
    max_confidence: float  # the largest share of a sensitive value in a group (0: none)
    violating_groups: int


@runtime_checkable
class PrivacyModel(Protocol):
    """What the round loop needs from a privacy model."""

    name: str  # shown in messages ("LKC-privacy")
    width: int  # COUNTS cells per count: the records, then width - 1 sensitive values

    def check_root(self, totals: IntArray) -> None:
        """Round 0: ``totals`` (width,) of the whole table.  Raise PrivacyError when even the
        fully generalized table violates the model (or SpecError for an unusable spec)."""
        ...

    def invalid(self, view: CountsView) -> list[tuple[int, int]]:
        """The (attribute, value) candidates among the new partitions whose specialization
        would violate the model (they are never specialized)."""
        ...

    def final_groups(self, vals: IntArray, totals: IntArray, active: set[int]) -> GroupSummary:
        """Recount the final partitions (values ``vals`` (n, m), ``totals`` (n, width);
        ``active``: attributes no longer at their root): the final check before release."""
        ...

    def summary(self, groups: GroupSummary) -> dict[str, object]:
        """The model's part of the run report (inserted between ``groups`` and ``DR``)."""
        ...


ModelFactory = Callable[["RunSpec"], PrivacyModel]

BUILTIN: dict[str, str] = {
    "lkc": "fedanon.privacy.lkc:LKCModel",
    "dp": "fedanon.dp.model:DiffGen",  # its own round loop: fedanon.dp (DiffGen)
}
_REGISTRY: plugins.Registry[ModelFactory] = plugins.Registry(
    plugins.MODELS, "privacy model", BUILTIN
)
register_model = _REGISTRY.register  # [privacy] model = name selects factory(spec)
model_names = _REGISTRY.names
model_factory = _REGISTRY.factory
implementation = _REGISTRY.implementation  # what a run binds for a name not built in


def params_class(name: str) -> type[ModelParams]:
    """The parameters class of model ``name`` (its ``params`` attribute; LKC's when absent)."""
    cls: type[ModelParams] = getattr(model_factory(name), "params", LKCParams)
    return cls


def make_model(spec: RunSpec) -> PrivacyModel:
    return model_factory(spec.privacy.model)(spec)
