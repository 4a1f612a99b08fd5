"""Checks a federated run makes on its spec, the same on both sides: the leader before it
contacts anyone, each party again on the spec the leader proposes (a party trusts no leader)."""

from __future__ import annotations

from fedanon.errors import SpecError
from fedanon.model.spec import RunSpec

__all__ = ["check_class_values"]


def check_class_values(spec: RunSpec) -> None:
    """A federated run needs the class labels in the spec: each party codes its classes by
    their position there, and a party must not reveal which labels its own table holds."""
    c = spec.class_attr
    if c is not None and c.values is None:
        raise SpecError(
            f"the class attribute {c.name!r} needs its labels in the spec, e.g. "
            f'values = ["<=50K", ">50K"], so that every party codes classes identically',
            file=spec.source,
        )
