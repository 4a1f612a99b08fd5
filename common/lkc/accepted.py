"""What a hospital's log says of an accepted LKC-family run: the model and its parameters,
the columns released unchanged, and what the confidence bound C actually binds (spec values
the policy checked, never record values)."""

from __future__ import annotations

from collections.abc import Sequence

from fedanon.logsafe import safe
from fedanon.model.spec import RunSpec
from fedanon.security.policy import UNCHANGED_ROLES, PartyPolicy


def confidence_binds(spec: RunSpec, required: Sequence[str] = ()) -> str:
    """What C actually bounds in an accepted run: the sensitive column and values (spec
    values the policy checked, not record values), or nothing.  ``required`` (the policy's
    ``sensitive_values``) are listed first and in full, never cut off; the spec's other
    values follow, counted (listed while short)."""
    terms = spec.privacy.as_lkc(len(spec.qids))
    sens = spec.sensitive_attr
    if terms is None or sens is None or not terms.sensitive_values:
        return "binds=[nothing: no sensitive values]"
    if terms.C >= 1:
        return "binds=[nothing: C = 1]"
    own = [v for v in required if v in terms.sensitive_values]
    extra = [v for v in terms.sensitive_values if v not in own]
    shown = ",".join(safe(v, 100) for v in own)
    if extra:
        listed = ",".join(extra)
        more = f"{len(extra)} more of the spec"
        tail = f"{more}: {safe(listed, 200)}" if len(listed) <= 200 else more
        shown = f"{shown} + {tail}" if shown else f"{len(extra)} of the spec: {safe(listed, 200)}"
    return f"binds=[C={float(terms.C):g} on {safe(sens.name, 100)}: {shown}]"


def lkc_accepted_terms(spec: RunSpec, policy: PartyPolicy | None) -> tuple[str, str, str]:
    """(model L=.. K=.. C=.. score=.., columns released unchanged, what C binds)."""
    model = f"{spec.privacy.describe()} score={spec.score}"
    unchanged = ",".join(a.name for a in spec.attributes if a.role in UNCHANGED_ROLES)
    binds = confidence_binds(spec, policy.sensitive_values if policy is not None else ())
    return model, unchanged, binds
