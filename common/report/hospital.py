"""One hospital's side of a federated release on the page: its ``[policy]`` as party.toml
sets it (``--party-config``) and its privacy ledger's rows of the run (``--ledger``).

The policy is every key of :class:`fedanon.security.policy.PartyPolicy`, budgets included,
each marked as set in party.toml or left at its default; of ``[party]`` only the hospital's
name, the leader it obeys and a pinned spec's file name are shown -- nothing of the data
source (not its path, let alone its contents).  The ledger is read read-only
(:mod:`fedanon.report.ledger`)."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fedanon.errors import ConfigError, InputError
from fedanon.ledger.keys import BUDGET_KEYS
from fedanon.report.ledger import LedgerView, Spent, read_ledger
from fedanon.report.model import Section, Table

NOT_SET = {
    "allowed_parties": "not set (any hospital the CA certified)",
    "max_epsilon": "not set (joins no DP run)",
    "allowed_models": "not set",
    "sensitive_column": "not set (the spec's own)",
    "max_specializations": "not set (the spec's bound)",
    **{k: "not set (no limit)" for k in BUDGET_KEYS},
}


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple):
        return ", ".join(str(x) for x in v) if v else "(none)"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _set_keys(path: Path) -> set[str]:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:  # read just before
        raise ConfigError(f"cannot read it again: {exc}", file=str(path)) from None
    table = doc.get("policy")
    return set(table) if isinstance(table, dict) else set()


def policy_section(cfg: Any, path: Path) -> Section:
    """This hospital's policy, every key, as the daemon applies it."""
    facts = [("hospital", cfg.name), ("leader it obeys", cfg.leader)]
    if cfg.spec is not None:
        facts.append(("pinned spec (only runs of exactly this spec)", Path(cfg.spec).name))
    notes = [
        f"From {path.name} as it reads now (a policy changed since the run would show its "
        "new values; the ledger's rows below record what the run was accepted under)."
    ]
    tables = []
    policy = cfg.policy
    if policy is None:
        notes.append("No [policy] table: the daemon accepts only runs of its pinned spec.")
    else:
        given = _set_keys(path)
        rows = []
        for f in dataclasses.fields(policy):
            if f.name == "source":
                continue
            v = getattr(policy, f.name)
            shown = NOT_SET.get(f.name, "not set") if v is None else _value(v)
            if f.name == "allowed_models" and v is None:
                shown += f" (joins: {_value(policy.models)})"
            rows.append((f.name, shown, "party.toml" if f.name in given else "default"))
        tables.append(Table(f"[policy] of {cfg.name}", ("key", "value", "from"), tuple(rows)))
    return Section(
        f"This hospital's policy ({cfg.name})",
        facts=tuple(facts),
        tables=tuple(tables),
        notes=tuple(notes),
        anchor="policy",
    )


def _eps(x: Any) -> str:
    return f"{float(x):g}"


def _limit(policy: Any, key: str) -> Any:
    return None if policy is None else getattr(policy, key, None)


def _spent_facts(s: Spent, policy: Any) -> list[tuple[str, str]]:
    eps_max, rel_max = _limit(policy, "max_total_epsilon"), _limit(policy, "max_releases")
    eps = _eps(s.epsilon)
    if eps_max is not None:
        eps += f" of max_total_epsilon = {_eps(eps_max)} ({_eps(max(eps_max - s.epsilon, 0))} left)"
    rel = f"{s.releases:,}"
    if rel_max is not None:
        rel += f" of max_releases = {rel_max:,}"
    return [
        ("runs reserved on this table", f"{s.runs:,}"),
        ("epsilon spent on this table", eps),
        ("distinct releases of this table", rel),
    ]


def ledger_section(view: LedgerView, policy: Any, hospital: str | None) -> Section:
    """The run's rows, the budgets of its table(s) spent so far, the chain's head."""
    who = f" ({hospital})" if hospital else ""
    facts: list[tuple[str, str]] = [("ledger", view.path.name), ("run id", view.run_id)]
    notes = []
    mine = set(view.tables)
    for s in view.spent:
        if s.data_fp in mine:
            facts.append(("table (data fingerprint)", s.data_fp[:16]))
            facts.extend(_spent_facts(s, policy))
    sent = [e.bytes_sent for e in view.entries if e.event in ("released", "aborted")]
    if sent and all(b is not None for b in sent):
        facts.append(
            ("bytes of statistics sent by this hospital", f"{sum(b or 0 for b in sent):,}")
        )
    facts.append(("rows in the ledger", f"{view.rows:,}"))
    if view.head is None:
        facts.append(("chain head", "no rows"))
    else:
        facts.append(("chain head", f"row {view.head[0]} hash {view.head[1]}"))
    facts.append(("hash chain", "intact" if view.broken is None else f"NOT intact: {view.broken}"))
    notes.append(
        "Read read-only while the daemon may run. Compare the chain head with a copy kept "
        "where the ledger's writers cannot change it: the chain has no key."
    )
    if not view.entries:
        notes.append(
            "This ledger has no row of this run: this hospital did not take part in it, or "
            "this is another hospital's ledger."
        )
    rows = tuple(
        (
            str(e.seq),
            e.time,
            e.event,
            e.identity,
            f"{e.method} {e.params}".strip(),
            e.epsilon,
            "" if e.bytes_sent is None else f"{e.bytes_sent:,}",
            e.release_key[:12],
            e.detail
            + ("" if not e.new_sends else f"{'; ' if e.detail else ''}{e.new_sends} new sends"),
        )
        for e in view.entries
    )
    header = ("row", "time (UTC)", "event", "leader", "method", "epsilon", "bytes sent",
              "release", "detail")  # fmt: skip
    return Section(
        f"Privacy ledger{who}: this run",
        facts=tuple(facts),
        tables=(Table("The run's ledger rows", header, rows),),
        notes=tuple(notes),
        anchor="ledger",
    )


def ledger_warnings(view: LedgerView) -> list[str]:
    out = []
    if view.broken is not None:
        out.append(f"The privacy ledger {view.path.name} is NOT intact: {view.broken}")
    if not view.entries:
        out.append(f"The privacy ledger {view.path.name} has no row of run {view.run_id}")
    return out


def run_id_of(run: Mapping[str, Any] | None, name: str | None) -> str:
    """The run id the leader's run report carries (``federation.run_id``, hex)."""
    if run is None:
        raise InputError(
            "--ledger shows the rows of one run: give the run's JSON report (--run-report), "
            "whose federation.run_id names it",
            expected="--run-report REPORT.json with --ledger",
        )
    fed = run.get("federation")
    rid = fed.get("run_id") if isinstance(fed, Mapping) else None
    if not isinstance(rid, str) or not re.fullmatch(r"[0-9a-f]{32}", rid):
        raise InputError(
            "the run report names no run id (federation.run_id): it is not the report of a "
            "federated run by this version of fedanon",
            file=name,
            value=None if rid is None else repr(rid)[:80],
            expected="the JSON report of `leader run` or `federate`",
        )
    return rid


def hospital_sections(
    inputs: Any, run: Mapping[str, Any] | None, sections: list[Section], warnings: list[str]
) -> None:
    """Append the policy's and the ledger's sections (and the ledger's warnings)."""
    cfg = inputs.party  # party.toml as the daemon reads it (loaded by the CLI)
    if cfg is not None:
        sections.append(policy_section(cfg, inputs.party_config))
    if inputs.ledger is not None:
        name = inputs.run_report_name or (
            None if inputs.run_report is None else str(inputs.run_report)
        )
        view = read_ledger(inputs.ledger, run_id_of(run, name))
        policy = None if cfg is None else cfg.policy
        sections.append(ledger_section(view, policy, None if cfg is None else cfg.name))
        warnings.extend(ledger_warnings(view))
