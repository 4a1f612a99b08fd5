"""The run spec: a TOML file that declares every column, the privacy model and the score.

Parsing is separate from file access so that a party can validate a spec the leader sent it
(`parse_spec` on text, taxonomy files resolved through a reader function).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedanon.errors import SpecError
from fedanon.model.attributes import (
    NOT_RELEASED,
    ROLES,
    SET,
    TYPES,
    role_and_type,
    unknown_type,
)
from fedanon.model.privacy import Privacy, _ok, _typed, default_score, parse_privacy
from fedanon.model.registry import (
    score_implementation,
    score_known,
    score_names,
    score_needs_class,
)
from fedanon.model.tomlcfg import parse_toml, read_config, section

__all__ = ["AttributeSpec", "Privacy", "RunSpec", "load_spec", "parse_privacy", "parse_spec"]

__all__ += ["ROLES", "TYPES"]
MAX_BINS = 65_536  # admissible bins of a dynamically split numeric attribute


@dataclass(frozen=True)
class AttributeSpec:
    """One declared column."""

    name: str
    role: str
    type: str | None = None
    taxonomy: str | None = None
    domain: tuple[float, float] | None = None
    step: float | None = None
    values: tuple[str, ...] | None = None
    separator: str | None = None  # type = "set": the items' separator in a cell (default "|")

    def __post_init__(self) -> None:
        where = f"attribute {self.name!r}"
        if self.role not in ROLES:
            raise SpecError(f"{where}: unknown role", value=self.role, expected=" | ".join(ROLES))
        if self.role == "qid":
            if self.type not in TYPES:
                raise unknown_type(where, self.type)
            if self.type == SET and self.taxonomy is None:
                raise SpecError(f"{where}: a set-valued qid needs an item taxonomy")
            if self.type == "categorical" and self.taxonomy is None:
                raise SpecError(f"{where}: a categorical qid needs a taxonomy file")
            if self.type == "numeric":
                if self.domain is None:
                    raise SpecError(f"{where}: a numeric qid needs domain = [min, max)")
                lo, hi = self.domain
                if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                    raise SpecError(
                        f"{where}: domain must be [min, max)",
                        value=f"[{lo:g}, {hi:g}]",
                        expected="two finite numbers min < max, e.g. domain = [0, 100]",
                    )
                if self.taxonomy is None:
                    step = self.step if self.step is not None else 1.0
                    if not (step > 0 and math.isfinite(step)):
                        raise SpecError(f"{where}: step must be > 0", value=str(self.step))
                    bins = math.ceil((hi - lo) / step)
                    if bins > MAX_BINS:
                        raise SpecError(
                            f"{where}: {bins} admissible split points are too many",
                            value=str(step),
                            expected=f"a step of at least {(hi - lo) / MAX_BINS:g} "
                            f"(at most {MAX_BINS} bins)",
                        )
        elif self.type is not None or self.taxonomy is not None or self.domain is not None:
            raise SpecError(f"{where}: type/taxonomy/domain only apply to role = 'qid'")
        if self.separator is not None and not (self.role == "qid" and self.type == SET):
            raise SpecError(f"{where}: separator only applies to type = 'set'")
        if self.step is not None and not (self.role == "qid" and self.dynamic):
            raise SpecError(
                f"{where}: step only applies to a numeric qid without a taxonomy file "
                "(with a taxonomy, its intervals are the split points)",
                value=str(self.step),
            )
        if not self.name:
            raise SpecError("an attribute needs a non-empty name")
        if self.values is not None:
            if self.role not in ("class", "sensitive", "other"):
                raise SpecError(f"{where}: values only apply to class, sensitive and other columns")
            if not self.values or len(set(self.values)) != len(self.values):
                raise SpecError(f"{where}: values must be a non-empty list without duplicates")

    @property
    def dynamic(self) -> bool:
        """A numeric QID whose taxonomy is grown at run time by binary splits."""
        return self.type == "numeric" and self.taxonomy is None

    @property
    def bin_step(self) -> float:
        return self.step if self.step is not None else 1.0


@dataclass(frozen=True)
class RunSpec:
    privacy: Privacy
    score: str
    attributes: tuple[AttributeSpec, ...]
    source: str = "<spec>"
    set_valued: bool = field(default=False, compare=False)  # the method reads type = "set"
    qids: tuple[AttributeSpec, ...] = field(init=False)
    class_attr: AttributeSpec | None = field(init=False)
    sensitive_attr: AttributeSpec | None = field(init=False)
    provider_attr: AttributeSpec | None = field(init=False)  # m-privacy's record owner

    def __post_init__(self) -> None:
        if not score_known(self.score):
            raise SpecError(
                "unknown score",
                file=self.source,
                value=self.score,
                expected=" | ".join(score_names()),
            )
        names = [a.name for a in self.attributes]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise SpecError("attribute declared twice", file=self.source, value=sorted(dup)[0])
        qids = tuple(a for a in self.attributes if a.role == "qid")
        for a in qids:
            if a.type == SET and not self.set_valued:
                raise set_not_read(f"attribute {a.name!r}", self.source)
        if not qids:
            raise SpecError("no attribute has role = 'qid'", file=self.source)
        object.__setattr__(self, "qids", qids)
        object.__setattr__(self, "class_attr", _single(self, "class"))
        object.__setattr__(self, "sensitive_attr", _single(self, "sensitive"))
        object.__setattr__(self, "provider_attr", _single(self, "provider"))
        if score_needs_class(self.score) and self.class_attr is None:
            raise SpecError(
                f"score = {self.score!r} needs an attribute with role = 'class'", file=self.source
            )
        if self.privacy.sensitive_values and self.sensitive_attr is None:
            raise SpecError(
                "sensitive_values given but no attribute has role = 'sensitive'", file=self.source
            )
        sens = self.sensitive_attr
        if sens is not None and sens.values is not None:
            stray = [v for v in self.privacy.sensitive_values if v not in sens.values]
            if stray:
                raise SpecError(
                    f"sensitive_values {stray} are not among the declared values of "
                    f"{sens.name!r} (compared exactly, case included)",
                    file=self.source,
                    expected=f"values from {list(sens.values)}",
                )

    @property
    def released_attrs(self) -> tuple[AttributeSpec, ...]:
        """The declared columns a release carries (no identifier, no provider column)."""
        return tuple(a for a in self.attributes if a.role not in NOT_RELEASED)

    @property
    def m(self) -> int:
        """m-privacy's largest coalition of providers (0: plain LKC; other models: 0)."""
        return int(getattr(self.privacy.params, "m", 0))

    @property
    def effective_l(self) -> int:
        return min(self.privacy.L, len(self.qids))

    def canonical(self) -> dict[str, Any]:
        impl = score_implementation(self.score)
        return {
            "privacy": self.privacy.canonical(),
            "score": self.score,
            **({"score_implementation": impl} if impl is not None else {}),
            "attributes": [
                {k: v for k, v in a.__dict__.items() if v is not None} for a in self.attributes
            ],
        }


def set_not_read(where: str, source: str | None = None) -> SpecError:
    return SpecError(
        f"{where}: a set-valued qid (type = 'set') is not read by the engine of this privacy model",
        file=source,
        value=SET,
        expected="type = 'numeric' | 'categorical' here; set-valued QIDs run with "
        "(k, k^m)-anonymity ([privacy] model = 'kkm') or DiffGen ([privacy] model = 'dp')",
    )


def _single(spec: RunSpec, role: str) -> AttributeSpec | None:
    found = [a for a in spec.attributes if a.role == role]
    if len(found) > 1:
        raise SpecError(f"more than one attribute has role = {role!r}", file=spec.source)
    return found[0] if found else None


BOM = "\ufeff"
ATTRIBUTE_KEYS = {
    "name": "str",
    "role": "str",
    "type": "str",
    "taxonomy": "str",
    "domain": "domain",
    "step": "number",
    "values": "strs",
    "separator": "str",
}


def parse_spec(text: str, source: str = "<spec>", set_valued: bool = False) -> RunSpec:
    """Parse and validate spec text (taxonomy paths stay relative strings); a set-valued
    qid only when ``set_valued`` (the method reads one)."""
    doc = parse_toml(text.removeprefix(BOM), source, error=SpecError)
    unknown = set(doc) - {"privacy", "utility", "attribute"}
    if unknown:
        raise SpecError(
            "unknown section",
            file=source,
            value=sorted(unknown)[0],
            expected="[privacy], [utility], [[attribute]]",
        )
    priv = section(doc, "privacy", source, error=SpecError)
    privacy = parse_privacy(priv, source)
    util = doc.get("utility", {})
    if not isinstance(util, dict):
        raise SpecError("[utility] must be a table", file=source, expected='score = "infogain"')
    if set(util) - {"score"}:
        raise SpecError(
            "[utility] takes only score: unknown key",
            file=source,
            value=sorted(set(util) - {"score"})[0],
            expected="score",
        )
    _typed(util, {"score": "str"}, "utility", source)
    attrs_raw = doc.get("attribute")
    if not isinstance(attrs_raw, list) or not attrs_raw:
        raise SpecError("the spec declares no [[attribute]]", file=source)
    attrs = []
    for i, raw in enumerate(attrs_raw, 1):
        attrs.append(_attribute(raw, i, source, set_valued))
    if priv.get("noise_budget") == "half" and any(a.type == SET for a in attrs):
        # DiffGen over a set-valued qid gives the noise the rest of epsilon (its emptiness
        # tests spend per selection: fedanon.dp.setrun); "half" would be silently ignored
        raise SpecError(
            "noise_budget = 'half' does not apply with a set-valued qid: its final noise "
            "always takes the rest of epsilon",
            file=source,
            column="privacy.noise_budget",
            value="half",
            expected='no noise_budget (or "rest")',
        )
    return RunSpec(
        privacy=privacy,
        score=str(util.get("score", default_score(privacy.model))),
        attributes=tuple(attrs),
        source=source,
        set_valued=set_valued,
    )


def _attribute(raw: Any, index: int, source: str, set_valued: bool = False) -> AttributeSpec:
    if not isinstance(raw, dict) or "name" not in raw or "role" not in raw:
        raise SpecError(f"[[attribute]] #{index} needs name and role", file=source)
    name = raw["name"]
    where = f"attribute {name!r}" if _ok("str", name) else f"attribute #{index}"
    role, type_ = role_and_type(raw, where, source)
    if role == "qid" and type_ == SET and not set_valued:  # before its separator is read
        raise set_not_read(where, source)
    _typed(raw, ATTRIBUTE_KEYS, where, source)
    domain = raw.get("domain")
    values = raw.get("values")
    try:
        return AttributeSpec(
            name=name,
            role=role,
            type=type_,
            taxonomy=raw.get("taxonomy"),
            domain=None if domain is None else (float(domain[0]), float(domain[1])),
            step=float(raw["step"]) if "step" in raw else None,
            values=None if values is None else tuple(values),
            separator=raw.get("separator"),
        )
    except SpecError as exc:
        raise SpecError(exc.message, file=source, value=exc.value, expected=exc.expected) from exc


def load_spec(path: Path, set_valued: bool = False) -> tuple[RunSpec, Callable[[str], str]]:
    """Read a spec file; returns the spec and a reader for the files it references."""
    text = read_config(path, what="spec", error=SpecError)
    return parse_spec(text, str(path), set_valued), file_reader(path)


def file_reader(path: Path) -> Callable[[str], str]:
    """The reader of the taxonomy files a spec file names, relative to its folder."""
    base = path.parent

    def reader(rel: str) -> str:
        target = base / rel
        try:
            return target.read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise SpecError(
                f"cannot read taxonomy file: {exc.strerror}", file=str(path), value=rel
            ) from exc
        except UnicodeDecodeError as exc:
            raise SpecError(
                "taxonomy file is not UTF-8 text", file=str(target), expected="UTF-8 text"
            ) from exc

    return reader


def taxonomy_paths(spec: RunSpec, spec_path: Path) -> list[Path]:
    """The taxonomy files a spec file references (what ``load_spec``'s reader opens)."""
    return [spec_path.parent / a.taxonomy for a in spec.attributes if a.taxonomy is not None]


def run_hash(spec: RunSpec, files: dict[str, str]) -> bytes:
    """What a run is bound to: the parsed spec and the exact taxonomy texts."""
    doc = {"spec": spec.canonical(), "files": dict(sorted(files.items()))}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).digest()
