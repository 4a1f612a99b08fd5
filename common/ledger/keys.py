"""The budget keys of ``[policy]`` (read by :mod:`fedanon.party.config`, held by
:class:`fedanon.security.policy.PartyPolicy`, enforced by :mod:`fedanon.ledger.budgets`).
No imports beyond the standard library: the policy module loads this."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

BUDGET_KEYS = (
    "max_total_epsilon",
    "max_releases",
    "max_runs_per_day",
    "max_refusals_per_hour",
    "lockout_minutes",
)


def check_budget_values(
    values: Mapping[str, object], bad: Callable[[str, object, str], Exception]
) -> None:
    """Validate the budget keys (``bad(key, value, expected)`` is raised)."""
    for key in ("max_releases", "max_runs_per_day", "max_refusals_per_hour"):
        v = values.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise bad(key, v, f"an integer >= 1, e.g. {key} = 10")
    for key, example in (("max_total_epsilon", "2.0"), ("lockout_minutes", "60")):
        v = values.get(key)
        if v is not None and (
            isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0
        ):
            raise bad(key, v, f"a positive number, e.g. {key} = {example}")
    if values.get("lockout_minutes") is not None and values.get("max_refusals_per_hour") is None:
        raise bad(
            "lockout_minutes",
            values["lockout_minutes"],
            "lockout_minutes only together with max_refusals_per_hour",
        )


def split_budgets(table: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``[policy]`` -> (its other keys, its budget keys)."""
    rest = {k: v for k, v in table.items() if k not in BUDGET_KEYS}
    return rest, {k: v for k, v in table.items() if k in BUDGET_KEYS}


def budgets_toml(policy: Any) -> str:
    """The budget keys of a policy as ``[policy]`` lines (for generated configs)."""
    lines = []
    for key in BUDGET_KEYS:
        v = getattr(policy, key, None)
        if v is not None:
            lines.append(f"{key} = {v!r}\n")
    return "".join(lines)
