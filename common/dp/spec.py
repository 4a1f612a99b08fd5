"""A DP run spec: the run spec (:mod:`fedanon.model.spec`) with ``[privacy] model = "dp"``.

The spec reader parses it like any other: ``[privacy]`` through the registered model's
parameters class (:class:`fedanon.privacy.params.DiffGenParams`: ``epsilon``,
``specializations`` -- h in the seed -- and ``noise_budget = "half" | "rest"``), ``[utility]
score`` among the registered scores, the ``[[attribute]]`` tables as for an LKC run.
:class:`DPSpec` is the DiffGen view of such a :class:`~fedanon.model.spec.RunSpec`: the score
must be ``"max"`` (the default for this model) or ``"infogain"``; predictors are the
attributes with role ``qid``; the class must declare its ``values`` (the released table lists
every class value of every group, so the class domain must not come from the data).
Identifier, sensitive and other columns are not released by a DP run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

from fedanon.dp.model import MODEL, SCORES
from fedanon.errors import SpecError
from fedanon.model.attributes import SET
from fedanon.model.params import (
    MAX_DENOMINATOR,
    MAX_EPSILON,
    MAX_SPECIALIZATIONS,
    NOISE_BUDGETS,
    DiffGenParams,
)
from fedanon.model.peek import spec_model, text_model
from fedanon.model.spec import AttributeSpec, Privacy, RunSpec, load_spec, parse_spec
from fedanon.model.tomlcfg import parse_toml

__all__ = [
    "MAX_DENOMINATOR",
    "MAX_EPSILON",
    "MAX_NUMERIC",
    "MAX_SPECIALIZATIONS",
    "MODEL",
    "NOISE_BUDGETS",
    "DPParams",
    "DPSpec",
    "dp_run_hash",
    "is_dp_spec",
    "load_dp_spec",
    "parse_dp_spec",
    "privacy_model",
]

MAX_NUMERIC = 64


@dataclass(frozen=True)
class DPParams:
    """What the DiffGen run reads: the model's parameters and the score it samples with."""

    epsilon: Fraction
    specializations: int
    score: str
    noise_budget: str = "half"  # fedanon.dp.budget: "half" (Algorithm 1) or "rest"

    def __post_init__(self) -> None:
        model = self.model_params()  # validates epsilon, h and noise_budget
        object.__setattr__(self, "epsilon", model.epsilon)
        if self.score not in SCORES:
            raise SpecError(
                "unknown score for model = 'dp'",
                column="utility.score",
                value=str(self.score),
                expected=" | ".join(SCORES),
            )

    def model_params(self) -> DiffGenParams:
        return DiffGenParams(self.epsilon, self.specializations, self.noise_budget)

    @classmethod
    def of(cls, spec: RunSpec) -> DPParams:
        p = spec.privacy.params
        if spec.privacy.model != MODEL or not isinstance(p, DiffGenParams):
            raise _not_dp(spec.privacy.model, spec.source)
        return cls(p.epsilon, p.specializations, spec.score, p.noise_budget)


@dataclass(frozen=True)
class DPSpec:
    """A DP run spec: ``run`` (model "dp") and its parameters ``params``.  ``run`` always
    agrees with ``params`` (``replace(spec, params=...)`` rebuilds it)."""

    params: DPParams
    run: RunSpec

    def __post_init__(self) -> None:
        p = self.params
        privacy = Privacy(p.model_params(), MODEL)
        if self.run.privacy != privacy or self.run.score != p.score:
            object.__setattr__(self, "run", replace(self.run, privacy=privacy, score=p.score))
        cls = self.run.class_attr
        if cls is None or cls.values is None or len(cls.values) < 2:
            raise SpecError(
                "model = 'dp' needs a class attribute with declared values",
                file=self.run.source,
                expected="[[attribute]] with role = 'class' and values = [at least two values]",
            )
        sets = [a.name for a in self.run.qids if a.type == SET]
        if len(sets) > 1:
            raise SpecError(
                "model = 'dp' reads one set-valued qid (the seed's diagnosis codes)",
                file=self.run.source,
                value=sets[1],
                expected="at most one [[attribute]] with type = 'set'",
            )
        if len(self.numeric) > MAX_NUMERIC:
            raise SpecError(
                f"more than {MAX_NUMERIC} dynamically split numeric predictors",
                file=self.run.source,
            )

    @classmethod
    def of(cls, run: RunSpec) -> DPSpec:
        """The DiffGen view of a parsed run spec (SpecError unless its model is "dp")."""
        try:
            return cls(DPParams.of(run), run)
        except SpecError as exc:
            if exc.file is not None:
                raise
            raise SpecError(
                exc.message,
                file=run.source,
                column=exc.column,
                value=exc.value,
                expected=exc.expected,
            ) from exc

    @property
    def source(self) -> str:
        return self.run.source

    @property
    def predictors(self) -> tuple[AttributeSpec, ...]:
        return self.run.qids

    @property
    def class_name(self) -> str:
        assert self.run.class_attr is not None
        return self.run.class_attr.name

    @property
    def class_values(self) -> tuple[str, ...]:
        assert self.run.class_attr is not None and self.run.class_attr.values is not None
        return self.run.class_attr.values

    @property
    def set_attr(self) -> AttributeSpec | None:
        """The set-valued predictor (diagnosis codes), if any (:mod:`fedanon.dp.setrun`)."""
        return next((a for a in self.run.qids if a.type == SET), None)

    @property
    def relational(self) -> RunSpec:
        """The run spec with the set-valued predictor as a column the relational reader skips
        (role identifier; :mod:`fedanon.io.setread` reads it)."""
        keep = tuple(
            AttributeSpec(a.name, "identifier") if a.type == SET else a for a in self.run.attributes
        )
        return replace(self.run, attributes=keep, set_valued=False)

    @property
    def numeric(self) -> tuple[AttributeSpec, ...]:
        """Numeric predictors whose split points the mechanism chooses (no taxonomy file)."""
        return tuple(a for a in self.run.qids if a.dynamic)

    @property
    def dropped(self) -> tuple[str, ...]:
        """Declared columns a DP run does not release."""
        return tuple(a.name for a in self.run.attributes if a.role not in ("qid", "class"))


# What DP run hashes were computed over before model "dp" was registered (its attributes
# were then parsed under this neutral LKC section): kept, so that pinned hashes still hold.
_V1_PRIVACY = {"L": 1, "K": 1, "C": 1.0, "sensitive_values": []}


def dp_run_hash(spec: DPSpec, files: dict[str, str]) -> bytes:
    """What a federated DP run is bound to: the attributes and taxonomy texts (as for an LKC
    run) and the DP parameters (epsilon as the exact decimal, h, the score, the noise
    budget unless the default).  Unchanged since fedanon-dp-v1."""
    attributes = [
        {k: v for k, v in a.__dict__.items() if v is not None} for a in spec.run.attributes
    ]
    v1 = {"privacy": _V1_PRIVACY, "score": "infogain", "attributes": attributes}
    doc = {"spec": v1, "files": dict(sorted(files.items()))}
    h = hashlib.sha256(b"fedanon-dp-v1")
    h.update(hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).digest())
    p = spec.params
    params = [str(p.epsilon), p.specializations, p.score]
    if p.noise_budget != "half":  # the hash of a spec without the key is unchanged
        params.append(p.noise_budget)
    h.update(json.dumps(params).encode())
    return h.digest()


def privacy_model(text: str, source: str = "<spec>") -> str:
    """``[privacy] model`` of a spec text: "lkc" (the default), "dp", or another name; a text
    that is not TOML is a SpecError naming ``source``."""
    parse_toml(text.removeprefix("\ufeff"), source, error=SpecError)
    return text_model(text)  # the one sniffer (fedanon.model.peek)


def is_dp_spec(path: Path) -> bool:
    """True when the spec file at ``path`` declares ``[privacy] model = "dp"`` (False if it is
    unreadable or not TOML: the caller's own reader then reports the problem)."""
    return spec_model(path) == MODEL


def parse_dp_spec(text: str, source: str = "<spec>") -> DPSpec:
    """Parse spec text with the run spec reader, then take its DiffGen view."""
    model = privacy_model(text, source)
    if model != MODEL:  # before the reader names the DP keys a non-DP model does not take
        raise _not_dp(model, source)
    return DPSpec.of(parse_spec(text, source, set_valued=True))


def _not_dp(model: str, source: str) -> SpecError:
    return SpecError(
        "not a DP spec: [privacy] has no model = 'dp' (an LKC spec runs with `fedanon anonymize`)",
        file=source,
        value=model,
        expected="model = 'dp'",
    )


def load_dp_spec(path: Path) -> tuple[DPSpec, Callable[[str], str]]:
    """Read a DP spec file; returns it and a reader for the taxonomy files it references."""
    run, reader = load_spec(path, set_valued=True)
    return DPSpec.of(run), reader
