"""The names a spec may use: the registries of privacy models and utility scores.

Built-in names map to ``"module:Class"`` strings imported on first use; others are registered
from code or installed as entry points (:mod:`fedanon.plugins`).  The spec validates names,
parameters and ``needs_class`` here; the typed views are :mod:`fedanon.privacy.base` and
:mod:`fedanon.scores.base` (what plug-ins import) and :mod:`fedanon.tds.ports` (what the
engine builds a run from).  A factory's type is the engine's port, which this layer does not
know: it stays ``Any`` here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fedanon import plugins
from fedanon.model.params import LKCParams, ModelParams

Factory = Callable[..., Any]

MODEL_BUILTIN: dict[str, str] = {
    "lkc": "fedanon.privacy.lkc:LKCModel",
    "dp": "fedanon.dp.model:DiffGen",  # its own round loop: fedanon.dp (DiffGen)
}
SCORE_BUILTIN: dict[str, str] = {
    "infogain": "fedanon.scores.infogain:InfoGain",
    "discernibility": "fedanon.scores.discernibility:Discernibility",
    "max": "fedanon.scores.maxscore:Max",  # DiffGen's Max (also usable by an LKC run)
}
MODELS: plugins.Registry[Factory] = plugins.Registry(plugins.MODELS, "privacy model", MODEL_BUILTIN)
SCORES: plugins.Registry[Factory] = plugins.Registry(plugins.SCORES, "utility score", SCORE_BUILTIN)

model_names = MODELS.names
model_known = MODELS.knows
model_factory = MODELS.factory
model_implementation = MODELS.implementation  # what a run binds for a name not built in
score_names = SCORES.names
score_known = SCORES.knows
score_factory = SCORES.factory
score_implementation = SCORES.implementation


def params_class(name: str) -> type[ModelParams]:
    """The parameters class of model ``name`` (its ``params`` attribute; LKC's when absent)."""
    cls: type[ModelParams] = getattr(model_factory(name), "params", LKCParams)
    return cls


def score_needs_class(name: str) -> bool:
    """Whether the score ``name`` needs a class attribute in the spec."""
    return bool(score_factory(name)().needs_class)
