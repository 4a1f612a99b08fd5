"""Parameters given in code (:mod:`fedanon.apispec`) as a spec file holds them: numpy scalars as
the Python numbers they are, exact fractions as floats, lists of strings checked item by
item (a lone string is refused, never split into letters)."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from numbers import Real
from typing import Any

import numpy as np

from fedanon.errors import SpecError

__all__ = ["is_integer", "is_number", "plain", "strings"]


def plain(value: Any) -> Any:
    """A parameter as a spec file holds it: an exact epsilon (DiffGen) as the float whose
    repr is its decimal, a numpy scalar (``df["age"].min()``, a count) as the Python number
    it is, a tuple as a list (items likewise)."""
    if isinstance(value, Fraction):
        return float(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    return value


def strings(value: Any, key: str, *, where: str = "", column: str | None = None) -> tuple[str, ...]:
    """A list of strings given in code: a lone string is refused (tuple("Yes") would be three
    one-letter values), as is any item that is not a string."""
    prefix = f"{where}: " if where else ""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise SpecError(
            f"{prefix}{key} must be a list of strings",
            column=column,
            value=str(value),
            expected=f"a list, e.g. [{str(value)!r}] for one value",
        )
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise SpecError(
                f"{prefix}{key} must be a list of strings (an item is {type(item).__name__})",
                column=column,
                value=str(item),
                expected=f"{str(item)!r}, as the data's text",
            )
    return items


def is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool | np.bool_)


def is_integer(value: Any) -> bool:
    """An int or a numpy integer, never a bool (``True`` is an int to Python)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)
