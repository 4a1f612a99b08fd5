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
from fractions import Fraction
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
        "m": "int",
    }

    L: int
    K: int
    C: float
    sensitive_values: tuple[str, ...] = ()
    allow_absent_sensitive: bool = False  # a sensitive value may be missing from the data
    # m-privacy (Goryczka, Xiong, Fung): LKC holds on the records outside every coalition of
    # at most m providers (0: plain LKC; fedanon.privacy.mprivacy)
    m: int = 0

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
        if isinstance(self.m, bool) or not isinstance(self.m, int) or self.m < 0:
            raise SpecError(
                "m must be an integer >= 0",
                value=str(self.m),
                column="privacy.m",
                expected="0 (plain LKC) or the largest coalition of providers to resist",
            )

    def canonical(self) -> dict[str, Any]:
        return {
            "L": self.L,
            "K": self.K,
            "C": float(self.C),
            "sensitive_values": list(self.sensitive_values),
            # only when set: specs without it keep their run hash
            **({"allow_absent_sensitive": True} if self.allow_absent_sensitive else {}),
            **({"m": self.m} if self.m else {}),
        }

    def as_lkc(self, n_qids: int) -> LKCTerms:
        return LKCTerms(self.L, self.K, float(self.C), self.sensitive_values)


NOISE_BUDGETS = ("half", "rest")
MAX_EPSILON = 100
MAX_DENOMINATOR = 10**6  # epsilon with at most 6 decimals keeps every sampler exact in int64
MAX_SPECIALIZATIONS = 1000


def exact_epsilon(raw: object) -> Fraction:
    """The decimal the user wrote (TOML's 0.1 is 1/10, not the binary float nearest to it):
    a float is read through its shortest repr, which is that decimal."""
    if isinstance(raw, Fraction):
        return raw
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise SpecError(
            "epsilon must be a number", column="privacy.epsilon", value=str(raw), expected="> 0"
        )
    if isinstance(raw, float) and raw != raw:  # NaN
        raise SpecError("epsilon is not a number", column="privacy.epsilon", value=str(raw))
    try:
        return Fraction(repr(raw)) if isinstance(raw, float) else Fraction(raw)
    except (ValueError, OverflowError) as exc:
        raise SpecError(
            "epsilon is not a finite number", column="privacy.epsilon", value=str(raw)
        ) from exc


@dataclass(frozen=True)
class DiffGenParams:
    """epsilon-differential privacy by generalization (DiffGen, ``model = "dp"``): the total
    budget ``epsilon`` (kept exact, as the decimal written), ``specializations`` (h, the
    number of exponential-mechanism selections) and ``noise_budget`` ("half": Laplace noise
    gets epsilon / 2 as in Algorithm 1; "rest": also what the selections left unspent).

    Not an instance of LKC-privacy (:meth:`as_lkc` is None): a policy admits it only through
    ``max_epsilon``, and ``fedanon audit`` cannot check it on a table."""

    KEYS: ClassVar[Mapping[str, str]] = {
        "epsilon": "number",
        "specializations": "int",
        "noise_budget": "str",
    }

    epsilon: Fraction
    specializations: int
    noise_budget: str = "half"

    def __post_init__(self) -> None:
        eps = exact_epsilon(self.epsilon)
        object.__setattr__(self, "epsilon", eps)
        if self.noise_budget not in NOISE_BUDGETS:
            raise SpecError(
                "unknown noise_budget",
                column="privacy.noise_budget",
                value=str(self.noise_budget),
                expected=" | ".join(NOISE_BUDGETS),
            )
        if not (0 < eps <= MAX_EPSILON):
            raise SpecError(
                "epsilon out of range",
                column="privacy.epsilon",
                value=str(float(eps)),
                expected=f"a number in (0, {MAX_EPSILON}]",
            )
        if eps.denominator > MAX_DENOMINATOR:
            raise SpecError(
                "epsilon has too many decimals",
                column="privacy.epsilon",
                value=str(float(eps)),
                expected="at most 6 digits after the decimal point",
            )
        h = self.specializations
        if isinstance(h, bool) or not isinstance(h, int) or not 1 <= h <= MAX_SPECIALIZATIONS:
            integer = isinstance(h, int) and not isinstance(h, bool)
            raise SpecError(
                f"specializations must be in [1, {MAX_SPECIALIZATIONS}]"
                if integer
                else "specializations must be an integer",
                column="privacy.specializations",
                value=str(h),
                expected=f"an integer in [1, {MAX_SPECIALIZATIONS}]",
            )

    def canonical(self) -> dict[str, Any]:
        # the float of a decimal with <= 6 digits names it exactly (its repr is that decimal)
        return {
            "epsilon": float(self.epsilon),
            "specializations": self.specializations,
            "noise_budget": self.noise_budget,
        }

    def as_lkc(self, n_qids: int) -> None:
        return None
