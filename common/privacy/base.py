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

from fedanon.model.registry import MODEL_BUILTIN as BUILTIN
from fedanon.model.registry import MODELS as _REGISTRY
from fedanon.model.registry import params_class
from fedanon.tds.ports import GroupSummary, ModelFactory, PrivacyModel, make_model

__all__ = [
    "BUILTIN",
    "GroupSummary",
    "ModelFactory",
    "PrivacyModel",
    "implementation",
    "make_model",
    "model_factory",
    "model_names",
    "params_class",
    "register_model",
]

register_model: Callable[[str, ModelFactory], None] = _REGISTRY.register  # model = name
model_names = _REGISTRY.names
model_factory: Callable[[str], ModelFactory] = _REGISTRY.factory
implementation = _REGISTRY.implementation  # what a run binds for a name not built in
