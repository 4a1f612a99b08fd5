"""fedanon: federated LKC-privacy anonymization (and DiffGen, (k,k^m)-anonymity) for hospitals.

The library's entry points are re-exported here and loaded on first use, so that
``import fedanon.party.server`` (a daemon) does not pay for pandas::

    import fedanon

    spec = fedanon.Spec.from_toml("run.toml")
    release = fedanon.anonymize(df, spec)
    result = fedanon.audit(release.table, spec)

See :mod:`fedanon.api` for the whole surface.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedanon.api import (
        LKC,
        Attribute,
        AuditResult,
        GroupViolation,
        Privacy,
        Release,
        Spec,
        anonymize,
        audit,
    )

__all__ = [
    "LKC",
    "Attribute",
    "AuditResult",
    "GroupViolation",
    "Privacy",
    "Release",
    "Spec",
    "anonymize",
    "audit",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("fedanon.api"), name)
    raise AttributeError(f"module 'fedanon' has no attribute {name!r}")
