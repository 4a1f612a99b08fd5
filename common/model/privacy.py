"""``[privacy]`` of a run spec: the model's name and its own validated parameters.

Which keys a model takes is its parameters class's business (:mod:`fedanon.model.params`);
this module parses them with the spec's TOML kinds (no conversion beyond int -> float for a
number and list -> tuple) and keeps LKC's familiar names (``spec.privacy.L``) working.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields, replace
from typing import Any, cast

from fedanon.errors import SpecError
from fedanon.model.params import LKCParams, LKCTerms, ModelParams
from fedanon.model.peek import DEFAULT_MODEL
from fedanon.model.registry import (
    model_factory,
    model_implementation,
    model_known,
    model_names,
    params_class,
)
from fedanon.model.tomlcfg import check_keys


@dataclass(frozen=True)
class Privacy:
    """The privacy model (registered name, :mod:`fedanon.privacy.base`) and its own validated
    parameters (:mod:`fedanon.model.params`: :class:`LKCParams` for the built-in ``"lkc"``).

    ``L``, ``K``, ``C`` read LKC's parameters (a SpecError for a model without them);
    ``sensitive_values`` is empty for a model that takes none."""

    params: ModelParams
    model: str = DEFAULT_MODEL

    def __post_init__(self) -> None:
        if not model_known(self.model):
            raise SpecError(
                "unknown privacy model", value=self.model, expected=" | ".join(model_names())
            )
        cls = params_class(self.model)
        if not isinstance(self.params, cls):
            raise SpecError(
                f"model {self.model!r} takes {cls.__name__} parameters",
                value=type(self.params).__name__,
            )

    @classmethod
    def lkc(
        cls,
        L: int,
        K: int,
        C: float,
        sensitive_values: tuple[str, ...] = (),
        allow_absent_sensitive: bool = False,
    ) -> Privacy:
        return cls(LKCParams(L, K, C, tuple(sensitive_values), allow_absent_sensitive))

    @property
    def lkc_params(self) -> LKCParams:
        if not isinstance(self.params, LKCParams):
            raise SpecError(f"model {self.model!r} has no L, K, C parameters", value=self.model)
        return self.params

    @property
    def L(self) -> int:
        return self.lkc_params.L

    @property
    def K(self) -> int:
        return self.lkc_params.K

    @property
    def C(self) -> float:
        return self.lkc_params.C

    @property
    def sensitive_values(self) -> tuple[str, ...]:
        return tuple(getattr(self.params, "sensitive_values", ()))

    @property
    def allow_absent_sensitive(self) -> bool:
        return bool(getattr(self.params, "allow_absent_sensitive", False))

    def replace(self, **keys: Any) -> Privacy:
        """The same model with some parameters changed (validated again)."""
        return Privacy(replace(cast(Any, self.params), **keys), self.model)

    def as_lkc(self, n_qids: int) -> LKCTerms | None:
        """The LKC-privacy the model amounts to, if it is an instance of LKC."""
        return self.params.as_lkc(n_qids)

    def parameters(self) -> dict[str, Any]:
        """The model and its parameters (report, CLI summary); LKC's as before: no "model"."""
        if self.model == DEFAULT_MODEL:
            p = self.lkc_params
            extra = {"m": p.m} if p.m else {}  # m-privacy: only when asked for
            return {
                "L": p.L, "K": p.K, "C": p.C, "sensitive_values": list(p.sensitive_values), **extra
            }  # fmt: skip
        return {"model": self.model, **self.params.canonical()}

    def describe(self) -> str:
        """One line, e.g. ``L=4 K=20 C=0.2`` or ``model=kanon K=5`` (log lines)."""
        if self.model == DEFAULT_MODEL:
            m = f" m={self.lkc_params.m}" if self.lkc_params.m else ""
            return f"L={self.L} K={self.K} C={float(self.C):g}{m}"
        shown = " ".join(
            f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
            for k, v in self.params.canonical().items()
            if not isinstance(v, list | dict)
        )
        return f"model={self.model} {shown}".rstrip()

    def canonical(self) -> dict[str, Any]:
        """What the run hash binds: the parameters, the model's name unless LKC (specs
        without it keep their hash) and a plug-in's implementation."""
        out = self.params.canonical()
        if self.model != DEFAULT_MODEL:
            out["model"] = self.model
            impl = model_implementation(self.model)
            if impl is not None:
                out["implementation"] = impl
        return out


_KINDS: dict[str, str] = {
    "int": "an integer",
    "number": "a number",
    "str": "a non-empty string",
    "bool": "true or false",
    "strs": "a list of strings",
    "domain": "[min, max) (two numbers)",
}


def _ok(kind: str, val: Any) -> bool:
    if kind == "int":
        return isinstance(val, int) and not isinstance(val, bool)
    if kind == "number":
        return isinstance(val, int | float) and not isinstance(val, bool)
    if kind == "str":
        return isinstance(val, str) and val != ""
    if kind == "bool":
        return isinstance(val, bool)
    if kind == "strs":
        return isinstance(val, list) and all(isinstance(v, str) for v in val)
    assert kind == "domain"
    return isinstance(val, list) and len(val) == 2 and all(_ok("number", v) for v in val)


def _typed(table: dict[str, Any], kinds: dict[str, str], where: str, source: str) -> None:
    """Every key of ``table`` is known and has its type (TOML types, no conversion)."""
    check_keys(table, set(kinds), where, source, error=SpecError)
    for key, val in table.items():
        if not _ok(kinds[key], val):
            raise SpecError(
                f"[{where}]: {key} must be {_KINDS[kinds[key]]}",
                file=source,
                value=str(val),
            )


def parse_privacy(priv: dict[str, Any], source: str = "<spec>") -> Privacy:
    """``[privacy]`` -> :class:`Privacy`: ``model`` (default "lkc") and exactly the keys that
    model takes (:mod:`fedanon.model.params`), typed, required ones present, validated."""
    _typed({k: v for k, v in priv.items() if k == "model"}, {"model": "str"}, "privacy", source)
    model = str(priv.get("model", DEFAULT_MODEL))
    if not model_known(model):
        raise SpecError(
            "unknown privacy model", file=source, value=model, expected=" | ".join(model_names())
        )
    cls = params_class(model)
    extra = sorted(set(priv) - {"model", *cls.KEYS})
    if extra:
        raise SpecError(
            f"[privacy]: unknown key (it does not apply to model = {model!r})",
            file=source,
            value=extra[0],
            expected=", ".join(sorted({"model", *cls.KEYS})),
        )
    _typed(priv, {"model": "str", **cls.KEYS}, "privacy", source)
    for f in fields(cast(Any, cls)):
        if f.init and f.default is MISSING and f.default_factory is MISSING and f.name not in priv:
            raise SpecError(f"[privacy] needs {f.name}", file=source)
    kinds = cls.KEYS
    values = {
        k: float(v) if kinds[k] == "number" else tuple(v) if kinds[k] == "strs" else v
        for k, v in priv.items()
        if k != "model"
    }
    try:
        return Privacy(cls(**values), model)
    except SpecError as exc:
        raise SpecError(
            exc.message, file=source, value=exc.value, column=exc.column, expected=exc.expected
        ) from exc


def default_score(model: str) -> str:
    """``[utility] score`` when a spec names none: the model's ``default_score`` ("max" for
    DiffGen), else "infogain"."""
    return str(getattr(model_factory(model), "default_score", "infogain"))
