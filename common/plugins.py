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
import logging
from importlib.metadata import EntryPoint, entry_points

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
