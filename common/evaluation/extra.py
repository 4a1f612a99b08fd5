"""The optional libraries of ``fedanon evaluate`` / ``fedanon experiment`` (extra 'eval')."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from fedanon.errors import InputError

EVAL_EXTRA = "fedanon[eval]"
EVAL_MODULES = ("sklearn.tree", "sklearn.model_selection", "scipy.sparse")
PLOT_MODULES = (*EVAL_MODULES, "matplotlib.pyplot")


def require_eval_extra(command: str, modules: Sequence[str] = EVAL_MODULES) -> None:
    """The optional libraries a command needs are importable; else say how to install them."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise InputError(
                f"`fedanon {command}` needs {name.split('.')[0]} (optional extra 'eval', "
                f"not installed: {exc})",
                expected=f"pip install '{EVAL_EXTRA}'",
            ) from None
