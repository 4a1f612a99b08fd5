"""Why a (k, k^m) spec is refused in a federated run, and the check that refuses it.

Integration: ``leader run`` / ``federate`` call :func:`refuse_federated_kkm` on the spec file
before anything else; it raises :class:`~fedanon.errors.SpecError` (exit code 2).
"""

from __future__ import annotations

from pathlib import Path

from fedanon.errors import SpecError
from fedanon.kkm.spec import is_kkm_text

EXPLANATION = (
    '[privacy] model = "kkm" ((k, k^m)-anonymity, ArtUC) cannot run federated: ArtUC builds '
    "clusters of individual records (each record joins the cluster whose generalized "
    "demographics it widens least, clusters are merged by the information loss of their "
    "codes), so every step needs the records themselves, not sums of counts.  The federation "
    "protocol only adds up local statistics around the ring (secure sum), which keeps each "
    "hospital's records at home; ArtUC does not decompose into such sums.  Run "
    "`fedanon anonymize` on one hospital's data instead"
)


def refuse_federated_kkm_text(text: str, source: str) -> None:
    """Raise SpecError (exit 2) when the spec text is a kkm spec."""
    if is_kkm_text(text):
        raise SpecError(EXPLANATION, file=source, column="privacy.model", value="kkm")


def refuse_federated_kkm(spec_path: Path) -> None:
    """Raise SpecError (exit 2) when the spec file is a kkm spec; unreadable files pass (the
    caller's own reader reports them)."""
    try:
        text = spec_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    refuse_federated_kkm_text(text, str(spec_path))
