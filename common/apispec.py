"""The one spec type, :class:`Spec` (``fedanon.Spec``): the common attributes (one
attribute model, :class:`Attribute`) and the method's own parameter section -- :class:`LKC`,
:class:`Privacy` (any registered model of the engine: a plug-in, DiffGen ``"dp"``) or
:class:`fedanon.kkm.section.Kkm` -- validated on construction exactly as a spec file is.  Every
entry point (the Python API, the commands, a hospital's Prepare, the leader) parses a spec
through :meth:`Spec.from_toml` / :meth:`Spec.from_text`: the method is found by the registry
(:mod:`fedanon.methods.registry`) and derives its view (:attr:`Spec.view`: the engine's
:class:`~fedanon.model.spec.RunSpec`, or (k, k^m)'s ``KkmSpec``) from the one spec."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

from fedanon.apivalues import is_number, plain, strings
from fedanon.errors import SpecError
from fedanon.methods import registry
from fedanon.methods.base import Method
from fedanon.model.attributes import ROLES, SET, TYPES, unknown_type
from fedanon.model.params import LKCParams
from fedanon.model.peek import DEFAULT_MODEL, text_model
from fedanon.model.spec import AttributeSpec, RunSpec, file_reader, parse_privacy
from fedanon.model.spec import Privacy as SpecPrivacy
from fedanon.model.tomlcfg import read_config

Role = Literal["identifier", "qid", "class", "sensitive", "other", "provider"]
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
    m: int = 0  # m-privacy: coalitions of at most m providers (0: plain LKC)
    model: ClassVar[str] = DEFAULT_MODEL

    def __post_init__(self) -> None:
        for name in ("L", "K", "C", "m", "allow_absent_sensitive"):  # numpy scalars: as Python's
            object.__setattr__(self, name, plain(getattr(self, name)))
        values = strings(
            self.sensitive_values, "sensitive_values", column="privacy.sensitive_values"
        )
        object.__setattr__(self, "sensitive_values", values)
        self.to_privacy()  # validates

    def to_privacy(self) -> SpecPrivacy:
        C = float(self.C) if isinstance(self.C, int | float) else self.C
        sv = tuple(self.sensitive_values)
        return SpecPrivacy(LKCParams(self.L, self.K, C, sv, self.allow_absent_sensitive, self.m))


class Privacy:
    """Any registered privacy model by name, with its own ``[privacy]`` keys (validated as
    in a spec file: an unknown key is an error naming the allowed ones)::

        Privacy("kanon", K=5)
        Privacy("lkc", L=4, K=20, C=0.2, sensitive_values=[">50K"])
    """

    __slots__ = ("_privacy", "model", "params")

    def __init__(self, model: str = "lkc", **params: Any) -> None:
        keys = {k: plain(v) for k, v in params.items()}
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
    type: Literal["categorical", "numeric", "set"] | None = None
    taxonomy: PathLike | None = None
    taxonomy_text: str | None = None
    taxonomy_format: Literal["native", "arx"] = "native"
    domain: tuple[float, float] | None = None
    step: float | None = None
    values: Sequence[str] | None = None
    separator: str | None = None  # type = "set": the items' separator in a cell ("|")
    weight: float | None = None  # (k, k^m): the qid's share of NCP (default 1/number of qids)

    def __post_init__(self) -> None:
        """What every method's attribute obeys (the method's view checks the rest)."""
        if not self.name:
            raise SpecError("an attribute needs a non-empty name")
        if not isinstance(self.name, str):
            raise SpecError(
                "an attribute's name must be a string (the column name as the data's header"
                " writes it)",
                value=repr(self.name),
                expected=repr(str(self.name)),
            )
        where = f"attribute {self.name!r}"
        if self.values is not None:
            object.__setattr__(self, "values", strings(self.values, "values", where=where))
        self._check_types(where)
        if self.role not in ROLES:
            raise SpecError(f"{where}: unknown role", value=self.role, expected=" | ".join(ROLES))
        if self.role == "qid" and self.type not in TYPES:
            raise unknown_type(where, self.type)
        has_taxonomy = self.taxonomy is not None or self.taxonomy_text is not None
        if self.role != "qid" and (has_taxonomy or (self.type, self.domain) != (None, None)):
            raise SpecError(f"{where}: type/taxonomy/domain only apply to role = 'qid'")
        if self.type == "categorical" and not has_taxonomy:
            raise SpecError(f"{where}: a categorical qid needs a taxonomy file")
        if self.type == SET and not has_taxonomy:
            raise SpecError(f"{where}: a set-valued qid needs an item taxonomy")
        if self.separator is not None and self.type != SET:
            raise SpecError(f"{where}: separator only applies to type = 'set'")
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

    def _check_types(self, where: str) -> None:
        """The fields' Python types (a spec file's TOML kinds), before anything reads them."""
        if self.taxonomy is not None and not isinstance(self.taxonomy, str | os.PathLike):
            raise SpecError(
                f"{where}: taxonomy must be a file name (str or Path)",
                value=type(self.taxonomy).__name__,
                expected="a path, or taxonomy_text= holding the taxonomy itself",
            )
        if isinstance(self.taxonomy, str) and "\n" in self.taxonomy:  # the text, not a name
            raise SpecError(
                f"{where}: taxonomy is a file name, and this holds line breaks: the taxonomy "
                "itself?",
                value=self.taxonomy.split("\n", 1)[0][:40],
                expected="taxonomy_text= for the taxonomy's text, taxonomy= for its file",
            )
        if self.taxonomy_text is not None and not isinstance(self.taxonomy_text, str):
            raise SpecError(
                f"{where}: taxonomy_text must be the taxonomy as a str",
                value=type(self.taxonomy_text).__name__,
                expected="one label per line, children indented below their parent",
            )
        if self.domain is not None:
            d = self.domain
            if (
                isinstance(d, str | bytes)
                or not isinstance(d, Sequence)
                or len(d) != 2
                or not all(is_number(v) for v in d)
            ):
                raise SpecError(
                    f"{where}: domain must be (min, max): two numbers",
                    value=repr(d),
                    expected="e.g. domain=(1, 99)",
                )
        for key in ("step", "weight"):
            v = getattr(self, key)
            if v is not None and not is_number(v):
                raise SpecError(f"{where}: {key} must be a number", value=repr(v))
        if self.separator is not None and not isinstance(self.separator, str):
            raise SpecError(f"{where}: separator must be a str", value=repr(self.separator))

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
            separator=self.separator,
        )


@dataclass(frozen=True)
class Spec:
    """A validated run spec of any method: ``privacy`` is the method's parameter section
    (:class:`LKC`; :class:`Privacy` for any registered model of the engine, DiffGen ``"dp"``
    included; :class:`fedanon.kkm.section.Kkm`), ``attributes`` the columns, ``score`` any
    registered score name (None: the method's default, "max" for ``"dp"``, else "infogain";
    (k, k^m) has none).  :attr:`view` is what the method derives and runs on."""

    privacy: LKC | Privacy | Any
    attributes: Sequence[Attribute]
    score: Score | None = None
    base_dir: PathLike | None = None  # relative taxonomy files; None: the current directory
    source: str = "<Spec>"  # named in error messages
    view: Any = field(init=False, repr=False, compare=False)
    _reader: Callable[[str], str] | None = field(default=None, repr=False, compare=False)
    file: Path | None = field(default=None, repr=False, compare=False)  # from_toml's file

    def __post_init__(self) -> None:
        if not isinstance(getattr(self.privacy, "model", None), str):
            raise SpecError(
                "privacy must be a method's section: fedanon.LKC(L=..., K=..., C=...), "
                "fedanon.Privacy(model, ...) or fedanon.kkm.section.Kkm(...)",
                file=self.source,
                value=type(self.privacy).__name__,
            )
        if isinstance(self.attributes, str | bytes) or not isinstance(self.attributes, Iterable):
            raise SpecError(
                "attributes must be a list of fedanon.Attribute",
                file=self.source,
                value=type(self.attributes).__name__,
            )
        object.__setattr__(self, "attributes", tuple(self.attributes))
        for a in self.attributes:
            if not isinstance(a, Attribute):
                raise SpecError(
                    "attributes must be a list of fedanon.Attribute"
                    + (": Attribute(**item) for a dict" if isinstance(a, dict) else ""),
                    file=self.source,
                    value=f"a {type(a).__name__}: {a!r}"[:120],
                )
        method = self.method
        if self.score is None:
            object.__setattr__(self, "score", method.default_score(self.privacy.model))
        object.__setattr__(self, "view", method.spec_view(self))  # validates (SpecError)

    @property
    def method(self) -> Method:
        """The spec's method (:mod:`fedanon.methods.registry`): its operations run it."""
        return registry.get(self.privacy.model)

    @property
    def run_spec(self) -> RunSpec:
        """The engine's view (LKC family, DiffGen); SpecError for a method with its own."""
        if not isinstance(self.view, RunSpec):
            raise SpecError(
                f"{self.method.title} does not run on the engine's run spec",
                file=self.source,
                value=self.privacy.model,
            )
        return self.view

    @classmethod
    def from_toml(cls, path: PathLike) -> Spec:
        """Load a spec file of any method, exactly as ``fedanon anonymize --spec`` does (a
        UTF-8 byte order mark is skipped)."""
        if isinstance(path, str) and "\n" in path:
            raise SpecError(
                "Spec.from_toml takes the spec file's name, not its text",
                expected="Spec.from_text(text, base_dir=...) for TOML text",
            )
        p = Path(path)
        text = read_config(p, what="spec", error=SpecError)
        spec = cls.from_text(text, str(p), base_dir=p.parent, _reader=file_reader(p))
        object.__setattr__(spec, "file", p)
        return spec

    @classmethod
    def from_text(
        cls,
        text: str,
        source: str = "<spec>",
        base_dir: PathLike | None = None,
        _reader: Callable[[str], str] | None = None,
    ) -> Spec:
        """Parse spec text of any method (what a hospital receives): ``[privacy] model``
        names the method (the one BOM-safe sniffer, :mod:`fedanon.model.peek`), which parses
        its own section; ``source`` is named in errors, relative taxonomy files are read
        from ``base_dir`` (None: the current directory)."""
        if not isinstance(text, str):
            raise SpecError(
                "Spec.from_text takes the spec's TOML text as a str",
                file=source,
                value=type(text).__name__,
                expected="bytes decoded first (data.decode('utf-8')), or Spec.from_toml(path)",
            )
        method = registry.get(text_model(text))
        view = method.parse_view(text, source)
        section, attrs, score = method.spec_parts(view)
        if section is None:  # the engine's [privacy]: LKC, a plug-in or DiffGen
            p_ = view.privacy
            params = p_.params
            section = (
                LKC(p_.L, p_.K, p_.C, p_.sensitive_values, p_.allow_absent_sensitive, params.m)
                if isinstance(params, LKCParams) and p_.model == DEFAULT_MODEL
                else Privacy.of(p_)
            )
        return cls(
            privacy=section,
            attributes=[Attribute(**a) for a in attrs],
            score=score,
            base_dir=base_dir,
            source=source,
            _reader=_reader,
        )

    def file_bytes_reader(self) -> Callable[[str], bytes]:
        """The files the spec names as bytes (a method reading them itself: (k, k^m)'s
        hierarchies and constraints), relative to :attr:`base_dir`."""
        texts = self._texts()
        base = Path(self.base_dir) if self.base_dir is not None else Path.cwd()
        source = self.source

        def reader(rel: str) -> bytes:
            if rel in texts:
                return texts[rel].encode("utf-8")
            try:
                return (base / rel).read_bytes()
            except OSError as exc:
                raise SpecError(
                    f"cannot read a file the spec names: {exc.strerror}", file=source, value=rel
                ) from exc

        return reader

    def input_files(self) -> list[Path]:
        """The files a run of this spec reads besides its data (an output never overwrites
        them): the spec file and the taxonomy files it names."""
        base = Path(self.base_dir) if self.base_dir is not None else Path.cwd()
        named = [base / a.taxonomy for a in self.attributes if a.taxonomy is not None]
        return ([] if self.file is None else [self.file]) + named

    def _texts(self) -> dict[str, str]:
        return {
            a.taxonomy_key: a.taxonomy_text
            for a in self.attributes
            if a.taxonomy_text is not None and a.taxonomy_key is not None
        }

    def taxonomy_reader(self) -> Callable[[str], str]:
        """What :func:`fedanon.io.table.build_schema` reads taxonomies with."""
        if self._reader is not None:
            return self._reader
        texts = self._texts()
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
