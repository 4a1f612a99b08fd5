"""(k, k^m)-anonymity's parameter section of the one spec, :class:`fedanon.Spec`: the
section (:class:`Kkm`), the run's view derived from a spec (:class:`~fedanon.kkm.spec.KkmSpec`)
and back (:func:`section_of`, :func:`attribute_fields`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fedanon.errors import SpecError
from fedanon.kkm.spec import MODEL, KkmAttribute, KkmPrivacy, KkmSpec, Relax, Tuning

DEFAULT_SEPARATOR = "|"


@dataclass(frozen=True)
class Kkm:
    """``[privacy]`` k, m, delta, epsilon_suppress and constraints, ``[relax]`` (None:
    Algorithm 1 only) and ``[algorithm]`` of a (k, k^m) spec, validated on construction as
    in a spec file::

        Spec(privacy=Kkm(k=5, m=2, delta=0.3, epsilon_suppress=0.06), attributes=[...])
    """

    k: int
    m: int
    delta: float
    epsilon_suppress: float
    constraints: str | None = None
    relax: Relax | None = None
    algorithm: Tuning = field(default_factory=Tuning)
    model: ClassVar[str] = MODEL

    def __post_init__(self) -> None:
        self.privacy  # noqa: B018  # validates k, m, delta and epsilon_suppress

    @property
    def privacy(self) -> KkmPrivacy:
        return KkmPrivacy(self.k, self.m, self.delta, self.epsilon_suppress, self.constraints)

    def view(self, attributes: Sequence[Any], source: str) -> KkmSpec:
        """The run's view of a spec of this section and ``attributes`` (the one attribute
        model, :class:`fedanon.Attribute`); a SpecError names ``source``."""
        try:
            for a in attributes:
                stray = next((k for k in ("step", "values") if getattr(a, k) is not None), None)
                if stray is not None:
                    raise SpecError(
                        f"attribute {a.name!r}: {stray} does not apply to a (k, k^m) spec"
                    )
            attrs = tuple(
                KkmAttribute(
                    name=a.name,
                    role=a.role,
                    type=a.type,
                    taxonomy=a.taxonomy_key,
                    domain=a.domain,
                    weight=a.weight,
                    separator=DEFAULT_SEPARATOR if a.separator is None else a.separator,
                )
                for a in attributes
            )
            return KkmSpec(self.privacy, attrs, self.relax, self.algorithm, source)
        except SpecError as exc:
            if exc.file is not None:
                raise
            raise SpecError(
                exc.message, file=source, column=exc.column, value=exc.value, expected=exc.expected
            ) from exc


def section_of(spec: KkmSpec) -> Kkm:
    """The parameter section of a parsed kkm spec."""
    p = spec.privacy
    return Kkm(p.k, p.m, p.delta, p.epsilon_suppress, p.constraints, spec.relax, spec.tuning)


def attribute_fields(a: KkmAttribute) -> dict[str, Any]:
    """An attribute of a parsed kkm spec as the one attribute model's keys."""
    out = {k: getattr(a, k) for k in ("name", "role", "type", "taxonomy", "domain", "weight")}
    return {**out, "separator": a.separator if a.is_set else None}
