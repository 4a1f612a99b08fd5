"""The interface of a utility score, and the registry that selects one by name.

A score is consulted on both sides of the round loop, in the spirit of Flower's ``Strategy``:

* every party counts the statistics the score lays out (:attr:`UtilityScore.split_classes`,
  :meth:`UtilityScore.split_cells`, :attr:`UtilityScore.child_classes`) with the engine's
  vectorised counting (``fedanon.tds.stats``), so a score never touches a record;
* the leader turns the summed vectors into split points (:meth:`UtilityScore.best_split`) and
  into the score of every candidate (:meth:`UtilityScore.on_counts`,
  :meth:`UtilityScore.on_specialized`), kept in a :class:`ScoreBook`.

Adding a score: one module with a class implementing :class:`UtilityScore`, plus one line --
an entry in :data:`BUILTIN` (``"name": "module:Class"``), ``register_score("name", Class)``
from the caller's own code (a test, a notebook), or an entry point in group ``fedanon.scores``
of an installed package (:mod:`fedanon.plugins`; what daemons use).  The spec selects it with
``[utility] score = "name"``.
"""

from __future__ import annotations

from collections.abc import Callable

from fedanon.model.registry import SCORE_BUILTIN as BUILTIN
from fedanon.model.registry import SCORES as _REGISTRY
from fedanon.tds.ports import ScoreBook, ScoreFactory, UtilityScore, make_score

__all__ = [
    "BUILTIN",
    "ScoreBook",
    "ScoreFactory",
    "UtilityScore",
    "implementation",
    "make_score",
    "register_score",
    "score_factory",
    "score_names",
]

register_score: Callable[[str, ScoreFactory], None] = _REGISTRY.register  # score = name
score_names = _REGISTRY.names
score_factory: Callable[[str], ScoreFactory] = _REGISTRY.factory
implementation = _REGISTRY.implementation  # what a run binds for a name not built in
