"""The LKC family's rules of a hospital's ``[policy]``
(:class:`fedanon.security.policy.PartyPolicy`): the floors ``min_K``, ``min_L``, ``max_C`` on
the L, K, C a spec's model amounts to, the sensitive column the hospital owns, and the
columns released unchanged.  The policy module says what every rule means; the method
(:mod:`fedanon.lkc.method`) applies these to its specs."""

from __future__ import annotations

from fedanon.model.peek import DEFAULT_MODEL as NAME
from fedanon.model.spec import RunSpec
from fedanon.security.policy import SECURE_SUMS, UNCHANGED_ROLES, PartyPolicy, PolicyRefused
from fedanon.security.policycols import Refusal, identifiers_refusal, sensitive_refusal


def _raise(refusal: Refusal | None) -> None:
    if refusal is not None:
        raise PolicyRefused(*refusal)


def check_lkc_policy(policy: PartyPolicy, spec: RunSpec) -> None:
    """Raise :class:`PolicyRefused` unless ``policy`` accepts the LKC-family ``spec`` (its
    model allowed, the L, K, C it amounts to within the floors, the owned columns, the
    columns released unchanged)."""
    p = spec.privacy
    policy.check_model(p.model)
    terms = p.as_lkc(len(spec.qids))
    if terms is None:
        raise PolicyRefused(
            "allowed_models",
            f"model = {p.model!r} states no L, K, C it amounts to: min_K, min_L and max_C "
            "cannot be checked, so it is refused even though allowed_models lists it",
        )
    _raise(identifiers_refusal(spec.attributes, policy.identifiers))
    if policy.sensitive_column is not None:
        _raise(
            sensitive_refusal(
                spec.attributes,
                policy.sensitive_column,
                policy.sensitive_values,
                terms.sensitive_values,
            )
        )
    k, l_, c = terms.K, terms.L, float(terms.C)
    # LKC's lines as before; another model's name its L, K, C equivalents
    how = "" if p.model == NAME else f" (model = {p.model!r} is LKC with L={l_} K={k} C={c:g})"
    if k < policy.min_K:
        raise PolicyRefused("min_K", f"K = {k} < min_K = {policy.min_K}{how}")
    if l_ < min(policy.min_L, len(spec.qids)):
        raise PolicyRefused("min_L", f"L = {l_} < min_L = {policy.min_L}{how}")
    if c > policy.max_C:
        raise PolicyRefused("max_C", f"C = {c:g} > max_C = {policy.max_C:g}{how}")
    sens = spec.sensitive_attr
    if sens is not None and policy.max_C < 1 and not terms.sensitive_values:
        raise PolicyRefused(
            "max_C",
            f"sensitive column {sens.name!r} has no sensitive_values, so C bounds nothing "
            f"(max_C = {policy.max_C:g})",
        )
    allowed = set(policy.release_unchanged)
    for a in spec.attributes:
        if a.role in UNCHANGED_ROLES and a.name not in allowed:
            listed = ", ".join(repr(n) for n in policy.release_unchanged) or "nothing"
            raise PolicyRefused(
                "release_unchanged",
                f"column {a.name!r} would be released unchanged (role = {a.role}) but "
                f"release_unchanged allows {listed}",
            )


def lkc_local_policy(spec: RunSpec) -> PartyPolicy:
    """A policy for a single-owner local federation (``fedanon federate``).

    Whoever runs ``federate`` holds every table and wrote the spec, so the policy cannot
    protect the data from its author; it carries the floors every hospital should keep:
    no K below 2 (K = 1 releases raw QID combinations), at least 3 parties, and exactly the
    spec's own class/sensitive/other columns released unchanged.  ``min_L`` and ``max_C``
    are the weakest values (1 and 1.0): a spec asking for more is accepted, and so is the
    spec's own privacy model.
    """
    unchanged = tuple(a.name for a in spec.attributes if a.role in UNCHANGED_ROLES)
    model = spec.privacy.model
    models = None if model == NAME else (NAME, model)
    return PartyPolicy(
        min_K=2,
        min_L=1,
        max_C=1.0,
        release_unchanged=unchanged,
        allowed_models=models,
        secure_sum=SECURE_SUMS,
        allow_mpc=spec.m > 0,  # an m-private spec: its daemons run the MPC check
    )
