"""The DP part of a run spec: ``[privacy] model = "dp"``, ``epsilon``, ``specializations``
(h in the seed), optionally ``noise_budget = "half" | "rest"``, and ``[utility] score = "max" |
"infogain"``.

The attributes are declared and validated exactly as for an LKC run: the ``[[attribute]]``
tables are handed to :func:`fedanon.model.spec.parse_spec` together with a neutral LKC section
(L = K = 1, C = 1, score infogain), which the DP run never reads.  Predictors are the
attributes with role ``qid``; the class must declare its ``values`` (the released table lists
every class value of every group, so the class domain must not come from the data).
Identifier, sensitive and other columns are not released by a DP run.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from fedanon.dp.utility import SCORES
from fedanon.errors import SpecError
from fedanon.model.spec import AttributeSpec, RunSpec, parse_spec, run_hash

MODEL = "dp"
PRIVACY_KEYS = {"model", "epsilon", "specializations", "noise_budget"}
NOISE_BUDGETS = ("half", "rest")
MAX_EPSILON = 100
MAX_DENOMINATOR = 10**6  # epsilon with at most 6 decimals keeps every sampler exact in int64
MAX_SPECIALIZATIONS = 1000
MAX_NUMERIC = 64


@dataclass(frozen=True)
class DPParams:
    epsilon: Fraction
    specializations: int
    score: str
    noise_budget: str = "half"  # fedanon.dp.budget: "half" (Algorithm 1) or "rest"

    def __post_init__(self) -> None:
        if self.noise_budget not in NOISE_BUDGETS:
            raise SpecError(
                "unknown noise_budget",
                column="privacy.noise_budget",
                value=str(self.noise_budget),
                expected=" | ".join(NOISE_BUDGETS),
            )
        if not (0 < self.epsilon <= MAX_EPSILON):
            raise SpecError(
                "epsilon out of range",
                column="privacy.epsilon",
                value=str(float(self.epsilon)),
                expected=f"a number in (0, {MAX_EPSILON}]",
            )
        if self.epsilon.denominator > MAX_DENOMINATOR:
            raise SpecError(
                "epsilon has too many decimals",
                column="privacy.epsilon",
                value=str(float(self.epsilon)),
                expected="at most 6 digits after the decimal point",
            )
        h = self.specializations
        if isinstance(h, bool) or not isinstance(h, int) or not 1 <= h <= MAX_SPECIALIZATIONS:
            raise SpecError(
                "specializations must be an integer",
                column="privacy.specializations",
                value=str(h),
                expected=f"an integer in [1, {MAX_SPECIALIZATIONS}]",
            )
        if self.score not in SCORES:
            raise SpecError(
                "unknown score for model = 'dp'",
                column="utility.score",
                value=str(self.score),
                expected=" | ".join(SCORES),
            )


@dataclass(frozen=True)
class DPSpec:
    params: DPParams
    run: RunSpec  # the attributes (its LKC section is a neutral placeholder)

    def __post_init__(self) -> None:
        cls = self.run.class_attr
        if cls is None or cls.values is None or len(cls.values) < 2:
            raise SpecError(
                "model = 'dp' needs a class attribute with declared values",
                file=self.run.source,
                expected="[[attribute]] with role = 'class' and values = [at least two values]",
            )
        if len(self.numeric) > MAX_NUMERIC:
            raise SpecError(
                f"more than {MAX_NUMERIC} dynamically split numeric predictors",
                file=self.run.source,
            )

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
    def numeric(self) -> tuple[AttributeSpec, ...]:
        """Numeric predictors whose split points the mechanism chooses (no taxonomy file)."""
        return tuple(a for a in self.run.qids if a.dynamic)

    @property
    def dropped(self) -> tuple[str, ...]:
        """Declared columns a DP run does not release."""
        return tuple(a.name for a in self.run.attributes if a.role not in ("qid", "class"))


def dp_run_hash(spec: DPSpec, files: dict[str, str]) -> bytes:
    """What a federated DP run is bound to: the attributes and taxonomy texts (as for an LKC
    run) and the DP parameters (the neutral LKC section of ``spec.run`` is not enough)."""
    h = hashlib.sha256(b"fedanon-dp-v1")
    h.update(run_hash(spec.run, files))
    p = spec.params
    params = [str(p.epsilon), p.specializations, p.score]
    if p.noise_budget != "half":  # the hash of a spec without the key is unchanged
        params.append(p.noise_budget)
    h.update(json.dumps(params).encode())
    return h.digest()


def privacy_model(text: str, source: str = "<spec>") -> str:
    """``[privacy] model`` of a spec text: "lkc" (the default) or "dp"."""
    doc = _load(text, source)
    priv = doc.get("privacy")
    model = priv.get("model", "lkc") if isinstance(priv, dict) else "lkc"
    return str(model)


def is_dp_spec(path: Path) -> bool:
    """True when the spec file at ``path`` declares ``[privacy] model = "dp"`` (False if it is
    unreadable or not TOML: the caller's own reader then reports the problem)."""
    try:
        text = path.read_text(encoding="utf-8")
        return privacy_model(text, str(path)) == "dp"
    except (OSError, UnicodeDecodeError, SpecError):
        return False


def parse_dp_spec(text: str, source: str = "<spec>") -> DPSpec:
    doc = _load(text, source)
    unknown = set(doc) - {"privacy", "utility", "attribute"}
    if unknown:
        raise SpecError(
            "unknown section",
            file=source,
            value=sorted(unknown)[0],
            expected="[privacy], [utility], [[attribute]]",
        )
    priv = doc.get("privacy")
    if not isinstance(priv, dict):
        raise SpecError("the spec needs a [privacy] table", file=source)
    if priv.get("model") != MODEL:
        raise SpecError(
            "not a DP spec: [privacy] has no model = 'dp' (an LKC spec runs with "
            "`fedanon anonymize`)",
            file=source,
            value=None if "model" not in priv else str(priv["model"]),
            expected="model = 'dp'",
        )
    extra = set(priv) - PRIVACY_KEYS
    if extra:
        raise SpecError(
            "[privacy]: key does not apply to model = 'dp'",
            file=source,
            value=sorted(extra)[0],
            expected=", ".join(sorted(PRIVACY_KEYS)),
        )
    for key in ("epsilon", "specializations"):
        if key not in priv:
            raise SpecError(f"[privacy] with model = 'dp' needs {key}", file=source)
    util = doc.get("utility", {})
    if not isinstance(util, dict) or set(util) - {"score"}:
        raise SpecError("[utility] takes only score", file=source, expected="score = 'max'")
    try:
        params = DPParams(
            epsilon=_epsilon(priv["epsilon"]),
            specializations=priv["specializations"],
            score=util.get("score", "max"),
            noise_budget=priv.get("noise_budget", "half"),
        )
    except SpecError as exc:
        raise SpecError(
            exc.message, file=source, column=exc.column, value=exc.value, expected=exc.expected
        ) from exc
    attrs = doc.get("attribute")
    if not isinstance(attrs, list) or not attrs:
        raise SpecError("the spec declares no [[attribute]]", file=source)
    return DPSpec(params, parse_spec(_attributes_spec(attrs, source), source))


def load_dp_spec(path: Path) -> tuple[DPSpec, Callable[[str], str]]:
    """Read a DP spec file; returns it and a reader for the taxonomy files it references."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read spec: {exc.strerror}", file=str(path)) from exc
    base = path.parent

    def reader(rel: str) -> str:
        try:
            return (base / rel).read_text(encoding="utf-8")
        except OSError as exc:
            raise SpecError(
                f"cannot read taxonomy file: {exc.strerror}", file=str(path), value=rel
            ) from exc

    return parse_dp_spec(text, str(path)), reader


def _load(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"not valid TOML: {exc}", file=source) from exc


def _epsilon(raw: Any) -> Fraction:
    """The decimal the user wrote (0.1 is 1/10, not the binary float nearest to it)."""
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


def _attributes_spec(attrs: list[Any], source: str) -> str:
    """TOML text for :func:`parse_spec`: a neutral LKC section and the attribute tables
    (strings, numbers and lists re-emitted as JSON literals, which are valid TOML)."""
    lines = ["[privacy]", "L = 1", "K = 1", "C = 1.0", "[utility]", 'score = "infogain"']
    for i, raw in enumerate(attrs, 1):
        if not isinstance(raw, dict):
            raise SpecError(f"[[attribute]] #{i} is not a table", file=source)
        lines.append("[[attribute]]")
        for key, value in raw.items():
            if not _plain(value):
                raise SpecError(
                    f"[[attribute]] #{i}: unsupported value",
                    file=source,
                    column=str(key),
                    value=str(value),
                    expected="a string, a number or a list of them",
                )
            lines.append(f"{json.dumps(str(key))} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def _plain(value: Any) -> bool:
    if isinstance(value, list):
        return all(_plain(v) and not isinstance(v, list) for v in value)
    if isinstance(value, float):
        return value == value and abs(value) != float("inf")
    return isinstance(value, str | int | bool)
