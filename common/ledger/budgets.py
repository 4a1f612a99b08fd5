"""The budgets of ``[policy]`` and the reservation that checks them.

* ``max_total_epsilon``: per data fingerprint, the epsilons of every DP run reserved on it
  (a reserved run counts as spent even when it aborts or the daemon dies: statistics may
  have left) plus the new run's may not exceed it;
* ``max_releases``: per data fingerprint, the distinct releases of the other methods; a
  re-run of the same spec on the same ring over unchanged data gives the same release and
  costs nothing, any other spec counts;
* ``max_runs_per_day``: runs accepted from one leader identity in the last 24 hours;
* ``max_refusals_per_hour`` and ``lockout_minutes``: see :mod:`fedanon.ledger.access`.

The checks are pure functions returning a :class:`Refusal` (the policy key and the line a
leader is shown); :func:`reserve` runs them inside the ``BEGIN IMMEDIATE`` transaction that
appends the run's row, so two concurrent runs never both take the last epsilon.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from fedanon.ledger.chain import Value
from fedanon.ledger.keys import BUDGET_KEYS
from fedanon.ledger.records import DP, Caller, RunFacts, short
from fedanon.ledger.store import Txn, stamp
from fedanon.ledger.transcript import split_keys

DEFAULT_LOCKOUT_MINUTES = 60.0
MAX_LISTED = 10  # runs named in a refusal


@dataclass(frozen=True)
class Refusal:
    rule: str
    message: str


@dataclass(frozen=True)
class Budgets:
    """The five keys (None: no limit)."""

    max_total_epsilon: float | None = None
    max_releases: int | None = None
    max_runs_per_day: int | None = None
    max_refusals_per_hour: int | None = None
    lockout_minutes: float | None = None

    @classmethod
    def of(cls, policy: Any) -> Budgets:
        """The budgets of a :class:`fedanon.security.policy.PartyPolicy` (or None)."""
        if policy is None:
            return cls()
        return cls(**{k: getattr(policy, k, None) for k in BUDGET_KEYS})

    @property
    def per_table(self) -> bool:
        """Is a budget kept per data fingerprint (epsilon or releases)?"""
        return self.max_total_epsilon is not None or self.max_releases is not None

    @property
    def lockout(self) -> dt.timedelta:
        return dt.timedelta(minutes=self.lockout_minutes or DEFAULT_LOCKOUT_MINUTES)


def _runs(ids: Sequence[str]) -> str:
    shown = ", ".join(short(r) for r in ids[:MAX_LISTED])
    more = len(ids) - MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def _g(x: Fraction | float) -> str:
    return repr(float(x))


# ---------------------------------------------------------------------------- pure checks
def epsilon_refusal(
    limit: float | None, epsilon: Fraction, spent: Sequence[tuple[str, Fraction]]
) -> Refusal | None:
    """``spent``: (run id, epsilon) of the DP runs reserved on this table so far."""
    if limit is None:
        return None
    before = sum((e for _, e in spent), Fraction(0))
    total = before + epsilon
    if total <= Fraction(repr(float(limit))):
        return None
    where = f"in runs {_runs([r for r, _ in spent])}" if spent else "in no run yet"
    return Refusal(
        "max_total_epsilon",
        f"epsilon {_g(epsilon)} would bring this table's total to {_g(total)} > "
        f"max_total_epsilon = {_g(limit)} (spent {_g(before)} {where})",
    )


def release_refusal(limit: int | None, key: str, keys: Mapping[str, str]) -> Refusal | None:
    """``keys``: release key -> the first run that made it, of the non-DP runs reserved on
    this table."""
    if limit is None:
        return None
    if key in keys or len(keys) < limit:
        return None
    return Refusal(
        "max_releases",
        f"a new release of this table would be release {len(keys) + 1} > max_releases = "
        f"{limit} (released in runs {_runs(list(keys.values()))}; re-running one of those "
        "specs on the same ring costs nothing while this hospital's statistics stay those it "
        "sent then)",
    )


def daily_refusal(limit: int | None, identity: str, runs: Sequence[str]) -> Refusal | None:
    """``runs``: the runs accepted from ``identity`` in the last 24 hours."""
    if limit is None or len(runs) < limit:
        return None
    return Refusal(
        "max_runs_per_day",
        f"leader {identity!r} ran {len(runs)} runs in the last 24 hours, max_runs_per_day = "
        f"{limit} (runs {_runs(list(runs))})",
    )


# ---------------------------------------------------------------------------- reservation
@dataclass
class Spent:
    """What the reserved rows of one table add up to, up to row ``seq`` (rows are only
    appended, so each reservation reads the rows after it: cost independent of history)."""

    seq: int = 0
    epsilon: list[tuple[str, Fraction]] = field(default_factory=list)
    total: Fraction = Fraction(0)
    releases: dict[str, str] = field(default_factory=dict)  # release key -> first run


def spent_on(txn: Txn, data_fp: str) -> Spent:
    """The table's spending so far, brought up to date inside the transaction."""
    cache: dict[str, Spent] = txn.store.cache.setdefault("spent", {})
    s = cache.setdefault(data_fp, Spent())
    rows = txn.read(
        "SELECT seq, run_id, method, epsilon, release_key FROM entries WHERE data_fp = ? "
        "AND event IN ('reserved', 'diverged') AND seq > ? ORDER BY seq",
        (data_fp, s.seq),
    )
    for seq, run_id, method, eps, key in rows:
        if method == DP:
            e = Fraction(eps)
            s.epsilon.append((run_id, e))
            s.total += e
        else:
            s.releases.setdefault(key, run_id)
        s.seq = seq
    return s


def judge(txn: Txn, budgets: Budgets, caller: Caller, facts: RunFacts) -> Refusal | None:
    """Every budget against what the ledger holds (inside the reserving transaction)."""
    limit = budgets.max_runs_per_day
    if limit is not None:
        since = stamp(txn.now() - dt.timedelta(days=1))
        where = "FROM entries WHERE identity = ? AND event = 'reserved' AND time >= ?"
        n = txn.read(f"SELECT count(*) {where}", (caller.identity, since))[0][0]
        if n >= limit:
            day = txn.read(f"SELECT run_id {where} ORDER BY seq", (caller.identity, since))
            return daily_refusal(limit, caller.identity, [r[0] for r in day])
    if budgets.max_total_epsilon is None and budgets.max_releases is None:
        return None
    s = spent_on(txn, facts.data.digest)
    if facts.method == DP:
        assert facts.epsilon is not None
        if budgets.max_total_epsilon is None:
            return None
        if s.total + facts.epsilon <= Fraction(repr(float(budgets.max_total_epsilon))):
            return None
        return epsilon_refusal(budgets.max_total_epsilon, facts.epsilon, s.epsilon)
    return release_refusal(budgets.max_releases, facts.release_key, s.releases)


def _run_columns(caller: Caller, facts: RunFacts) -> dict[str, Value]:
    """The columns every row of a run's Prepare or re-run decision carries: who asked, which
    run and spec, on which data."""
    return {
        "run_id": facts.run_id,
        "identity": caller.identity,
        "cert_fp": caller.cert_fp,
        "peer": caller.peer,
        "address": caller.address,
        "ring": ",".join(facts.ring),
        "spec_hash": facts.spec_hash,
        "method": facts.method,
        "params": facts.params,
        "data_fp": facts.data.digest,
    }


def reserve(txn: Txn, budgets: Budgets, caller: Caller, facts: RunFacts) -> Refusal | None:
    """Append the run's ``reserved`` row, or its ``refused`` row naming the budget."""
    found = judge(txn, budgets, caller, facts)
    txn.append(
        "refused" if found is not None else "reserved",
        **_run_columns(caller, facts),
        epsilon=None if facts.epsilon is None else str(facts.epsilon),
        data=facts.data.describe,
        release_key=facts.release_key,
        reason=None if found is None else f"{found.rule}: {found.message}",
        phase="Prepare",
        bytes=0,
    )
    return found


# ---------------------------------------------------------------------------- re-runs
def is_free(txn: Txn, facts: RunFacts) -> bool:
    """A non-DP run whose release key was reserved before (before :func:`reserve`)."""
    if facts.method == DP:
        return False
    return facts.release_key in spent_on(txn, facts.data.digest).releases


def known_sends(txn: Txn, release_key: str) -> frozenset[str]:
    """The send keys the ended runs of ``release_key`` sent (:mod:`fedanon.ledger.transcript`)."""
    rows = txn.read(
        "SELECT transcript FROM entries WHERE release_key = ? AND transcript IS NOT NULL",
        (release_key,),
    )
    return frozenset(k for (text,) in rows for k in split_keys(text))


def diverged_key(facts: RunFacts) -> str:
    """The release a re-run makes once it leaves the released runs' path: its own."""
    return hashlib.sha256(f"diverged\0{facts.release_key}\0{facts.run_id}".encode()).hexdigest()


def recharge(txn: Txn, budgets: Budgets, caller: Caller, facts: RunFacts) -> Refusal | None:
    """A free re-run is about to send statistics no ended run of its release key sent: a
    new release, checked against ``max_releases`` (a ``diverged`` or ``refused`` row)."""
    key = diverged_key(facts)
    found = release_refusal(budgets.max_releases, key, spent_on(txn, facts.data.digest).releases)
    if found is not None:
        found = Refusal(
            found.rule,
            "the leader's instructions left the path of the released runs of this spec, so "
            f"this run makes another release: {found.message}",
        )
    txn.append(
        "refused" if found is not None else "diverged",
        **_run_columns(caller, facts),
        release_key=key,
        reason=(
            f"{found.rule}: {found.message}"
            if found is not None
            else "a new release: the leader's instructions left the released runs' path"
        ),
        phase="statistics",
        bytes=0,
    )
    return found
