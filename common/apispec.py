"""The run spec as Python objects: :class:`Spec`, :class:`Attribute`, :class:`LKC` and
:class:`Privacy` (any registered model), validated on construction exactly as a spec file is
(see :mod:`fedanon.api` for how they are used)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, cast

from fedanon.errors import SpecError
from fedanon.methods import registry
from fedanon.methods.base import Method
from fedanon.model.peek import privacy_model_of
from fedanon.model.privacy import default_score
from fedanon.model.spec import AttributeSpec, RunSpec, load_spec, parse_privacy
from fedanon.model.spec import Privacy as SpecPrivacy

Role = Literal["identifier", "qid", "class", "sensitive", "other"]
Score = str  # a registered utility score: "infogain", "discernibility", "max", or a plug-in's
PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class LKC:
    """LKC-privacy: an adversary knowing at most ``L`` QID values of a patient finds at least
    ``K`` records and infers each of ``sensitive_values`` with confidence at most ``C``."""

    L: int
    K: int
    C: float
    sensitive_values: Sequence[str] = ()
    allow_absent_sensitive: bool = False  # a listed sensitive value may be absent from the data

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitive_values", tuple(self.sensitive_values))
        self.to_privacy()  # validates

    def to_privacy(self) -> SpecPrivacy:
        return SpecPrivacy.lkc(
            L=self.L,
            K=self.K,
            C=float(self.C) if isinstance(self.C, int | float) else self.C,
            sensitive_values=tuple(self.sensitive_values),
            allow_absent_sensitive=self.allow_absent_sensitive,
        )


class Privacy:
    """Any registered privacy model by name, with its own ``[privacy]`` keys (validated as
    in a spec file: an unknown key is an error naming the allowed ones)::

        Privacy("kanon", K=5)
        Privacy("lkc", L=4, K=20, C=0.2, sensitive_values=[">50K"])
    """

    __slots__ = ("_privacy", "model", "params")

    def __init__(self, model: str = "lkc", **params: Any) -> None:
        keys = {k: list(v) if isinstance(v, tuple) else _plain(v) for k, v in params.items()}
        self._privacy = parse_privacy({"model": model, **keys}, "<Privacy>")
        self.model = model
        self.params: dict[str, Any] = dict(params)

    @classmethod
    def of(cls, privacy: SpecPrivacy) -> Privacy:
        """The API object of a parsed spec's privacy model."""
        params = cast(Any, privacy.params)  # a frozen dataclass (fedanon.privacy.params)
        return cls(privacy.model, **{f.name: getattr(params, f.name) for f in fields(params)})

    def to_privacy(self) -> SpecPrivacy:
        return self._privacy

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Privacy) and self._privacy == other._privacy

    def __hash__(self) -> int:
        return hash(self._privacy)

    def __repr__(self) -> str:
        args = "".join(f", {k}={v!r}" for k, v in self.params.items())
        return f"Privacy({self.model!r}{args})"


def _plain(value: Any) -> Any:
    """An exact epsilon (DiffGen) as the float a spec file holds (its repr is the decimal)."""
    return float(value) if isinstance(value, Fraction) else value


@dataclass(frozen=True)
class Attribute:
    """One column, as an ``[[attribute]]`` table of the spec file.

    A categorical QID (and optionally a numeric one) has a taxonomy: ``taxonomy`` is a file
    (relative paths are resolved against :attr:`Spec.base_dir`; ARX hierarchy when it ends
    in ``.csv``, else the native indented format), or ``taxonomy_text`` the taxonomy itself
    (``taxonomy_format`` "native" or "arx").  A numeric QID without one is split at run time
    on multiples of ``step`` inside ``domain`` = [min, max).
    """

    name: str
    role: Role
    type: Literal["categorical", "numeric"] | None = None
    taxonomy: PathLike | None = None
    taxonomy_text: str | None = None
    taxonomy_format: Literal["native", "arx"] = "native"
    domain: tuple[float, float] | None = None
    step: float | None = None
    values: Sequence[str] | None = None

    def __post_init__(self) -> None:
        if self.values is not None:
            object.__setattr__(self, "values", tuple(self.values))
        if self.taxonomy is not None and self.taxonomy_text is not None:
            raise SpecError(
                f"attribute {self.name!r}: give taxonomy (a file) or taxonomy_text, not both"
            )
        if self.taxonomy_format not in ("native", "arx"):
            raise SpecError(
                f"attribute {self.name!r}: unknown taxonomy_format",
                value=str(self.taxonomy_format),
                expected="native | arx",
            )
        self.to_attribute_spec()  # validates

    @property
    def taxonomy_key(self) -> str | None:
        """The name the run knows the taxonomy by (a path, or a label for in-memory text)."""
        if self.taxonomy is not None:
            return os.fspath(self.taxonomy)
        if self.taxonomy_text is not None:
            suffix = ".csv" if self.taxonomy_format == "arx" else ""
            return f"<taxonomy of {self.name}, in memory>{suffix}"
        return None

    def to_attribute_spec(self) -> AttributeSpec:
        d = self.domain
        return AttributeSpec(
            name=self.name,
            role=self.role,
            type=self.type,
            taxonomy=self.taxonomy_key,
            domain=None if d is None else (float(d[0]), float(d[1])),
            step=None if self.step is None else float(self.step),
            values=None if self.values is None else tuple(self.values),
        )


@dataclass(frozen=True)
class Spec:
    """A validated run spec (the typed face of :class:`fedanon.model.spec.RunSpec`): LKC, or
    any registered model via :class:`Privacy`; ``score`` any registered score name (None:
    the model's default, "max" for ``"dp"``, else "infogain")."""

    privacy: LKC | Privacy
    attributes: Sequence[Attribute]
    score: Score | None = None
    base_dir: PathLike | None = None  # relative taxonomy files; None: the current directory
    source: str = "<Spec>"  # named in error messages
    run_spec: RunSpec = field(init=False, repr=False, compare=False)
    _reader: Callable[[str], str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", tuple(self.attributes))
        privacy = self.privacy.to_privacy()
        if self.score is None:
            object.__setattr__(self, "score", default_score(privacy.model))
        run_spec = RunSpec(
            privacy=privacy,
            score=str(self.score),
            attributes=tuple(a.to_attribute_spec() for a in self.attributes),
            source=self.source,
        )
        object.__setattr__(self, "run_spec", run_spec)
        registry.get(privacy.model).check_spec(run_spec)  # DiffGen: its score, class values

    @property
    def method(self) -> Method:
        """The spec's method (:mod:`fedanon.methods.registry`): its operations run it."""
        return registry.get(self.run_spec.privacy.model)

    @classmethod
    def from_toml(cls, path: PathLike) -> Spec:
        """Load a spec file, exactly as ``fedanon anonymize --spec`` does (the registered
        models: LKC, DiffGen ``"dp"`` and plug-ins; ``model = "kkm"`` runs from the command
        line)."""
        p = Path(path)
        model = privacy_model_of(p)
        if not registry.get(model).capabilities.python_api:
            raise SpecError(
                f"the Python API runs LKC and registered models; model = {model!r} runs with "
                "`fedanon`",
                file=str(p),
                value=model,
            )
        run_spec, reader = load_spec(p)
        p_ = run_spec.privacy
        attributes = [
            Attribute(
                name=a.name,
                role=a.role,  # type: ignore[arg-type]  # validated by load_spec
                type=a.type,  # type: ignore[arg-type]
                taxonomy=a.taxonomy,
                domain=a.domain,
                step=a.step,
                values=a.values,
            )
            for a in run_spec.attributes
        ]
        privacy = (
            LKC(p_.L, p_.K, p_.C, p_.sensitive_values, p_.allow_absent_sensitive)
            if p_.model == registry.LKC
            else Privacy.of(p_)
        )
        return cls(
            privacy=privacy,
            attributes=attributes,
            score=run_spec.score,
            base_dir=p.parent,
            source=str(p),
            _reader=reader,
        )

    def taxonomy_reader(self) -> Callable[[str], str]:
        """What :func:`fedanon.io.table.build_schema` reads taxonomies with."""
        if self._reader is not None:
            return self._reader
        texts = {
            a.taxonomy_key: a.taxonomy_text
            for a in self.attributes
            if a.taxonomy_text is not None and a.taxonomy_key is not None
        }
        base = Path(self.base_dir) if self.base_dir is not None else Path.cwd()
        source = self.source

        def reader(rel: str) -> str:
            if rel in texts:
                return texts[rel]
            try:
                return (base / rel).read_text(encoding="utf-8-sig")
            except OSError as exc:
                raise SpecError(
                    f"cannot read taxonomy file: {exc.strerror}", file=source, value=rel
                ) from exc
            except UnicodeDecodeError as exc:
                raise SpecError("taxonomy file is not UTF-8 text", file=str(base / rel)) from exc

        return reader
