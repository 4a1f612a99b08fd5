"""Prepare: decide whether this hospital takes part in a proposed run, then load its table.

Order matters: the proposal (ring, spec) is checked against the hospital's policy *before*
the data file is read and long before any statistics leave the daemon.  Whatever fails once
the table is being read is a :class:`fedanon.party.faults.DataRefused`: the leader is told
only that this hospital's data does not fit the spec, never where or why.

The spec's method (:mod:`fedanon.methods.registry`) decides everything method-specific: its
rules of the hospital's policy (LKC: the floors min_K, min_L, max_C; DiffGen: max_epsilon),
the run hash, the engine party, what the policy asks of the hospital's own data and the
accepted-run log line.  A method without a federated variant is refused from its capability
(:func:`fedanon.methods.registry.require_federated_text`).  The model name is checked against
the policy's ``allowed_models`` on the leader's spec text, before the spec is parsed (no
plug-in is imported for a model not allowed here; a plug-in must be installed here too,
:mod:`fedanon.plugins`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fedanon.apispec import Spec
from fedanon.errors import ConfigError, InputError, ProtocolError, SpecError
from fedanon.io.sources import RowsRead
from fedanon.io.table import EncodedTable, Schema, encode_table
from fedanon.logsafe import safe
from fedanon.methods import registry
from fedanon.model.checks import check_class_values
from fedanon.model.peek import text_model
from fedanon.model.spec import RunSpec, run_hash
from fedanon.model.tomlcfg import parse_toml
from fedanon.party.config import PartyConfig
from fedanon.party.faults import DataRefused
from fedanon.party.run import PartyRun, Peer
from fedanon.party.tablecache import TableCache
from fedanon.security.certs import validate_name
from fedanon.security.policy import PartyPolicy, check_ring
from fedanon.tds.party import EngineParty


@dataclass(frozen=True)
class Proposal:
    """What the leader's PrepareRequest asks for (already off the wire)."""

    run_id: bytes
    spec_toml: str
    files: Mapping[str, bytes]
    ring: tuple[Peer, ...]
    position: int
    secure_sum: str = "pairwise"  # how the run sums: pairwise or ring


def _leader_spec(
    p: Proposal, policy: PartyPolicy | None = None
) -> tuple[RunSpec, Callable[[str], str]]:
    source = "<leader spec>"
    parse_toml(p.spec_toml.removeprefix("\ufeff"), source, error=SpecError)  # names the source
    method = registry.require_federated_text(p.spec_toml, source)
    if policy is not None:  # no plug-in is imported for a model not allowed here
        method.admit_model(policy, text_model(p.spec_toml))
    spec = Spec.from_text(p.spec_toml, source).run_spec  # the one spec; checked by its method
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


def _pinned_spec(path: Path) -> tuple[RunSpec, Callable[[str], str]]:
    """The spec this daemon pinned (``[party] spec``), of any federated method."""
    registry.require_federated(path)
    one = Spec.from_toml(path)  # the one spec; checked by its method
    return one.run_spec, one.taxonomy_reader()


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
        cfg.policy.check_secure_sum(p.secure_sum)
        cfg.policy.check(spec, names, cfg.name, cfg.leader)  # the method's rules
    else:  # a pinned spec: the ring rules still hold
        check_ring(names, cfg.name, leader=cfg.leader)
    if p.position >= len(p.ring) or p.ring[p.position].name != cfg.name:
        raise ProtocolError(f"ring position {p.position} is not this party ({cfg.name})")
    check_class_values(spec)


def new_party(spec: RunSpec, schema: Schema, table: object) -> tuple[EngineParty, bytes]:
    """The party of the run's method and the run hash it answers the leader with (``table``:
    the method's :meth:`~fedanon.methods.base.Method.party_table`)."""
    method = registry.get(spec.privacy.model)
    return method.new_party(spec, schema, table), method.run_hash(spec, schema.files)


def prepare_run(
    cfg: PartyConfig,
    p: Proposal,
    on_accepted: Callable[[], None] | None = None,
    tables: TableCache | None = None,
    progress: RowsRead | None = None,
    before_read: Callable[[Proposal, RunSpec, bytes], None] | None = None,
) -> tuple[PartyRun, bytes]:
    """Check the proposal, then read and encode this party's table (or take it from
    ``tables``, the daemon's cache). Returns (run, run hash).

    ``on_accepted`` runs once the proposal passed the checks, before the table is read (the
    daemon starts connecting to its ring successor there); ``progress`` is told the records
    read so far; ``before_read(proposal, spec, run hash)`` judges what needs no data (the
    ledger's budgets) before the table is read."""
    spec, reader = _pinned_spec(cfg.spec) if cfg.spec is not None else _leader_spec(p, cfg.policy)
    method = registry.get(spec.privacy.model)
    check_proposal(cfg, p, spec)
    if on_accepted is not None:
        on_accepted()
    schema = method.schema(spec, reader)  # the leader's taxonomies: no data read yet
    if before_read is not None:  # the run hash new_party answers with, from the spec alone
        before_read(p, spec, method.run_hash(spec, schema.files))
    try:  # from here on, what fails depends on the data: the leader learns one fixed sentence
        if tables is None:
            table = encode_table(schema, cfg.data, progress, cfg.memory_budget, federated=True)
        else:
            table = tables.get(run_hash(spec, schema.files), schema, progress)
        method.check_own_data(cfg.policy, spec, table)
        table = method.party_table(spec, schema, table, cfg.data)  # e.g. diagnosis codes
        party, digest = new_party(spec, schema, table)
        run = PartyRun(p.run_id, cfg.name, spec, party, p.ring, p.position, cfg.leader)
        run.dp = method.party_params(spec)
        run.speculate()  # round 0's statistics while the leader hears from the other parties
    except Exception as exc:  # a bug's text may hold a value too: never sent, type logged
        raise DataRefused(exc) from exc
    return run, digest


def preload_pinned(
    cfg: PartyConfig,
    tables: TableCache,
    done: Callable[[EncodedTable | None], None] | None = None,
) -> bool:
    """A daemon with a pinned spec: load its table now, before the first Prepare; ``done``
    and the result as :meth:`TableCache.preload` (False without a pinned spec)."""
    if cfg.spec is None:
        return False
    spec, reader = _pinned_spec(cfg.spec)
    schema = registry.get(spec.privacy.model).schema(spec, reader)
    return tables.preload(run_hash(spec, schema.files), schema, done)


def accepted_line(
    run: PartyRun, leader: str, digest: bytes, policy: PartyPolicy | None = None
) -> str:
    """The one log line of an accepted run: what was agreed, never a record value (the
    policy's own sensitive values first, in full; the terms are the method's)."""
    spec = run.spec
    qids = ",".join(a.name for a in spec.qids)
    model, unchanged, binds = registry.get(spec.privacy.model).accepted_terms(spec, policy)
    return (
        f"run {run.run_id.hex()[:8]} accepted: leader={safe(leader, 64)} "
        f"ring={len(run.ring)} position={run.position} {model} qids=[{safe(qids, 400)}] "
        f"unchanged=[{safe(unchanged, 400)}] {binds} "
        f"spec={digest.hex()[:16]} rows={run.party.table.n_rows}"
    )
