"""A hospital's own rules for the runs its daemon joins: the ``[policy]`` table of party.toml.

The leader proposes a run (spec, ring); each party checks it against its policy before any
statistics leave the party.  The checks are pure functions of the spec and the ring:

* the privacy model is one of ``allowed_models`` (default ``["lkc"]``, plus ``"dp"`` when
  ``max_epsilon`` is set); a spec naming another model -- a plug-in, or a typo -- is refused
  before anything else, so choosing a model name never bypasses the rules below;
* ``K >= min_K``, ``L >= min_L`` (an ``L`` at least the number of QIDs covers every QID
  combination, so ``L`` only has to reach ``min(min_L, number of QIDs)``), ``C <= max_C``;
  with ``max_C < 1`` a sensitive column must name its ``sensitive_values`` (else C bounds
  nothing), and a policy with ``max_C < 1`` that releases any column unchanged must name
  ``sensitive_column`` (a ConfigError at start otherwise: a spec could move the column to
  ``other`` and C would bind nothing; with nothing released unchanged no column can carry a
  sensitive value, so none is required).  For a model other than LKC these are the L, K, C
  it amounts to (:meth:`fedanon.privacy.params.ModelParams.as_lkc`; k-anonymity is
  L = |QID|, C = 1, so it passes only a policy with ``max_C = 1``); a model that is no
  instance of LKC is refused even when listed (the floors could not be checked);
* every column the run would release unchanged (role class, sensitive or other) is listed in
  ``release_unchanged``; everything else is generalized (qid) or dropped (identifier);
* the columns the hospital owns (:mod:`fedanon.security.policycols`): ``identifiers`` are
  declared ``role = "identifier"`` (never read); ``sensitive_column`` is the spec's sensitive
  column with at least ``sensitive_values``, so that ``max_C`` binds the values the hospital
  chose, not those the leader chose (or it is dropped as an identifier);
* a DP run (``[privacy] model = "dp"``) only with ``max_epsilon`` set and ``epsilon <=
  max_epsilon`` (without it the hospital takes part in no DP run) and ``specializations <=
  max_specializations`` when set; min_K, min_L and max_C do not apply to it,
  ``release_unchanged`` must list its class column (the only column it releases unchanged);
* the secure sum is one of ``secure_sum`` (default ``["pairwise"]``; the paper's ring, where
  a hospital's two ring neighbours suffice to learn its counts, only when listed);
* m-privacy (``[privacy] m > 0``) only with ``allow_mpc = true``: its check runs an MPC among
  the hospitals, whose workers connect to each other (the one exception to "hospitals never
  connect to each other"); and only on a ring of at least 2m + 1 hospitals (honest majority);
* the ring: at least ``min_parties`` (never fewer than 3) distinct hospitals, this party
  exactly once, nobody twice, never the leader, and (if ``allowed_parties`` is set) only
  hospitals this one agreed to work with.

The rules of a spec's method are an operation of that method
(:meth:`fedanon.methods.base.Method.check_policy`): the LKC family's in
:mod:`fedanon.lkc.policy`, DiffGen's in :mod:`fedanon.dp.policy`; a method without a federated
variant has none and is refused.

A refusal raises :class:`PolicyRefused` whose message is the policy line that refused, e.g.
``K = 1 < min_K = 10``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fedanon.errors import ConfigError, InputError
from fedanon.ledger.keys import BUDGET_KEYS, check_budget_values
from fedanon.methods import registry
from fedanon.model.spec import RunSpec
from fedanon.security.policycols import columns_invalid

MIN_PARTIES = 3  # with two, each party could subtract its own counts from the totals
UNCHANGED_ROLES = ("class", "sensitive", "other")
KEYS = (
    "min_K",
    "min_L",
    "max_C",
    "min_parties",
    "release_unchanged",
    "allowed_parties",
    "max_epsilon",
    "allowed_models",
    "share_progress",
    "identifiers",
    "sensitive_column",
    "sensitive_values",
    "max_specializations",
    "secure_sum",
    "allow_mpc",
)
SECURE_SUMS = ("pairwise", "ring")  # fedanon.net.convert.SECURE_SUMS
MAX_EPSILON = 100  # as fedanon.dp.spec.MAX_EPSILON
REQUIRED = ("min_K", "min_L", "max_C")

__all__ = ["MIN_PARTIES", "PartyPolicy", "PolicyRefused", "check_honest_majority", "check_ring"]


class PolicyRefused(InputError):
    """A party's policy refuses a run; ``rule`` is the policy key that refused it."""

    def __init__(self, rule: str, message: str) -> None:
        self.rule = rule
        super().__init__(message)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class PartyPolicy:
    min_K: int
    min_L: int
    max_C: float
    min_parties: int = MIN_PARTIES
    release_unchanged: tuple[str, ...] = ()
    allowed_parties: tuple[str, ...] | None = None  # None: any party the CA certified
    max_epsilon: float | None = None  # None: this hospital takes part in no DP run
    allowed_models: tuple[str, ...] | None = None  # None: lkc, and dp with max_epsilon
    # tell the leader how many records Prepare has read (rounded to 2 significant digits)
    share_progress: bool = True
    identifiers: tuple[str, ...] = ()  # columns every spec declares role = "identifier"
    sensitive_column: str | None = None  # the column max_C binds (None: the spec's own)
    sensitive_values: tuple[str, ...] = ()  # values of it that max_C binds, at least
    max_specializations: int | None = None  # a DP run's h at most (None: the spec's bound)
    secure_sum: tuple[str, ...] = ("pairwise",)  # the secure sums this hospital joins
    allow_mpc: bool = False  # join m-private runs: MPC workers connect hospital to hospital
    # the privacy ledger's budgets (fedanon.ledger.budgets; None: no limit)
    max_total_epsilon: float | None = None
    max_releases: int | None = None
    max_runs_per_day: int | None = None
    max_refusals_per_hour: int | None = None
    lockout_minutes: float | None = None
    source: str = "<policy>"

    def __post_init__(self) -> None:
        def bad(key: str, value: object, expected: str) -> ConfigError:
            return ConfigError(
                f"[policy] {key} is invalid", file=self.source, value=repr(value), expected=expected
            )

        if not _is_int(self.min_K) or self.min_K < 1:
            raise bad("min_K", self.min_K, "an integer >= 1, e.g. min_K = 10")
        if not _is_int(self.min_L) or self.min_L < 1:
            raise bad("min_L", self.min_L, "an integer >= 1, e.g. min_L = 3")
        c = self.max_C
        if isinstance(c, bool) or not isinstance(c, int | float) or not 0 < c <= 1:
            raise bad("max_C", c, "a number in (0, 1], e.g. max_C = 0.5")
        if not _is_int(self.min_parties) or self.min_parties < MIN_PARTIES:
            raise bad("min_parties", self.min_parties, f"an integer >= {MIN_PARTIES}")
        names = self.release_unchanged
        if not isinstance(names, tuple) or not all(isinstance(n, str) and n for n in names):
            raise bad("release_unchanged", names, 'a list of column names, e.g. ["salary-class"]')
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise bad("release_unchanged", dup[0], "each column listed once")
        peers = self.allowed_parties
        if peers is not None and (
            not isinstance(peers, tuple) or not all(isinstance(n, str) and n for n in peers)
        ):
            raise bad("allowed_parties", peers, 'a list of party names, e.g. ["hospital-b"]')
        e = self.max_epsilon
        if e is not None and (
            isinstance(e, bool)
            or not isinstance(e, int | float)
            or not 0 < e <= MAX_EPSILON  # also refuses NaN
        ):
            raise bad("max_epsilon", e, f"a number in (0, {MAX_EPSILON}], e.g. max_epsilon = 1.0")
        models = self.allowed_models
        if models is not None:
            if (
                not isinstance(models, tuple)
                or not models
                or not all(isinstance(n, str) and n for n in models)
            ):
                raise bad("allowed_models", models, 'a non-empty list of model names, e.g. ["lkc"]')
            if len(set(models)) != len(models):
                raise bad("allowed_models", models, "each model listed once")
            for name in models:  # what a listed method needs beside (DiffGen: max_epsilon)
                lacks = registry.get(name).policy_incomplete(self)
                if lacks is not None:
                    raise bad("allowed_models", models, lacks)
        if not isinstance(self.share_progress, bool):
            raise bad("share_progress", self.share_progress, "true or false")
        if not isinstance(self.allow_mpc, bool):
            raise bad("allow_mpc", self.allow_mpc, "true or false")
        invalid = columns_invalid(
            self.identifiers, self.sensitive_column, self.sensitive_values, float(c)
        )
        if invalid is not None:
            raise bad(*invalid)
        if float(c) < 1 and self.sensitive_column is None and names:
            raise ConfigError(
                f"[policy] max_C = {float(c):g} needs sensitive_column (the hospital's column "
                "that C bounds), since release_unchanged lets columns out unchanged",
                file=self.source,
                expected="sensitive_column and sensitive_values, e.g. "
                'sensitive_column = "disease" with sensitive_values = ["HIV"] (without them '
                "a spec may release that column as 'other' and C bounds nothing); with no "
                "sensitive column among release_unchanged, max_C = 1",
            )
        h = self.max_specializations
        if h is not None and (not _is_int(h) or h < 1):
            raise bad("max_specializations", h, "an integer >= 1, e.g. max_specializations = 20")
        sums = self.secure_sum
        if (
            not isinstance(sums, tuple)
            or not sums
            or not all(m in SECURE_SUMS for m in sums)
            or len(set(sums)) != len(sums)
        ):
            raise bad("secure_sum", sums, '["pairwise"] or ["pairwise", "ring"], each once')
        check_budget_values({k: getattr(self, k) for k in BUDGET_KEYS}, bad)
        object.__setattr__(self, "max_C", float(c))
        if e is not None:
            object.__setattr__(self, "max_epsilon", float(e))

    @property
    def models(self) -> tuple[str, ...]:
        """The privacy models this hospital joins runs of."""
        if self.allowed_models is not None:
            return self.allowed_models
        return tuple(m.name for m in registry.methods() if m.policy_default(self))

    # ------------------------------------------------------------------------- checks
    def check_model(self, model: str) -> None:
        """Refuse a run whose ``[privacy] model`` this policy does not list (checked on the
        spec text, before the spec is parsed or any plug-in imported)."""
        if model not in self.models:
            listed = ", ".join(repr(n) for n in self.models)
            raise PolicyRefused(
                "allowed_models",
                f"model = {model!r} is not in allowed_models = [{listed}]",
            )

    def check_secure_sum(self, method: str) -> None:
        """Refuse a run summed by a method this policy does not list."""
        if method not in self.secure_sum:
            listed = ", ".join(f'"{m}"' for m in self.secure_sum)
            raise PolicyRefused(
                "secure_sum", f'secure_sum = "{method}" is not in secure_sum = [{listed}]'
            )

    def check(self, spec: RunSpec, ring: Sequence[str], me: str, leader: str | None = None) -> None:
        """Raise :class:`PolicyRefused` unless this policy accepts ``spec`` on ``ring``."""
        self.check_peers(ring, me, leader)
        self.check_mpc(spec, len(ring))
        self.check_spec(spec)

    def check_mpc(self, spec: RunSpec, n_parties: int) -> None:
        """m-privacy's MPC: opted in (``allow_mpc``), with an honest majority of hospitals."""
        if spec.m <= 0:
            return
        if not self.allow_mpc:
            raise PolicyRefused(
                "allow_mpc",
                f"[privacy] m = {spec.m} needs allow_mpc = true (its check connects this "
                "hospital's MPC worker to the other hospitals')",
            )
        check_honest_majority(spec.m, n_parties)

    def check_peers(self, ring: Sequence[str], me: str, leader: str | None = None) -> None:
        check_ring(ring, me, self.min_parties, leader)
        if self.allowed_parties is not None:
            allowed = {*self.allowed_parties, me}
            for name in ring:
                if name not in allowed:
                    raise PolicyRefused(
                        "allowed_parties", f"party {name!r} is not in allowed_parties"
                    )

    def check_spec(self, spec: RunSpec) -> None:
        """The rules of the spec's method (:meth:`fedanon.methods.base.Method.check_policy`:
        the LKC family's floors, DiffGen's max_epsilon, ...)."""
        registry.get(spec.privacy.model).check_policy(self, spec)


def check_ring(
    ring: Sequence[str], me: str, min_parties: int = MIN_PARTIES, leader: str | None = None
) -> None:
    """The ring a leader proposes: enough distinct hospitals, this one exactly once."""
    seen: set[str] = set()
    for name in ring:
        if name in seen:
            raise PolicyRefused("ring", f"the ring lists {name!r} twice")
        seen.add(name)
    if me not in seen:
        raise PolicyRefused("ring", f"the ring does not list this party ({me})")
    if leader is not None and leader in seen:
        raise PolicyRefused("ring", f"the ring lists the leader {leader!r} as a party")
    floor = max(min_parties, MIN_PARTIES)
    if len(seen) < floor:
        raise PolicyRefused("min_parties", f"ring of {len(seen)} < min_parties = {floor}")


def check_honest_majority(m: int, n_parties: int) -> None:
    """m-privacy's MPC needs an honest majority: at least 2m + 1 hospitals."""
    if m > 0 and n_parties < 2 * m + 1:
        raise PolicyRefused(
            "ring",
            f"[privacy] m = {m} needs an honest majority: at least {2 * m + 1} hospitals, "
            f"the ring has {n_parties}",
        )


def policy_for_spec(spec: RunSpec) -> PartyPolicy:
    """The policy of `fedanon federate`'s daemons for ``spec`` (one owner wrote it and holds
    every table): its method's (:meth:`fedanon.methods.base.Method.local_policy`)."""
    policy: PartyPolicy = registry.get(spec.privacy.model).local_policy(spec)
    return policy
