"""The parameters of a privacy model: the ``[privacy]`` keys it takes, validated.

Every model declares its own parameters class (the ``params`` attribute of the model class;
:class:`LKCParams` when it declares none): a frozen dataclass whose fields are the
``[privacy]`` keys it takes (besides ``model``), listed with their TOML kind in ``KEYS``
("int", "number", "str", "bool" or "strs"), required when the field has no default, and
checked in ``__post_init__`` (raise :class:`fedanon.errors.SpecError`).  A spec naming the
model is parsed against exactly these keys: an unknown key is an error naming the allowed
ones, and a key the model ignores is never asked for.

A model that *is* LKC-privacy for some L, K, C (k-anonymity is LKC with L = |QID| and C = 1)
says so in :meth:`ModelParams.as_lkc`; a hospital's policy (min_K, min_L, max_C) compares
those values, and ``fedanon audit`` recounts them independently.  A model that returns None
is refused by every policy and cannot be audited on a table (``fedanon audit`` exits 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from fedanon.errors import SpecError


@dataclass(frozen=True)
class LKCTerms:
    """The LKC-privacy a model amounts to (exactly, not a bound)."""

    L: int
    K: int
    C: float
    sensitive_values: tuple[str, ...] = ()


class ModelParams(Protocol):
    """What the spec, the report, the policy and the audit need of a model's parameters."""

    KEYS: ClassVar[Mapping[str, str]]  # [privacy] key -> kind: int | number | str | bool | strs

    def canonical(self) -> dict[str, Any]:
        """The parameters as JSON values (run hash, report)."""
        ...

    def as_lkc(self, n_qids: int) -> LKCTerms | None:
        """The LKC-privacy this model is exactly (None: it is not an LKC instance)."""
        ...


def _bad_int(v: object) -> bool:
    return isinstance(v, bool) or not isinstance(v, int) or v < 1


@dataclass(frozen=True)
class LKCParams:
    """LKC-privacy (Definition 3.1): L, K, C and the sensitive values C bounds."""

    KEYS: ClassVar[Mapping[str, str]] = {
        "L": "int",
        "K": "int",
        "C": "number",
        "sensitive_values": "strs",
        "allow_absent_sensitive": "bool",
    }

    L: int
    K: int
    C: float
    sensitive_values: tuple[str, ...] = ()
    allow_absent_sensitive: bool = False  # a sensitive value may be missing from the data

    def __post_init__(self) -> None:
        if _bad_int(self.L):
            raise SpecError("L must be an integer >= 1", value=str(self.L), column="privacy.L")
        if _bad_int(self.K):
            raise SpecError("K must be an integer >= 1", value=str(self.K), column="privacy.K")
        if (
            isinstance(self.C, bool)
            or not isinstance(self.C, float | int)
            or not (0 < float(self.C) <= 1)
        ):
            raise SpecError("C must be a number in (0, 1]", value=str(self.C), column="privacy.C")
        object.__setattr__(self, "sensitive_values", tuple(self.sensitive_values))
        if len(set(self.sensitive_values)) != len(self.sensitive_values):
            raise SpecError("sensitive_values has duplicates", column="privacy.sensitive_values")

    def canonical(self) -> dict[str, Any]:
        return {
            "L": self.L,
            "K": self.K,
            "C": float(self.C),
            "sensitive_values": list(self.sensitive_values),
            # only when set: specs without it keep their run hash
            **({"allow_absent_sensitive": True} if self.allow_absent_sensitive else {}),
        }

    def as_lkc(self, n_qids: int) -> LKCTerms:
        return LKCTerms(self.L, self.K, float(self.C), self.sensitive_values)
