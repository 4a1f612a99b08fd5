"""party.toml -> a frozen, validated :class:`PartyConfig`.

    [party]
    name = "alice"                 # must match the DNS SAN of the certificate
    listen = "0.0.0.0:7443"        # port 0 = ephemeral (see --port-file)
    data = "alice.csv"             # this hospital's table (never leaves the daemon)
    spec = "run.toml"              # optional: only accept runs of exactly this spec

    [tls]
    ca = "certs/ca.pem"
    cert = "certs/alice.pem"
    key = "certs/alice.key"

    [peers]
    leader = "leader"              # the only identity allowed to drive runs

Relative paths are relative to the config file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from common.certs import validate_name
from common.errors import ConfigError
from common.tomlcfg import check_keys, parse_toml, read_config, require_str, section, tls_paths


@dataclass(frozen=True)
class PartyConfig:
    name: str
    listen: str
    data: Path
    ca: Path
    cert: Path
    key: Path
    leader: str = "leader"
    spec: Path | None = None
    source: str = "<config>"


def parse_party_config(
    text: str, source: str = "<config>", base: Path | None = None
) -> PartyConfig:
    doc = parse_toml(text, source)
    check_keys(doc, {"party", "tls", "peers"}, "top level", source)
    root = base or Path(".")
    party = section(doc, "party", source)
    check_keys(party, {"name", "listen", "data", "spec"}, "party", source)
    tls = section(doc, "tls", source)
    ca, cert, key = tls_paths(tls, root, source)
    peers = doc.get("peers", {})
    if not isinstance(peers, dict):
        raise ConfigError("[peers] must be a table", file=source)
    check_keys(peers, {"leader"}, "peers", source)
    name = validate_name(require_str(party, "name", "party", source))
    listen = require_str(party, "listen", "party", source)
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError("listen must be HOST:PORT", file=source, value=listen)
    spec = party.get("spec")
    if spec is not None and not isinstance(spec, str):
        raise ConfigError("[party] spec must be a path string", file=source)
    leader = peers.get("leader", "leader")
    if not isinstance(leader, str):
        raise ConfigError("[peers] leader must be a name", file=source)
    return PartyConfig(
        name=name,
        listen=listen,
        data=root / require_str(party, "data", "party", source),
        ca=ca,
        cert=cert,
        key=key,
        leader=validate_name(leader),
        spec=None if spec is None else root / spec,
        source=source,
    )


def load_party_config(path: Path) -> PartyConfig:
    return parse_party_config(read_config(path), str(path), path.parent)
