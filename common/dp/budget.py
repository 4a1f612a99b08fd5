"""The privacy budget of a DiffGen run (Algorithm 1 of the seed) and what a run spent.

epsilon / 2 goes to the exponential mechanism: |numeric predictors| + 2h calls of
epsilon' = epsilon / (2 (|numeric predictors| + 2h)) each -- the split point of every numeric
predictor at the start, then per specialization one selection and one round of split points
for the new numeric values (the new intervals hold disjoint records: parallel composition, one
epsilon' for the round).  The other epsilon / 2 goes to discrete Laplace noise of scale
2 / epsilon on the count of every final group x class value (sensitivity 1: adding or
removing one record changes exactly one count by one).  Sequential composition of the
ledger gives the total; nothing is spent twice.

``noise_budget = "rest"`` gives the noise everything the specialization phase did not spend:
the split-point rounds of selections that are not numeric (or whose halves are single grid
steps) and those of the last selection are never run, so the noise gets epsilon / 2 plus those
epsilon' -- what the seed authors' own code does (McGill-DMaS/Privacy-DiffGen,
``CTDPartitioner``: the noise takes the remaining budget).  The amount depends only on earlier
outputs of the mechanism (which values were selected), never on the data directly, and the
ledger still adds up to at most epsilon on every path: adaptive sequential composition of
pure-DP steps, epsilon-DP as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from fedanon.errors import InternalError


@dataclass(frozen=True)
class Budget:
    epsilon: Fraction
    specializations: int
    n_numeric: int
    noise_budget: str = "half"  # "half": epsilon / 2; "rest": epsilon minus what was spent
    # with a set-valued predictor: one emptiness test per selection (docs/dp-diagnosis-codes.md)
    emptiness_tests: int = 0

    def __post_init__(self) -> None:
        if (
            self.epsilon <= 0
            or self.specializations < 1
            or self.n_numeric < 0
            or self.emptiness_tests < 0
        ):
            raise InternalError("invalid budget parameters")
        if self.noise_budget not in ("half", "rest"):
            raise InternalError(f"unknown noise budget {self.noise_budget!r}")

    @property
    def mechanism_calls(self) -> int:
        return self.n_numeric + 2 * self.specializations + self.emptiness_tests

    @property
    def epsilon_prime(self) -> Fraction:
        """Budget of one exponential-mechanism call (or one parallel round of split points)."""
        return self.epsilon / (2 * self.mechanism_calls)

    @property
    def noise_epsilon(self) -> Fraction:
        """The noise's allocation: epsilon / 2 (with "rest", at least that)."""
        return self.epsilon / 2

    @property
    def laplace_scale(self) -> Fraction:
        """Scale b of the noise (P(x) ~ exp(-|x| / b)) on counts of sensitivity 1, for the
        allocated epsilon / 2 (with "rest", :meth:`noise_epsilon_after` decides)."""
        return 1 / self.noise_epsilon

    def noise_epsilon_after(self, spent: Fraction) -> Fraction:
        """The noise's epsilon once the specialization phase has spent ``spent``."""
        if spent > self.epsilon - self.noise_epsilon:
            raise InternalError("the specialization phase overspent its half (a bug)")
        return self.epsilon - spent if self.noise_budget == "rest" else self.noise_epsilon

    def allocation(self) -> dict[str, Fraction]:
        e1 = self.epsilon_prime
        return {
            "initial_split_points": self.n_numeric * e1,
            "selections": self.specializations * e1,
            "split_points_after_selections": self.specializations * e1,
            **({"emptiness_tests": self.emptiness_tests * e1} if self.emptiness_tests else {}),
            "laplace_noise": self.noise_epsilon,
        }


@dataclass(frozen=True)
class Spend:
    step: str  # "split", "selection", "emptiness" or "noise"
    round: int
    epsilon: Fraction
    detail: str


@dataclass
class Ledger:
    budget: Budget
    entries: list[Spend] = field(default_factory=list)

    def spend(self, step: str, round_: int, epsilon: Fraction, detail: str) -> None:
        self.entries.append(Spend(step, round_, epsilon, detail))
        if self.total() > self.budget.epsilon:
            raise InternalError("privacy budget exceeded (a bug): nothing is published")

    def total(self) -> Fraction:
        return sum((e.epsilon for e in self.entries), Fraction(0))

    def by_step(self, step: str) -> Fraction:
        return sum((e.epsilon for e in self.entries if e.step == step), Fraction(0))


def fraction_json(x: Fraction) -> dict[str, Any]:
    """A budget amount for the report: exact rational and its float value."""
    return {"exact": str(x), "value": float(x)}
