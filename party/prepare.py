"""Prepare: decide whether this hospital takes part in a proposed run, then load its table.

Order matters: the proposal (ring, spec) is checked against the hospital's policy *before*
the data file is read and long before any statistics leave the daemon.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from common.certs import validate_name
from common.engine import LocalParty
from common.errors import ConfigError, InputError, ProtocolError
from common.logsafe import safe
from common.policy import UNCHANGED_ROLES, check_ring
from common.spec import RunSpec, load_spec, parse_spec, run_hash
from common.table import build_schema, encode_table
from party.config import PartyConfig
from party.run import PartyRun, Peer


@dataclass(frozen=True)
class Proposal:
    """What the leader's PrepareRequest asks for (already off the wire)."""

    run_id: bytes
    spec_toml: str
    files: Mapping[str, bytes]
    ring: tuple[Peer, ...]
    position: int


def _leader_spec(p: Proposal) -> tuple[RunSpec, Callable[[str], str]]:
    spec = parse_spec(p.spec_toml, "<leader spec>")
    texts: dict[str, str] = {}
    for rel, raw in p.files.items():
        try:
            texts[rel] = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"taxonomy file {safe(rel, 120)!r} sent by the leader is not UTF-8 "
                f"(byte {exc.start})",
                expected="UTF-8 text",
            ) from None

    def reader(rel: str) -> str:
        if rel not in texts:
            raise InputError(f"taxonomy file {safe(rel, 120)!r} not sent by the leader")
        return texts[rel]

    return spec, reader


def check_proposal(cfg: PartyConfig, p: Proposal, spec: RunSpec) -> None:
    """Ring and policy checks; raises PolicyRefused / ProtocolError. Reads no data."""
    if len(p.run_id) != 16:
        raise ProtocolError("run id must be 16 bytes")
    for peer in p.ring:
        try:
            validate_name(peer.name)
        except ConfigError:
            raise ProtocolError(
                f"the ring names an invalid party {safe(peer.name, 80)!r}"
            ) from None
        if not peer.address:
            raise ProtocolError(f"the ring gives no address for {peer.name}")
    names = [peer.name for peer in p.ring]
    if cfg.policy is not None:
        cfg.policy.check(spec, names, cfg.name, cfg.leader)
    else:  # a pinned spec: the ring rules still hold
        check_ring(names, cfg.name, leader=cfg.leader)
    if p.position >= len(p.ring) or p.ring[p.position].name != cfg.name:
        raise ProtocolError(f"ring position {p.position} is not this party ({cfg.name})")
    if spec.class_attr is not None and spec.class_attr.values is None:
        raise InputError(
            f"the class attribute {spec.class_attr.name!r} needs values = [...] in the spec"
        )


def prepare_run(
    cfg: PartyConfig, p: Proposal, on_accepted: Callable[[], None] | None = None
) -> tuple[PartyRun, bytes]:
    """Check the proposal, then read and encode this party's table. Returns (run, run hash).

    ``on_accepted`` runs once the proposal passed the checks, before the table is read (the
    daemon starts connecting to its ring successor there)."""
    if cfg.spec is not None:
        spec, reader = load_spec(cfg.spec)
    else:
        spec, reader = _leader_spec(p)
    check_proposal(cfg, p, spec)
    if on_accepted is not None:
        on_accepted()
    schema = build_schema(spec, reader)
    table = encode_table(schema, cfg.data)
    run = PartyRun(
        p.run_id, cfg.name, spec, LocalParty(schema, table), p.ring, p.position, cfg.leader
    )
    return run, run_hash(spec, schema.files)


def accepted_line(run: PartyRun, leader: str, digest: bytes) -> str:
    """The one log line of an accepted run: what was agreed, never a record value."""
    spec = run.spec
    p = spec.privacy
    qids = ",".join(a.name for a in spec.qids)
    unchanged = ",".join(a.name for a in spec.attributes if a.role in UNCHANGED_ROLES)
    return (
        f"run {run.run_id.hex()[:8]} accepted: leader={safe(leader, 64)} "
        f"ring={len(run.ring)} position={run.position} L={p.L} K={p.K} C={float(p.C):g} "
        f"score={spec.score} qids=[{safe(qids, 400)}] unchanged=[{safe(unchanged, 400)}] "
        f"spec={digest.hex()[:16]} rows={run.party.table.n_rows}"
    )
