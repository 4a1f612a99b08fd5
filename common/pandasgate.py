"""Arrow without pandas in the leader and in forked party daemons (and the way back).

Arrow imports pandas (0.3-0.5 CPU-seconds, more than the rest of a daemon's start) with the
first array it builds or converts to numpy, although neither the leader nor a party daemon
hands it a pandas object.  :func:`without_pandas` makes that import fail, which Arrow takes
as "pandas is not installed" and converts the same way.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence

__all__ = ["NoPandas", "allow_pandas", "without_pandas"]


class NoPandas(importlib.abc.MetaPathFinder):
    """Refuses ``import pandas`` from Arrow: neither a party daemon nor the leader uses
    pandas for its work, but Arrow imports it (0.3-0.5 CPU-seconds) with the
    first array it builds or converts to numpy, only to recognise pandas objects and look up
    pandas' missing-value objects; without pandas it converts the same way.  Code that
    wants pandas itself lifts the refusal first (the finder says ``refuses_pandas``; see
    :func:`allow_pandas`)."""

    refuses_pandas = True

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ImportError(f"{fullname}: not imported for Arrow in a federation process")
        return None


def without_pandas() -> None:
    """From now on Arrow in this process does not import pandas (see :class:`NoPandas`)."""
    if "pandas" not in sys.modules and not any(isinstance(f, NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, NoPandas())


def allow_pandas() -> None:
    """Lift the refusal: code that wants pandas itself (a large union's hash table, a
    plug-in that imports it) calls this before importing it."""
    for finder in [f for f in sys.meta_path if isinstance(f, NoPandas)]:
        sys.meta_path.remove(finder)
