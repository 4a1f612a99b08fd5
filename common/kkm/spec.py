"""The (k, k^m)-anonymity run spec: ``[privacy] model = "kkm"`` in a TOML file.

::

    [privacy]
    model = "kkm"
    k = 5                      # at least k records per attacker view
    m = 2                      # the attacker knows up to m diagnosis codes
    delta = 0.3                # max NCP of the release (Requirement 1)
    epsilon_suppress = 0.06    # max share of the (record, code) entries suppressed
    constraints = "uc.toml"    # optional utility constraints (TOML or CSV)

    [relax]                    # optional: Algorithm 2 when delta / epsilon cannot be met
    max_delta = 0.5            # (each limit defaults to 1: anything)
    max_epsilon_suppress = 0.2

    [algorithm]                # optional: neighbourhoods replacing quadratic searches
    window = 32                # cluster formation: consecutive records along the Z-order (>= 4k)
    neighbours = 1             # merge partners on each side along the Z-order

    [[attribute]]
    name = "age"
    role = "qid"               # qid | class | other | identifier
    type = "numeric"           # numeric | categorical | set
    [[attribute]]
    name = "diagnoses"
    role = "qid"               # exactly one set-valued qid: the codes
    type = "set"               # (role = "set" before issue 18: still read, with a warning)
    taxonomy = "builtin:icd9cm"   # or a native / ARX hierarchy file
    separator = "|"

The attribute model (roles, types) is the one of every spec (:mod:`fedanon.model.attributes`).

Parsing is separate from file access: :func:`parse_kkm_spec` works on text.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedanon.errors import SpecError
from fedanon.model.attributes import ROLES as ATTRIBUTE_ROLES
from fedanon.model.attributes import SET, TYPES, role_and_type, unknown_type
from fedanon.model.peek import spec_model, text_model
from fedanon.model.tomlcfg import check_keys, read_config

MODEL = "kkm"
ROLES = ("identifier", "qid", "class", "other")  # of the attribute model: no sensitive column
QID_TYPES = ("numeric", "categorical")  # the demographics; the codes: type = "set"
BUILTIN_PREFIX = "builtin:"
BUILTINS = ("icd9cm",)
FORBIDDEN_IN_SEPARATOR = ('"', "\n", "\r", ",", "(", ")", " ")


@dataclass(frozen=True)
class KkmPrivacy:
    """k, m and ArtUC's thresholds (Problem 1 of the seed)."""

    k: int
    m: int
    delta: float
    epsilon_suppress: float
    constraints: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise SpecError("k must be an integer >= 1", column="privacy.k", value=str(self.k))
        if isinstance(self.m, bool) or not isinstance(self.m, int) or not 0 <= self.m <= 8:
            raise SpecError("m must be an integer in [0, 8]", column="privacy.m", value=str(self.m))
        _unit(self.delta, "privacy.delta")
        _unit(self.epsilon_suppress, "privacy.epsilon_suppress")


@dataclass(frozen=True)
class Relax:
    """Algorithm 2: how far the (scripted) data owner accepts relaxing delta and epsilon."""

    max_delta: float
    max_epsilon_suppress: float

    def __post_init__(self) -> None:
        _unit(self.max_delta, "relax.max_delta")
        _unit(self.max_epsilon_suppress, "relax.max_epsilon_suppress")


@dataclass(frozen=True)
class Tuning:
    """Neighbourhood sizes that replace the seed's quadratic searches (see artuc.py)."""

    window: int = 32
    neighbours: int = 1

    def __post_init__(self) -> None:
        for key, val, lo in (("window", self.window, 2), ("neighbours", self.neighbours, 1)):
            if isinstance(val, bool) or not isinstance(val, int) or not lo <= val <= 4096:
                raise SpecError(
                    f"{key} must be an integer in [{lo}, 4096]",
                    column=f"algorithm.{key}",
                    value=str(val),
                )


@dataclass(frozen=True)
class KkmAttribute:
    name: str
    role: str
    type: str | None = None
    taxonomy: str | None = None
    domain: tuple[float, float] | None = None
    weight: float | None = None
    separator: str = "|"

    def __post_init__(self) -> None:
        where = f"attribute {self.name!r}"
        if self.role in ATTRIBUTE_ROLES and self.role not in ROLES:
            raise SpecError(
                f"{where}: role = {self.role!r} is not read by (k, k^m)-anonymity",
                value=self.role,
                expected=" | ".join(ROLES) + ": role = 'other' releases the column unchanged,"
                " role = 'identifier' drops it",
            )
        if self.role not in ROLES:
            raise SpecError(f"{where}: unknown role", value=self.role, expected=" | ".join(ROLES))
        if self.role == "qid" and self.type not in TYPES:
            raise unknown_type(where, self.type)
        if self.role == "qid" and self.type != SET:
            if self.type == "categorical" and self.taxonomy is None:
                raise SpecError(f"{where}: a categorical qid needs a taxonomy file")
            if self.type == "numeric" and self.taxonomy is not None:
                raise SpecError(f"{where}: a numeric qid takes domain = [min, max], no taxonomy")
            if self.domain is not None:
                lo, hi = self.domain
                if self.type != "numeric" or not (math.isfinite(lo) and math.isfinite(hi)):
                    raise SpecError(f"{where}: domain = [min, max] only for numeric qids")
                if not lo < hi:
                    raise SpecError(f"{where}: domain needs min < max", value=str(self.domain))
            if self.weight is not None:
                _unit(self.weight, f"{where}: weight")
        elif self.role == "qid":  # type = "set": the codes
            if self.domain is not None:
                raise SpecError(f"{where}: domain = [min, max] only for numeric qids")
            if self.taxonomy is None:
                raise SpecError(
                    f"{where}: a set-valued qid needs a code hierarchy",
                    expected='taxonomy = "file.txt" | "file.csv" (ARX) | "builtin:icd9cm"',
                )
            if not self.separator or any(c in self.separator for c in FORBIDDEN_IN_SEPARATOR):
                raise SpecError(
                    f"{where}: bad separator",
                    value=self.separator,
                    expected="a non-empty string without quotes, commas, spaces or parentheses",
                )
        elif self.type is not None or self.taxonomy is not None or self.domain is not None:
            raise SpecError(f"{where}: type / taxonomy / domain only apply to qids")
        if not self.is_demographic and self.weight is not None:
            raise SpecError(f"{where}: weight only applies to numeric and categorical qids")

    @property
    def is_set(self) -> bool:
        """The set-valued qid (the codes)."""
        return self.role == "qid" and self.type == SET

    @property
    def is_demographic(self) -> bool:
        return self.role == "qid" and self.type != SET


@dataclass(frozen=True)
class KkmSpec:
    privacy: KkmPrivacy
    attributes: tuple[KkmAttribute, ...]
    relax: Relax | None = None
    tuning: Tuning = Tuning()
    source: str = "<spec>"
    qids: tuple[KkmAttribute, ...] = field(init=False)
    set_attr: KkmAttribute = field(init=False)
    weights: tuple[float, ...] = field(init=False)

    def __post_init__(self) -> None:
        names = [a.name for a in self.attributes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SpecError("attribute declared twice", file=self.source, value=dup[0])
        qids = tuple(a for a in self.attributes if a.is_demographic)
        sets = [a for a in self.attributes if a.is_set]
        if not qids:
            raise SpecError("no numeric or categorical qid (the demographics)", file=self.source)
        if len(sets) != 1:
            raise SpecError(
                "a kkm spec needs exactly one set-valued qid (role = 'qid', type = 'set'), "
                f"found {len(sets)}",
                file=self.source,
            )
        given = [a.weight for a in qids]
        if all(w is None for w in given):
            weights = tuple(1.0 / len(qids) for _ in qids)
        elif any(w is None for w in given):
            raise SpecError(
                "give a weight to every qid or to none (default 1/number of qids)",
                file=self.source,
            )
        else:
            weights = tuple(float(w) for w in given if w is not None)
            if sum(weights) > 1.0 + 1e-9:
                raise SpecError(
                    "the qid weights add up to more than 1",
                    file=self.source,
                    value=f"{sum(weights):g}",
                )
        if self.relax is not None and (
            self.relax.max_delta < self.privacy.delta
            or self.relax.max_epsilon_suppress < self.privacy.epsilon_suppress
        ):
            raise SpecError(
                "[relax] limits must not be below delta / epsilon_suppress", file=self.source
            )
        object.__setattr__(self, "qids", qids)
        object.__setattr__(self, "set_attr", sets[0])
        object.__setattr__(self, "weights", weights)


def _unit(val: object, where: str) -> None:
    ok = isinstance(val, int | float) and not isinstance(val, bool)
    if not ok or not 0.0 <= float(val) <= 1.0:  # type: ignore[arg-type]
        raise SpecError(f"{where} must be a number in [0, 1]", value=str(val))


def is_kkm_text(text: str) -> bool:
    """True when a TOML text declares ``[privacy] model = "kkm"`` (False if it is not TOML);
    the one sniffer, :mod:`fedanon.model.peek` (a BOM is skipped)."""
    return text_model(text) == MODEL


def is_kkm_spec(path: Path) -> bool:
    """True when the spec file at ``path`` is a kkm spec (False if unreadable: the caller's
    own reader then reports the problem)."""
    return spec_model(path) == MODEL


def parse_kkm_spec(text: str, source: str = "<spec>") -> KkmSpec:
    try:
        doc = tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"not valid TOML: {exc}", file=source) from exc
    check_keys(doc, {"privacy", "relax", "algorithm", "attribute"}, "top level", source, SpecError)
    priv = doc.get("privacy")
    if not isinstance(priv, dict) or priv.get("model") != MODEL:
        raise SpecError("not a kkm spec", file=source, expected='[privacy] model = "kkm"')
    check_keys(
        priv,
        {"model", "k", "m", "delta", "epsilon_suppress", "constraints"},
        "privacy",
        source,
        SpecError,
    )
    for key in ("k", "m", "delta", "epsilon_suppress"):
        if key not in priv:
            raise SpecError(f"[privacy] needs {key}", file=source)
    try:
        privacy = KkmPrivacy(
            k=priv["k"],
            m=priv["m"],
            delta=priv["delta"],
            epsilon_suppress=priv["epsilon_suppress"],
            constraints=_opt_str(priv, "constraints", source),
        )
        relax = None
        if "relax" in doc:
            rel = _dict(doc["relax"], "relax", source)
            check_keys(rel, {"max_delta", "max_epsilon_suppress"}, "relax", source, SpecError)
            relax = Relax(
                max_delta=rel.get("max_delta", 1.0),
                max_epsilon_suppress=rel.get("max_epsilon_suppress", 1.0),
            )
        alg = _dict(doc.get("algorithm", {}), "algorithm", source)
        check_keys(alg, {"window", "neighbours"}, "algorithm", source, SpecError)
        tuning = Tuning(**alg)
        raw = doc.get("attribute")
        if not isinstance(raw, list) or not raw:
            raise SpecError("the spec declares no [[attribute]]", file=source)
        attrs = tuple(_attribute(r, i, source) for i, r in enumerate(raw, 1))
        return KkmSpec(privacy, attrs, relax, tuning, source)
    except SpecError as exc:
        if exc.file is not None:
            raise
        raise SpecError(
            exc.message, file=source, column=exc.column, value=exc.value, expected=exc.expected
        ) from exc


def _attribute(raw: Any, index: int, source: str) -> KkmAttribute:
    keys = {"name", "role", "type", "taxonomy", "domain", "weight", "separator"}
    if not isinstance(raw, dict) or "name" not in raw or "role" not in raw:
        raise SpecError(f"[[attribute]] #{index} needs name and role", file=source)
    check_keys(raw, keys, f"attribute {raw['name']!r}", source, SpecError)
    domain = raw.get("domain")
    if domain is not None:
        if (
            not isinstance(domain, list)
            or len(domain) != 2
            or not all(isinstance(d, int | float) and not isinstance(d, bool) for d in domain)
        ):
            raise SpecError(
                f"attribute {raw['name']!r}: domain must be [min, max]",
                file=source,
                value=str(domain),
            )
        domain = (float(domain[0]), float(domain[1]))
    for key in ("type", "taxonomy", "separator"):
        if key in raw and not isinstance(raw[key], str):
            raise SpecError(f"attribute {raw['name']!r}: {key} must be a string", file=source)
    weight = raw.get("weight")
    role, type_ = role_and_type(raw, f"attribute {raw['name']!r}", source)
    return KkmAttribute(
        name=str(raw["name"]),
        role=str(role),
        type=type_,
        taxonomy=raw.get("taxonomy"),
        domain=domain,
        weight=weight,
        separator=raw.get("separator", "|"),
    )


def _dict(val: Any, key: str, source: str) -> dict[str, Any]:
    if not isinstance(val, dict):
        raise SpecError(f"[{key}] must be a table", file=source)
    return val


def _opt_str(table: dict[str, Any], key: str, source: str) -> str | None:
    val = table.get(key)
    if val is not None and (not isinstance(val, str) or not val):
        raise SpecError(f"{key} must be a file name", file=source, value=str(val))
    return val


def load_kkm_spec(path: Path) -> tuple[KkmSpec, Callable[[str], bytes]]:
    """Read a spec file; returns the spec and a reader (bytes) for the files it names,
    relative to the spec's folder."""
    text = read_config(path, "spec", SpecError)
    base = path.parent

    def reader(rel: str) -> bytes:
        try:
            return (base / rel).read_bytes()
        except OSError as exc:
            raise SpecError(
                f"cannot read a file the spec names: {exc.strerror}", file=str(path), value=rel
            ) from exc

    return parse_kkm_spec(text, str(path)), reader
