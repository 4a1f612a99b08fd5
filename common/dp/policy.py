"""DiffGen's rules of a hospital's ``[policy]`` (:class:`fedanon.security.policy.PartyPolicy`):
a DP run only with ``max_epsilon`` set and ``epsilon <= max_epsilon`` (compared as the
decimals written), ``specializations <= max_specializations`` when set, the owned columns,
and the class column -- released with noisy counts -- listed in ``release_unchanged``.
``min_K``, ``min_L`` and ``max_C`` do not apply to it."""

from __future__ import annotations

from fractions import Fraction

from fedanon.dp.model import MODEL
from fedanon.dp.spec import DPSpec
from fedanon.security.policy import SECURE_SUMS, PartyPolicy, PolicyRefused
from fedanon.security.policycols import Refusal, dp_sensitive_refusal, identifiers_refusal


def _raise(refusal: Refusal | None) -> None:
    if refusal is not None:
        raise PolicyRefused(*refusal)


def check_dp_policy(policy: PartyPolicy, spec: DPSpec) -> None:
    """Raise :class:`PolicyRefused` unless ``policy`` accepts the DP run ``spec``."""
    eps = spec.params.epsilon
    shown = f"{float(eps):g}"
    if policy.max_epsilon is None:
        raise PolicyRefused(
            "max_epsilon",
            f"model = {MODEL!r} (epsilon = {shown}) but this policy has no max_epsilon: "
            "this hospital takes part in no differentially private run",
        )
    policy.check_model(MODEL)
    if eps > Fraction(repr(policy.max_epsilon)):
        raise PolicyRefused(
            "max_epsilon", f"epsilon = {shown} > max_epsilon = {policy.max_epsilon:g}"
        )
    h = spec.params.specializations
    if policy.max_specializations is not None and h > policy.max_specializations:
        raise PolicyRefused(
            "max_specializations",
            f"specializations = {h} > max_specializations = {policy.max_specializations}",
        )
    _raise(identifiers_refusal(spec.run.attributes, policy.identifiers))
    if policy.sensitive_column is not None:
        _raise(dp_sensitive_refusal(spec.run.attributes, policy.sensitive_column))
    if spec.class_name not in policy.release_unchanged:
        listed = ", ".join(repr(n) for n in policy.release_unchanged) or "nothing"
        raise PolicyRefused(
            "release_unchanged",
            f"column {spec.class_name!r} would be released unchanged (role = class, with "
            f"noisy counts) but release_unchanged allows {listed}",
        )


def dp_local_policy(spec: DPSpec) -> PartyPolicy:
    """The policy of `fedanon federate`'s daemons for a DP spec: ``max_epsilon`` is the
    spec's own epsilon, and so is ``max_total_epsilon`` (federate's daemons keep a fresh
    ledger for their one run); the class column is the one released unchanged."""
    return PartyPolicy(
        min_K=2,
        min_L=1,
        max_C=1.0,
        release_unchanged=(spec.class_name,),
        max_epsilon=float(spec.params.epsilon),
        secure_sum=SECURE_SUMS,
        max_total_epsilon=float(spec.params.epsilon),
    )
