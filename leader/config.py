"""federation.toml -> a frozen, validated :class:`FederationConfig`.

    [run]
    spec = "run.toml"
    output = "released.csv"
    report = "report.json"       # optional
    union = "auto"               # optional: auto | sketch | counts | mixnet (leader/union.py)
    secure_sum = "pairwise"      # optional: pairwise | ring (leader/pairwise.py, leader/ring.py)
    max_field_bytes = 64         # optional: padded size of each non-QID field (mix-net only)
    deadline_seconds = 3600      # optional: budget of the whole run (Prepare included)
    connect_timeout_seconds = 10 # optional: how long to wait for each party to answer

    [leader]
    name = "leader"

    [tls]
    ca = "certs/ca.pem"
    cert = "certs/leader.pem"
    key = "certs/leader.key"

    [[party]]                    # ring order; at least 3
    name = "alice"
    address = "alice.example:7443"
    mpc_address = "alice.example:7500"  # optional: its MPC worker ([mpc] listen of its
                                        # party.toml), needed by m-private specs ([privacy] m)

Relative paths are relative to the config file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fedanon.errors import ConfigError
from fedanon.model.tomlcfg import (
    check_keys,
    parse_toml,
    read_config,
    require_host_port,
    require_str,
    tls_paths,
)
from fedanon.security.certs import config_name

MIN_PARTIES = 3
UNION_CHOICES = ("auto", "sketch", "counts", "mixnet")  # fedanon.leader.union.CHOICES
SECURE_SUM_CHOICES = ("pairwise", "ring")  # fedanon.net.convert.SECURE_SUMS


@dataclass(frozen=True)
class PartyAddress:
    name: str
    address: str
    mpc_address: str = ""  # its MPC worker's host:port (m-privacy; empty: none)


@dataclass(frozen=True)
class FederationConfig:
    spec: Path
    output: Path
    report: Path | None
    name: str
    ca: Path
    cert: Path
    key: Path
    parties: tuple[PartyAddress, ...]
    max_field_bytes: int = 64
    deadline_seconds: float = 3600.0
    union: str = "auto"
    connect_timeout_seconds: float = 10.0
    source: str = "<config>"
    secure_sum: str = "pairwise"

    def __post_init__(self) -> None:
        if self.secure_sum not in SECURE_SUM_CHOICES:
            raise ConfigError(
                f"[run] secure_sum must be one of {', '.join(SECURE_SUM_CHOICES)}",
                file=self.source,
                value=str(self.secure_sum),
            )


def check_parties(parties: tuple[PartyAddress, ...], source: str) -> None:
    if len(parties) < MIN_PARTIES:
        raise ConfigError(
            f"a federation needs at least {MIN_PARTIES} data-holding parties, got {len(parties)} "
            "(with two, each party could subtract its own counts from the totals)",
            file=source,
        )
    names = [p.name for p in parties]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError("party listed twice", file=source, value=dup[0])


def parse_federation_config(
    text: str, source: str = "<config>", base: Path | None = None
) -> FederationConfig:
    doc = parse_toml(text, source)
    check_keys(doc, {"run", "leader", "tls", "party"}, "top level", source)
    root = base or Path(".")
    run = doc.get("run")
    tls = doc.get("tls")
    if not isinstance(run, dict) or not isinstance(tls, dict):
        raise ConfigError("the config needs [run] and [tls] tables", file=source)
    check_keys(
        run,
        {
            "spec",
            "output",
            "report",
            "max_field_bytes",
            "deadline_seconds",
            "union",
            "connect_timeout_seconds",
            "secure_sum",
        },
        "run",
        source,
    )
    ca, cert, key = tls_paths(tls, root, source)
    leader = doc.get("leader", {})
    if not isinstance(leader, dict):
        raise ConfigError("[leader] must be a table", file=source)
    check_keys(leader, {"name"}, "leader", source)
    leader_name = require_str(leader, "name", "leader", source) if "name" in leader else "leader"
    raw_parties = doc.get("party", [])
    if not isinstance(raw_parties, list):
        raise ConfigError("parties are [[party]] tables", file=source)
    parties = []
    for i, p in enumerate(raw_parties, 1):
        if not isinstance(p, dict):
            raise ConfigError(f"[[party]] #{i} is not a table", file=source)
        check_keys(p, {"name", "address", "mpc_address"}, f"party #{i}", source)
        parties.append(
            PartyAddress(
                config_name(
                    require_str(p, "name", f"party #{i}", source), f"[[party]] #{i} name", source
                ),
                require_host_port(p, "address", f"party #{i}", source),
                require_host_port(p, "mpc_address", f"party #{i}", source)
                if "mpc_address" in p
                else "",
            )
        )
    check_parties(tuple(parties), source)
    mfb = run.get("max_field_bytes", 64)
    if not isinstance(mfb, int) or isinstance(mfb, bool) or not 1 <= mfb <= 1 << 16:
        raise ConfigError(
            "max_field_bytes must be an integer in 1..65536", file=source, value=str(mfb)
        )
    deadline = run.get("deadline_seconds", 3600)
    if not isinstance(deadline, int | float) or isinstance(deadline, bool) or deadline <= 0:
        raise ConfigError(
            "[run] deadline_seconds must be a positive number of seconds",
            file=source,
            value=repr(deadline),
        )
    connect = run.get("connect_timeout_seconds", 10)
    if isinstance(connect, bool) or not isinstance(connect, int | float) or not 0 < connect <= 600:
        raise ConfigError(
            "connect_timeout_seconds must be a number of seconds in (0, 600]",
            file=source,
            value=str(connect),
        )
    union = run.get("union", "auto")
    if union not in UNION_CHOICES:
        raise ConfigError(
            f"[run] union must be one of {', '.join(UNION_CHOICES)}", file=source, value=str(union)
        )
    report = run.get("report")
    if report is not None and not isinstance(report, str):
        raise ConfigError("[run] report must be a path", file=source)
    return FederationConfig(
        spec=root / require_str(run, "spec", "run", source),
        output=root / require_str(run, "output", "run", source),
        report=None if report is None else root / report,
        name=config_name(leader_name, "[leader] name", source),
        ca=ca,
        cert=cert,
        key=key,
        parties=tuple(parties),
        max_field_bytes=mfb,
        deadline_seconds=float(deadline),
        connect_timeout_seconds=float(connect),
        union=str(union),
        source=source,
        secure_sum=str(run.get("secure_sum", "pairwise")),
    )


def load_federation_config(path: Path) -> FederationConfig:
    return parse_federation_config(read_config(path), str(path), path.parent)
