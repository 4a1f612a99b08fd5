"""The parameters classes of privacy models, where plug-ins import them from (defined in
:mod:`fedanon.model.params`, the spec's layer, which validates ``[privacy]`` against them)."""

from fedanon.model.params import (
    MAX_DENOMINATOR,
    MAX_EPSILON,
    MAX_SPECIALIZATIONS,
    NOISE_BUDGETS,
    DiffGenParams,
    LKCParams,
    LKCTerms,
    ModelParams,
    exact_epsilon,
)

__all__ = [
    "MAX_DENOMINATOR",
    "MAX_EPSILON",
    "MAX_SPECIALIZATIONS",
    "NOISE_BUDGETS",
    "DiffGenParams",
    "LKCParams",
    "LKCTerms",
    "ModelParams",
    "exact_epsilon",
]
