"""Why a (k, k^m) spec is refused in a federated run, and the check that refuses it.

The refusal itself is the method's capability (:class:`fedanon.methods.base.Capabilities`,
``federated = False``), checked in one place: :func:`fedanon.methods.registry.require_federated`
(SpecError, exit code 2, with :data:`EXPLANATION`).  These names stay for the callers that
still import them.
"""

from __future__ import annotations

from pathlib import Path

from fedanon.kkm.method import EXPLANATION
from fedanon.methods import registry

__all__ = ["EXPLANATION", "refuse_federated_kkm", "refuse_federated_kkm_text"]


def refuse_federated_kkm_text(text: str, source: str) -> None:
    """Raise SpecError (exit 2) when the spec text names a method without a federated run."""
    registry.require_federated_text(text, source)


def refuse_federated_kkm(spec_path: Path) -> None:
    """As :func:`refuse_federated_kkm_text` for a spec file; unreadable files pass (the
    caller's own reader reports them)."""
    registry.require_federated(spec_path)
