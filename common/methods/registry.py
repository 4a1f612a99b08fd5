"""The one place that knows the methods by name.

``[privacy] model`` of a spec names a method: the built-in ones map to ``"module:attr"``
strings imported on first use; any other name is a privacy model of the LKC family (a plug-in
registered in :mod:`fedanon.model.registry` / :mod:`fedanon.plugins`, run by the LKC engine,
whose spec reader reports an unknown name).  The spec is sniffed by one BOM-safe reader,
:mod:`fedanon.model.peek`, everywhere.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

from fedanon.errors import InputError
from fedanon.methods.base import Method
from fedanon.model.peek import DEFAULT_MODEL, spec_model

LKC = DEFAULT_MODEL  # [privacy] without model
BUILTIN: dict[str, str] = {
    LKC: "fedanon.lkc.method:METHOD",
    "dp": "fedanon.dp.method:METHOD",
    "kkm": "fedanon.kkm.method:METHOD",
}
# the prefixed commands of earlier releases -> the method that spells them anew
DEPRECATED: dict[str, str] = {
    "dp-anonymize": "dp",
    "dp-experiment": "dp",
    "kkm-audit": "kkm",
    "kkm-evaluate": "kkm",
    "kkm-experiment": "kkm",
}
_LOADED: dict[str, Method] = {}


def names() -> tuple[str, ...]:
    """The built-in methods (plug-in models join the LKC family)."""
    return tuple(BUILTIN)


def get(name: str) -> Method:
    """The method of ``[privacy] model = name`` (a name not built in: the LKC family)."""
    key = name if name in BUILTIN else LKC
    found = _LOADED.get(key)
    if found is None:
        module, _, attr = BUILTIN[key].partition(":")
        found = getattr(importlib.import_module(module), attr)
        if not isinstance(found, Method) or found.name != key:
            raise TypeError(f"{BUILTIN[key]} is not the method {key!r}")
        _LOADED[key] = found
    return found


def methods() -> tuple[Method, ...]:
    return tuple(get(n) for n in BUILTIN)


def of_spec_lenient(path: Path) -> Method:
    """The method of a spec file, an unreadable spec taken as LKC (its reader reports it)."""
    return get(spec_model(path))


def is_family(model: str) -> bool:
    """Whether ``model`` names a privacy model run by the LKC engine (lkc or a plug-in)."""
    return get(model).name == LKC


def require_federated(path: Path) -> Method:
    """The method of a spec file, refused when it has no federated variant (SpecError,
    exit 2, naming why); an unreadable spec is taken as LKC (its own reader reports it)."""
    method = of_spec_lenient(path)
    method.require_federated(str(path))
    return method


def require_federated_text(text: str, source: str) -> Method:
    """As :func:`require_federated` for spec text (what a party receives)."""
    from fedanon.model.peek import text_model

    method = get(text_model(text))
    method.require_federated(source)
    return method


def leader_side(method: Method) -> Any:
    """The leader side of a federated method (:attr:`Method.leader_side`, imported now)."""
    method.require_federated(None)
    module, _, attr = method.leader_side.partition(":")
    return getattr(importlib.import_module(module), attr)


def new_spelling(command: str, rest: list[str]) -> list[str] | None:
    """Today's arguments for a deprecated command (None: ``command`` is not one)."""
    owner = DEPRECATED.get(command)
    return None if owner is None else get(owner).new_spelling(command, rest)


# -- method-only command line options -----------------------------------------------------


def add_options(parser: Any, command: str) -> None:
    """Add every method's options of ``command`` to its parser (a flag declared by several
    methods once)."""
    seen: set[str] = set()
    for m in methods():
        for opt in m.options_of(command):
            if opt.flag not in seen:
                seen.add(opt.flag)
                parser.add_argument(*opt.flags, **dict(opt.kwargs))


def owners(command: str, flag: str) -> tuple[Method, ...]:
    return tuple(m for m in methods() if any(o.flag == flag for o in m.options_of(command)))


def check_options(
    method: Method, args: argparse.Namespace, command: str, spec: Path | None = None
) -> None:
    """Refuse (InputError, exit 2) an option of ``command`` that belongs to other methods."""
    own = {o.flag for o in method.options_of(command)}
    for m in methods():
        for opt in m.options_of(command):
            if opt.flag in own or not opt.given(args):
                continue
            them = owners(command, opt.flag)
            phrase = " or ".join(o.spec_phrase for o in them)
            models = " or ".join(f'[privacy] model = "{o.name}"' for o in them)
            if command == "experiment":
                raise InputError(
                    f"{opt.flag} applies only to "
                    + " or ".join(f"the {o.title} experiments" for o in them),
                    value=str(getattr(args, opt.dest)),
                    expected=f"no {opt.flag} for `fedanon experiment {args.name}`",
                )
            raise InputError(
                f"{opt.flag} applies only to {phrase}",
                file=None if spec is None else str(spec),
                expected=f"{models} in the spec, or no {opt.flag}",
            )


def experiment_names() -> tuple[str, ...]:
    return tuple(n for m in methods() for n in m.experiments)


def of_experiment(name: str) -> Method:
    for m in methods():
        if name in m.experiments:
            return m
    raise InputError("unknown experiment", value=name, expected=" | ".join(experiment_names()))
