"""The columns a hospital owns, whatever the leader's spec says: ``[policy] identifiers``,
``sensitive_column`` and ``sensitive_values`` (issue 24).

* ``identifiers = ["name", ...]``: every accepted spec declares each of them ``role =
  "identifier"`` (never read, never released).  Otherwise the leader could redeclare a name or
  a record number as a QID (or keep it unchanged) and learn it.
* ``sensitive_column = "..."`` and ``sensitive_values = [...]``: the hospital, not the leader,
  says which column C bounds and for which values.  An LKC spec (or a model that is an LKC
  instance) declares that column ``role = "sensitive"`` with at least those values among its
  own ``sensitive_values`` -- then ``C <= max_C`` binds them -- or ``role = "identifier"``
  (dropped: nothing of it is released).  Moved to ``other``, ``class`` or ``qid``, or not
  declared, the spec is refused.  A DP run releases no sensitive or other column (only
  generalized QIDs and noisy class counts), so there it may be ``sensitive``, ``other`` or
  ``identifier``, never a QID or the class; ``max_C`` does not apply to DP (``max_epsilon``
  does).
* ``max_C = 1`` bounds nothing: ``sensitive_values`` are then a configuration error, and
  ``sensitive_column`` alone only keeps the column out of QIDs and the class.

Pure functions of the spec's attributes: each returns the refusing policy line as (rule,
message), or None; :class:`fedanon.security.policy.PartyPolicy` raises it.
"""

from __future__ import annotations

from collections.abc import Sequence

from fedanon.model.spec import AttributeSpec

Refusal = tuple[str, str]  # (policy key, the policy line that refuses)
Invalid = tuple[str, object, str]  # (policy key, value, what would be valid)


def _roles(attrs: Sequence[AttributeSpec]) -> dict[str, str]:
    return {a.name: a.role for a in attrs}


def _declared(role: str | None) -> str:
    return "does not declare it" if role is None else f"declares it role = {role!r}"


def _names(values: Sequence[str]) -> str:
    return ", ".join(repr(v) for v in values)


def identifiers_refusal(
    attrs: Sequence[AttributeSpec], identifiers: Sequence[str]
) -> Refusal | None:
    """Each column of ``identifiers`` declared ``role = "identifier"``."""
    roles = _roles(attrs)
    for name in identifiers:
        role = roles.get(name)
        if role != "identifier":
            return (
                "identifiers",
                f"column {name!r} is in identifiers but the spec {_declared(role)} "
                "(it must be role = 'identifier': never read)",
            )
    return None


def sensitive_refusal(
    attrs: Sequence[AttributeSpec],
    column: str,
    required: Sequence[str],
    spec_values: Sequence[str],
) -> Refusal | None:
    """An LKC run: ``column`` is the spec's sensitive column with ``spec_values`` (what C
    bounds) listing every value of ``required``, or it is dropped."""
    role = _roles(attrs).get(column)
    if role == "identifier":
        return None
    if role != "sensitive":
        return (
            "sensitive_column",
            f"sensitive_column = {column!r} but the spec {_declared(role)} (it must be "
            "role = 'sensitive', bounded by C, or 'identifier', dropped)",
        )
    missing = [v for v in required if v not in spec_values]
    if missing:
        return (
            "sensitive_values",
            f"the spec's sensitive_values = [{_names(spec_values)}] lack {missing[0]!r} of "
            f"this hospital's sensitive_values = [{_names(required)}]",
        )
    return None


def dp_sensitive_refusal(attrs: Sequence[AttributeSpec], column: str) -> Refusal | None:
    """A DP run: ``column`` declared, and neither generalized (qid) nor counted (class)."""
    role = _roles(attrs).get(column)
    if role is None or role in ("qid", "class"):
        return (
            "sensitive_column",
            f"sensitive_column = {column!r} but the DP spec {_declared(role)} (it must be "
            "role = 'sensitive', 'other' or 'identifier': a DP run releases none of them)",
        )
    return None


def _name_list(value: object) -> bool:
    return isinstance(value, tuple) and all(isinstance(n, str) and n for n in value)


def columns_invalid(
    identifiers: object, column: object, values: object, max_c: float
) -> Invalid | None:
    """The first invalid of the three keys (None: all valid)."""
    if not _name_list(identifiers):
        return ("identifiers", identifiers, 'a list of column names, e.g. ["name", "ssn"]')
    assert isinstance(identifiers, tuple)
    dup = sorted({n for n in identifiers if identifiers.count(n) > 1})
    if dup:
        return ("identifiers", dup[0], "each column listed once")
    if column is not None and (not isinstance(column, str) or not column):
        return ("sensitive_column", column, 'a column name, e.g. sensitive_column = "disease"')
    if column in identifiers:
        return ("sensitive_column", column, "a column that is not in identifiers")
    if not _name_list(values):
        return ("sensitive_values", values, 'a list of values, e.g. ["HIV", "Divorced"]')
    assert isinstance(values, tuple)
    if len(set(values)) != len(values):
        return ("sensitive_values", values, "each value listed once")
    if values and column is None:
        return ("sensitive_values", values, "together with sensitive_column")
    if values and max_c >= 1:
        return ("sensitive_values", values, "none while max_C = 1 (C = 1 bounds nothing)")
    if column is not None and max_c < 1 and not values:
        return (
            "sensitive_values",
            values,
            f"at least one value of {column!r} with max_C < 1 (else the leader picks which "
            "values C bounds)",
        )
    return None
