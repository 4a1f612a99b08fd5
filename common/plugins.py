"""Privacy models and utility scores installed as plug-ins (entry points).

A plug-in package declares its classes in its own ``pyproject.toml``::

    [project.entry-points."fedanon.models"]
    kanon = "mypkg.kanon:KAnonymity"         # [privacy] model = "kanon"
    [project.entry-points."fedanon.scores"]
    maxfreq = "mypkg.maxfreq:MaxFrequency"   # [utility] score = "maxfreq"

Every process that meets a spec -- ``fedanon anonymize``, the Python API, ``fedanon audit``,
the leader and every party daemon -- finds the names in the installed distributions' metadata
and imports a plug-in only when a spec names it; nothing is configured per daemon, and a
daemon cannot run a model its hospital has not installed (the spec is then refused as an
unknown model).  A hospital's ``[policy] allowed_models`` must still list it.  The run hash
binds the plug-in's distribution, version and object (:func:`identity`), so parties running
different implementations under one name refuse to start the run together.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

from fedanon.errors import SpecError
from fedanon.pandasgate import allow_pandas

MODELS = "fedanon.models"
SCORES = "fedanon.scores"

log = logging.getLogger(__name__)


@functools.cache
def installed(group: str) -> dict[str, EntryPoint]:
    """The entry points of ``group`` by name (one object per name; a name two installed
    distributions define differently is left out and reported when a spec names it)."""
    found: dict[str, EntryPoint] = {}
    clashes: set[str] = set()
    for ep in entry_points(group=group):
        seen = found.get(ep.name)
        if seen is not None and seen.value != ep.value:
            clashes.add(ep.name)
        found.setdefault(ep.name, ep)
    for name in clashes:
        found.pop(name)
    _clashes[group] = clashes
    return found


_clashes: dict[str, set[str]] = {}


def names(group: str) -> list[str]:
    """Installed names (a clashing name too: naming it in a spec says why it fails)."""
    return sorted({*installed(group), *_clashes.get(group, set())})


def find(group: str, name: str) -> EntryPoint | None:
    eps = installed(group)
    if name in _clashes.get(group, set()):
        raise SpecError(
            f"two installed plug-ins define {group} {name!r} differently",
            value=name,
            expected="one installed distribution per plug-in name",
        )
    return eps.get(name)


def load(ep: EntryPoint, what: str) -> object:
    """Import the object an entry point names (a plug-in that fails is a spec error)."""
    allow_pandas()  # a plug-in may import pandas, also in a daemon that refuses it to Arrow
    try:
        obj = ep.load()
    except Exception as exc:  # any import failure of third-party code
        raise SpecError(
            f"{what} plug-in {ep.name!r} ({ep.value}) cannot be loaded: {type(exc).__name__}",
            value=ep.name,
        ) from exc
    log.info("%s plug-in %s loaded: %s", what, ep.name, identity(ep))
    return obj


def identity(ep: EntryPoint) -> str:
    """What the run hash binds: distribution, version and object of the plug-in."""
    dist = ep.dist
    return f"{dist.name} {dist.version} {ep.value}" if dist is not None else ep.value


def refresh() -> None:
    """Forget the scanned metadata (after installing a plug-in in a running process)."""
    installed.cache_clear()
    _clashes.clear()


F = TypeVar("F")


class Registry(Generic[F]):
    """Names -> factories of one kind (privacy models, utility scores): built in (``"module:attr"``,
    imported on first use), registered from code (:meth:`register`), or installed as entry points
    of ``group`` (loaded when a spec names them, again when the installed version changes)."""

    def __init__(self, group: str, what: str, builtin: Mapping[str, str]) -> None:
        self.group, self.what, self.builtin = group, what, builtin
        self._registered: dict[str, F] = {}
        self._loaded: dict[str, tuple[str, F]] = {}  # entry point name -> (identity, object)

    def register(self, name: str, factory: F) -> None:
        """Make the spec's ``name`` select ``factory``; a taken name is an error."""
        taken = self._registered.get(name, factory) is not factory
        if name in self.builtin or taken:
            raise ValueError(f"a {self.what} named {name!r} is already registered")
        self._registered[name] = factory

    def names(self) -> list[str]:
        """Built-in, registered and installed names."""
        extra = {*self._registered, *names(self.group)} - set(self.builtin)
        return [*self.builtin, *sorted(extra)]

    def knows(self, name: str) -> bool:
        """Whether a spec may name ``name``.  A built-in or registered name is answered
        without scanning the installed distributions' metadata (~20 ms the first time in a
        process: the leader, every daemon and every CLI run would pay it for ``lkc``)."""
        if name in self.builtin or name in self._registered:
            return True
        return name in names(self.group)

    def factory(self, name: str) -> F:
        """The factory under ``name`` (KeyError when none)."""
        if name in self.builtin:
            module, _, attr = self.builtin[name].partition(":")
            built: F = getattr(importlib.import_module(module), attr)
            return built
        if name in self._registered:
            return self._registered[name]
        ep = find(self.group, name)
        if ep is None:
            raise KeyError(name)
        ident = identity(ep)
        if name not in self._loaded or self._loaded[name][0] != ident:
            loaded: F = load(ep, self.what)  # type: ignore[assignment]
            self._loaded[name] = (ident, loaded)
        return self._loaded[name][1]

    def implementation(self, name: str) -> str | None:
        """What a run binds for a name that is not built in: the plug-in's distribution,
        version and object, or the registered object's module and name (None: built in)."""
        if name in self.builtin:
            return None
        if name not in self._registered:
            ep = find(self.group, name)
            if ep is None:
                raise KeyError(name)
            return identity(ep)
        factory = self._registered[name]
        return f"{getattr(factory, '__module__', '?')}:{getattr(factory, '__qualname__', '?')}"
