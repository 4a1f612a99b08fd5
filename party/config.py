"""party.toml -> a frozen, validated :class:`PartyConfig`.

    [party]
    name = "alice"                 # must match the DNS SAN of the certificate
    listen = "0.0.0.0:7443"        # port 0 = ephemeral (see --port-file)
    data = "alice.csv"             # this hospital's table (never leaves the daemon): a CSV
                                   # (optionally .gz), a .parquet file, or a database:
                                   # data = "postgresql://fedanon@db.hospital.local/ehr"
                                   # with query = "SELECT ..." or table = "encounters"
                                   # (password from PGPASSWORD or ~/.pgpass, never here)
    spec = "run.toml"              # optional: only accept runs of exactly this spec
    run_idle_timeout_seconds = 3600  # optional: forget a run the leader moved on by nothing
                                   # new (instruction, sum, check) for this long
    run_max_age_seconds = 86400    # optional: forget a run open for longer than this
    max_wait_seconds = 600         # optional: the longest any call waits here, whatever
                                   # deadline the leader gave it
    max_leader_calls = 16          # optional: calls the leader may have in flight here at
                                   # once (its runs together); one more is refused
    max_peer_calls = 4             # optional: the same for any other federation member
                                   # (a ring predecessor's Relay, a health Check); all of
                                   # them together get the threads the leader leaves, less 4
                                   # (fedanon.party.peerlimit)
    keep_table = true              # optional: keep the encoded table for the next run of the
                                   # same spec while the file is unchanged (a pinned spec's
                                   # table is loaded at start); false frees it with each run
    memory_budget = "auto"         # optional: a table needing more ("16GB") is kept out of
                                   # core (memory-mapped codes, chunked passes); "auto": half
                                   # the available memory; "off": never (fedanon.io.spill)

    [policy]                       # required unless spec is pinned (see fedanon.security.policy)
    min_K = 10
    min_L = 3
    max_C = 0.5
    min_parties = 3
    release_unchanged = ["marital-status", "salary-class"]
    sensitive_column = "marital-status"  # required with max_C < 1 and columns released
    sensitive_values = ["Divorced"]      # unchanged: the column and values C bounds
    allowed_parties = ["bob", "carol"]   # optional: the only hospitals to share a ring with
    max_epsilon = 1.0              # optional: join DP (model = "dp") runs up to this epsilon
                                   # (then max_total_epsilon is required)
    allowed_models = ["lkc"]       # optional: the privacy models joined (default lkc, and dp
                                   # with max_epsilon); a plug-in must be installed here too

    max_total_epsilon = 2.0        # budgets kept in the privacy ledger (fedanon.ledger):
    max_releases = 5               #   total epsilon and distinct releases per table,
    max_runs_per_day = 20          #   runs per leader in 24 hours,
    max_refusals_per_hour = 10     #   refused calls of one identity or address before
    lockout_minutes = 60           #   that peer is locked out (for this long)

    allow_mpc = true               # optional: join m-private runs ([privacy] m > 0), whose
                                   # check runs an MPC among the hospitals (needs [mpc])

    [mpc]                          # optional: where this hospital's MPC worker listens for
    listen = "0.0.0.0:7500"        # the other hospitals' workers (m-private runs only)

    [ledger]
    path = "alice.ledger.sqlite"   # optional: default NAME.ledger.sqlite beside party.toml

    [tls]
    ca = "certs/ca.pem"
    cert = "certs/alice.pem"
    key = "certs/alice.key"

    [peers]
    leader = "leader"              # the only identity allowed to drive runs

Relative paths are relative to the config file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from fedanon.errors import ConfigError
from fedanon.io.sources import DataSource, parse_source
from fedanon.ledger.keys import split_budgets
from fedanon.model.tomlcfg import (
    check_keys,
    parse_toml,
    read_config,
    require_host_port,
    require_str,
    section,
    tls_paths,
)
from fedanon.party.peerlimit import (
    DEFAULT_LEADER_CALLS,
    DEFAULT_PEER_CALLS,
    MAX_LEADER_CALLS,
    RESERVED,
    SERVER_THREADS,
    others_share,
)
from fedanon.security.certs import config_name
from fedanon.security.policy import PartyPolicy
from fedanon.security.policytoml import parse_policy

DEFAULT_IDLE_TIMEOUT_S = 3600.0
DEFAULT_MAX_AGE_S = 86400.0  # a run open for a day is dropped (its MPC port freed)
DEFAULT_MAX_WAIT_S = 600.0  # a call waits at most this long, whatever its deadline
MAX_WAIT_LIMIT_S = 86400.0


@dataclass(frozen=True)
class PartyConfig:
    name: str
    listen: str
    data: DataSource  # a file path, or a PostgreSQL URL + query / table
    ca: Path
    cert: Path
    key: Path
    leader: str = "leader"
    spec: Path | None = None
    policy: PartyPolicy | None = None
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_age_s: float = DEFAULT_MAX_AGE_S  # [party] run_max_age_seconds
    max_wait_s: float = DEFAULT_MAX_WAIT_S  # [party] max_wait_seconds
    max_leader_calls: int = DEFAULT_LEADER_CALLS  # [party] max_leader_calls
    max_peer_calls: int = DEFAULT_PEER_CALLS  # [party] max_peer_calls
    source: str = "<config>"
    keep_table: bool = True
    memory_budget: str | None = None  # None: FEDANON_MEMORY_BUDGET, else "auto"
    ledger: Path | None = None  # [ledger] path (load_party_config: NAME.ledger.sqlite beside)
    mpc_listen: str | None = None  # [mpc] listen: the MPC worker's HOST:PORT (m-privacy)

    def require_policy(self) -> None:
        """A daemon must know what it accepts: a pinned spec or a [policy] table."""
        if self.spec is None and self.policy is None:
            raise ConfigError(
                "the daemon would accept any run the leader sends: add a [policy] table "
                "(min_K, min_L, max_C, release_unchanged) or pin the run with "
                '[party] spec = "run.toml"',
                file=self.source,
                expected=(
                    "e.g. [policy] min_K = 10, min_L = 3, max_C = 0.5, "
                    'release_unchanged = ["salary-class"]'
                ),
            )


def parse_party_config(
    text: str, source: str = "<config>", base: Path | None = None
) -> PartyConfig:
    doc = parse_toml(text, source)
    check_keys(doc, {"party", "tls", "peers", "policy", "ledger", "mpc"}, "top level", source)
    root = base or Path(".")
    party = section(doc, "party", source)
    check_keys(
        party,
        {
            "name",
            "listen",
            "data",
            "query",
            "table",
            "spec",
            "run_idle_timeout_seconds",
            "run_max_age_seconds",
            "max_wait_seconds",
            "max_leader_calls",
            "max_peer_calls",
            "keep_table",
            "memory_budget",
        },
        "party",
        source,
    )
    tls = section(doc, "tls", source)
    ca, cert, key = tls_paths(tls, root, source)
    peers = doc.get("peers", {})
    if not isinstance(peers, dict):
        raise ConfigError("[peers] must be a table", file=source)
    check_keys(peers, {"leader"}, "peers", source)
    name = config_name(require_str(party, "name", "party", source), "[party] name", source)
    listen = require_host_port(party, "listen", "party", source, ephemeral=True)
    spec = party.get("spec")
    if spec is not None and (not isinstance(spec, str) or not spec):
        raise ConfigError("[party] spec must be a path string", file=source, value=repr(spec))
    leader = config_name(peers.get("leader", "leader"), "[peers] leader", source)
    idle = _seconds(party, "run_idle_timeout_seconds", DEFAULT_IDLE_TIMEOUT_S, 7 * 86400, source)
    age = _seconds(party, "run_max_age_seconds", DEFAULT_MAX_AGE_S, 30 * 86400, source)
    wait = _seconds(party, "max_wait_seconds", DEFAULT_MAX_WAIT_S, MAX_WAIT_LIMIT_S, source)
    leader_calls, peer_calls = _call_limits(party, source)
    keep = party.get("keep_table", True)
    if not isinstance(keep, bool):
        raise ConfigError("[party] keep_table must be true or false", file=source, value=repr(keep))
    budget = party.get("memory_budget")
    if budget is not None:
        from fedanon.errors import SpecError
        from fedanon.io.spill import parse_budget

        try:
            parse_budget(budget if isinstance(budget, str) else "")
        except SpecError as exc:
            raise ConfigError(
                "[party] memory_budget is invalid",
                file=source,
                value=repr(budget),
                expected=exc.expected,
            ) from exc
    raw_policy = doc.get("policy")
    if raw_policy is not None and not isinstance(raw_policy, dict):
        raise ConfigError("[policy] must be a table", file=source)
    return PartyConfig(
        name=name,
        listen=listen,
        data=_data_source(party, root, source),
        ca=ca,
        cert=cert,
        key=key,
        leader=leader,
        spec=None if spec is None else root / spec,
        policy=None if raw_policy is None else _policy(raw_policy, source),
        idle_timeout_s=idle,
        max_age_s=age,
        max_wait_s=wait,
        max_leader_calls=leader_calls,
        max_peer_calls=peer_calls,
        source=source,
        keep_table=keep,
        memory_budget=budget,
        ledger=_ledger_path(doc, root, source),
        mpc_listen=_mpc_listen(doc, source),
    )


def _seconds(
    table: dict[str, object], key: str, default: float, limit: float, source: str
) -> float:
    """``[party] key``: a number of seconds in (0, limit]."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= limit:
        raise ConfigError(
            f"[party] {key} is invalid",
            file=source,
            value=repr(value),
            expected=f"a number of seconds in (0, {limit:g}]",
        )
    return float(value)


def _call_limits(party: dict[str, object], source: str) -> tuple[int, int]:
    """``[party] max_leader_calls`` and ``max_peer_calls``: whole numbers such that the
    leader and the other members at their limits leave threads free."""
    leader = _count(party, "max_leader_calls", DEFAULT_LEADER_CALLS, MAX_LEADER_CALLS, source)
    share = others_share(leader)
    peer = _count(party, "max_peer_calls", min(DEFAULT_PEER_CALLS, share), share, source)
    return leader, peer


def _count(table: dict[str, object], key: str, default: int, limit: int, source: str) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        why = f" (the daemon's {SERVER_THREADS} server threads less {RESERVED} kept free" + (
            ")" if key == "max_leader_calls" else " and max_leader_calls)"
        )
        raise ConfigError(
            f"[party] {key} is invalid",
            file=source,
            value=repr(value),
            expected=f"a whole number of calls in [1, {limit}]{why}",
        )
    return value


def _mpc_listen(doc: dict[str, object], source: str) -> str | None:
    """``[mpc] listen``: HOST:PORT of the MPC worker (a fixed port: the other hospitals'
    workers connect to it), or None when the section is absent."""
    table = doc.get("mpc")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError("[mpc] must be a table", file=source)
    check_keys(table, {"listen"}, "mpc", source)
    return require_host_port(table, "listen", "mpc", source, example="0.0.0.0:7500")


def _data_source(party: dict[str, object], root: Path, source: str) -> DataSource:
    text = require_str(party, "data", "party", source)
    extra: dict[str, str | None] = {}
    for key in ("query", "table"):
        value = party.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"[party] {key} must be a non-empty string", file=source)
        extra[key] = value
    try:
        return parse_source(text, extra["query"], extra["table"], root)
    except ConfigError as exc:
        raise ConfigError(
            f"[party] data: {exc.message}", file=source, value=exc.value, expected=exc.expected
        ) from None


def load_party_config(path: Path) -> PartyConfig:
    cfg = parse_party_config(read_config(path), str(path), path.parent)
    if cfg.ledger is None:
        from fedanon.ledger.daemon import default_path

        cfg = replace(cfg, ledger=default_path(path))
    return cfg


def _policy(table: dict[str, object], source: str) -> PartyPolicy:
    """``[policy]``: the rules (:func:`parse_policy`) plus the ledger's budget keys.

    ``max_epsilon`` (DP runs joined) needs ``max_total_epsilon``: without it the same DP spec
    is accepted without limit, and averaging its releases removes the noise."""
    rest, budgets = split_budgets(table)
    policy = parse_policy(rest, source)
    if policy.max_epsilon is not None and budgets.get("max_total_epsilon") is None:
        raise ConfigError(
            "[policy] max_epsilon without max_total_epsilon: the same DP run could be repeated "
            "without limit (averaging its releases removes the noise)",
            file=source,
            expected=(
                "max_total_epsilon too, the epsilon all DP runs over this table may spend "
                f"together, e.g. max_total_epsilon = {2 * policy.max_epsilon:g}"
            ),
        )
    return replace(policy, **budgets) if budgets else policy


def _ledger_path(doc: dict[str, object], root: Path, source: str) -> Path | None:
    """``[ledger] path`` (relative to the config file), or None for the default."""
    table = doc.get("ledger", {})
    if not isinstance(table, dict):
        raise ConfigError("[ledger] must be a table", file=source)
    check_keys(table, {"path"}, "ledger", source)
    path = table.get("path")
    if path is None:
        return None
    if not isinstance(path, str) or not path:
        raise ConfigError(
            "[ledger] path must be a file path",
            file=source,
            value=repr(path),
            expected='e.g. path = "/var/lib/fedanon/ledger.sqlite"',
        )
    return root / path
