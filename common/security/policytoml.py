"""The ``[policy]`` table of party.toml: read (unknown or missing keys are errors) and written
(the configs ``fedanon federate`` and the tests generate).  The rules themselves are
:mod:`fedanon.security.policy`'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedanon.errors import ConfigError
from fedanon.ledger.keys import budgets_toml
from fedanon.security.policy import KEYS, MIN_PARTIES, REQUIRED, PartyPolicy


def policy_to_toml(policy: PartyPolicy) -> str:
    """The ``[policy]`` table as party.toml text (for generated configs)."""
    cols = ", ".join(toml_str(n) for n in policy.release_unchanged)
    text = (
        "[policy]\n"
        f"min_K = {policy.min_K}\n"
        f"min_L = {policy.min_L}\n"
        f"max_C = {policy.max_C!r}\n"
        f"min_parties = {policy.min_parties}\n"
        f"release_unchanged = [{cols}]\n"
    )
    if policy.allowed_parties is not None:
        peers = ", ".join(toml_str(n) for n in policy.allowed_parties)
        text += f"allowed_parties = [{peers}]\n"
    if policy.max_epsilon is not None:
        text += f"max_epsilon = {policy.max_epsilon!r}\n"
    if policy.allowed_models is not None:
        models = ", ".join(toml_str(n) for n in policy.allowed_models)
        text += f"allowed_models = [{models}]\n"
    if not policy.share_progress:
        text += "share_progress = false\n"
    if policy.identifiers:
        text += f"identifiers = [{', '.join(toml_str(n) for n in policy.identifiers)}]\n"
    if policy.sensitive_column is not None:
        text += f"sensitive_column = {toml_str(policy.sensitive_column)}\n"
        vals = ", ".join(toml_str(v) for v in policy.sensitive_values)
        text += f"sensitive_values = [{vals}]\n"
    if policy.max_specializations is not None:
        text += f"max_specializations = {policy.max_specializations}\n"
    if policy.allow_mpc:
        text += "allow_mpc = true\n"
    if policy.secure_sum != ("pairwise",):
        text += f"secure_sum = [{', '.join(toml_str(m) for m in policy.secure_sum)}]\n"
    return text + budgets_toml(policy)  # the privacy ledger's budgets


def toml_str(s: str) -> str:
    """``s`` as a TOML basic string (quotes, backslashes and unprintable characters
    escaped): a generated config reads back exactly ``s``."""
    out = s.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() else _escape(c) for c in out) + '"'


def _escape(c: str) -> str:
    code = ord(c)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def policy_from_table(table: Mapping[str, Any], source: str) -> PartyPolicy:
    """``[policy]`` of party.toml -> :class:`PartyPolicy` (unknown or missing keys are errors)."""
    extra = sorted(set(table) - set(KEYS))
    if extra:
        raise ConfigError(
            "[policy]: unknown key", file=source, value=extra[0], expected=", ".join(KEYS)
        )
    missing = [k for k in REQUIRED if k not in table]
    if missing:
        raise ConfigError(
            f"[policy] needs {', '.join(missing)}",
            file=source,
            expected="min_K = 10, min_L = 3, max_C = 0.5 (the weakest run this hospital accepts)",
        )
    raw = _names(table, "release_unchanged", source, '["salary-class"]') or ()
    peers = _names(table, "allowed_parties", source, '["hospital-b", "hospital-c"]')
    models = _names(table, "allowed_models", source, '["lkc", "kanon"]')
    ids = _names(table, "identifiers", source, '["name", "ssn"]') or ()
    sens = _names(table, "sensitive_values", source, '["HIV"]') or ()
    sums = _names(table, "secure_sum", source, '["pairwise", "ring"]')
    return PartyPolicy(
        min_K=table["min_K"],
        min_L=table["min_L"],
        max_C=table["max_C"],
        min_parties=table.get("min_parties", MIN_PARTIES),
        release_unchanged=raw,
        allowed_parties=peers,
        max_epsilon=table.get("max_epsilon"),
        allowed_models=models,
        share_progress=table.get("share_progress", True),
        identifiers=ids,
        sensitive_column=table.get("sensitive_column"),
        sensitive_values=sens,
        max_specializations=table.get("max_specializations"),
        secure_sum=("pairwise",) if sums is None else sums,
        allow_mpc=table.get("allow_mpc", False),
        source=source,
    )


def _names(table: Mapping[str, Any], key: str, source: str, example: str) -> tuple[Any, ...] | None:
    """The list ``key`` of ``[policy]`` as a tuple (None when absent; its items are checked by
    :class:`PartyPolicy`)."""
    val = table.get(key)
    if val is None:
        return None
    if not isinstance(val, list):
        raise ConfigError(
            f"[policy] {key} is invalid",
            file=source,
            value=repr(val),
            expected=f"a list of names, e.g. {key} = {example}",
        )
    return tuple(val)


def parse_policy(table: Mapping[str, Any], source: str) -> PartyPolicy:
    """``[policy]`` of party.toml -> :class:`PartyPolicy` (unknown or missing keys are errors)."""
    return policy_from_table(table, source)
