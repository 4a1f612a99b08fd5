"""Prepare: decide whether this hospital takes part in a proposed run, then load its table.

Order matters: the proposal (ring, spec) is checked against the hospital's policy *before*
the data file is read and long before any statistics leave the daemon.  Whatever fails once
the table is being read is a :class:`fedanon.party.faults.DataRefused`: the leader is told
only that this hospital's data does not fit the spec, never where or why.

A spec with ``[privacy] model = "dp"`` (DiffGen) is checked against the policy's DP rules
(``max_epsilon``) and runs a :class:`fedanon.dp.party.DPParty`; everything else runs the
round loop with the spec's registered privacy model (LKC by default; a plug-in must be
installed here too, :mod:`fedanon.plugins`).  The model name is checked against the policy's
``allowed_models`` on the leader's spec text, before the spec is parsed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fedanon.dp.party import DPParty
from fedanon.dp.spec import DPSpec, dp_run_hash, load_dp_spec, parse_dp_spec, privacy_model
from fedanon.errors import ConfigError, InputError, ProtocolError
from fedanon.io.sources import RowsRead
from fedanon.io.table import EncodedTable, Schema, build_schema, encode_table
from fedanon.logsafe import safe
from fedanon.model.checks import check_class_values
from fedanon.model.spec import RunSpec, load_spec, parse_spec, run_hash
from fedanon.party.config import PartyConfig
from fedanon.party.faults import DataRefused
from fedanon.party.owncheck import check_own_sensitive
from fedanon.party.run import PartyRun, Peer
from fedanon.party.tablecache import TableCache
from fedanon.security.certs import validate_name
from fedanon.security.policy import UNCHANGED_ROLES, PartyPolicy, check_ring
from fedanon.tds.party import EngineParty
from fedanon.union.localparty import LocalParty


@dataclass(frozen=True)
class Proposal:
    """What the leader's PrepareRequest asks for (already off the wire)."""

    run_id: bytes
    spec_toml: str
    files: Mapping[str, bytes]
    ring: tuple[Peer, ...]
    position: int
    secure_sum: str = "pairwise"  # how the run sums: pairwise or ring


AnySpec = RunSpec | DPSpec


def _leader_spec(
    p: Proposal, policy: PartyPolicy | None = None
) -> tuple[AnySpec, Callable[[str], str]]:
    source = "<leader spec>"
    model = privacy_model(p.spec_toml, source)
    if policy is not None and model != "dp":  # dp: its own rules (max_epsilon) below
        policy.check_model(model)  # no plug-in is imported for a model not allowed here
    dp = model == "dp"
    spec: AnySpec = parse_dp_spec(p.spec_toml, source) if dp else parse_spec(p.spec_toml, source)
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


def _pinned_spec(path: Path) -> tuple[AnySpec, Callable[[str], str]]:
    """The spec this daemon pinned (``[party] spec``), LKC or DP."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return load_spec(path)  # reports the unreadable file
    if privacy_model(text, str(path)) == "dp":
        return load_dp_spec(path)
    return load_spec(path)


def check_proposal(cfg: PartyConfig, p: Proposal, spec: AnySpec) -> None:
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
        if isinstance(spec, DPSpec):
            cfg.policy.check_dp(spec, names, cfg.name, cfg.leader)
        else:
            cfg.policy.check(spec, names, cfg.name, cfg.leader)
    else:  # a pinned spec: the ring rules still hold
        check_ring(names, cfg.name, leader=cfg.leader)
    if p.position >= len(p.ring) or p.ring[p.position].name != cfg.name:
        raise ProtocolError(f"ring position {p.position} is not this party ({cfg.name})")
    check_class_values(spec.run if isinstance(spec, DPSpec) else spec)


def new_party(spec: AnySpec, schema: Schema, table: EncodedTable) -> tuple[EngineParty, bytes]:
    """The party of the run's model and the run hash it answers the leader with."""
    if isinstance(spec, DPSpec):  # covers epsilon, h and the score
        party = DPParty(schema, table, max_selections=spec.params.specializations)
        return party, dp_run_hash(spec, schema.files)
    return LocalParty(schema, table), run_hash(spec, schema.files)


def prepare_run(
    cfg: PartyConfig,
    p: Proposal,
    on_accepted: Callable[[], None] | None = None,
    tables: TableCache | None = None,
    progress: RowsRead | None = None,
    before_read: Callable[[Proposal, AnySpec, bytes], None] | None = None,
) -> tuple[PartyRun, bytes]:
    """Check the proposal, then read and encode this party's table (or take it from
    ``tables``, the daemon's cache). Returns (run, run hash).

    ``on_accepted`` runs once the proposal passed the checks, before the table is read (the
    daemon starts connecting to its ring successor there); ``progress`` is told the records
    read so far; ``before_read(proposal, spec, run hash)`` judges what needs no data (the
    ledger's budgets) before the table is read."""
    spec, reader = _pinned_spec(cfg.spec) if cfg.spec is not None else _leader_spec(p, cfg.policy)
    check_proposal(cfg, p, spec)
    if on_accepted is not None:
        on_accepted()
    run_spec = spec.run if isinstance(spec, DPSpec) else spec
    schema = build_schema(run_spec, reader)  # the leader's taxonomies: no data read yet
    if before_read is not None:  # the run hash new_party answers with, from the spec alone
        digest = dp_run_hash(spec, schema.files) if isinstance(spec, DPSpec) else None
        before_read(p, spec, digest or run_hash(run_spec, schema.files))
    try:  # from here on, what fails depends on the data: the leader learns one fixed sentence
        if tables is None:
            table = encode_table(schema, cfg.data, progress, cfg.memory_budget)
        else:
            table = tables.get(run_hash(run_spec, schema.files), schema, progress)
        if not isinstance(spec, DPSpec):  # the policy's sensitive values bind something
            check_own_sensitive(cfg.policy, spec, table)
        party, digest = new_party(spec, schema, table)
        run = PartyRun(p.run_id, cfg.name, run_spec, party, p.ring, p.position, cfg.leader)
        if isinstance(spec, DPSpec):
            run.dp = spec.params
        run.speculate()  # round 0's statistics while the leader hears from the other parties
    except Exception as exc:  # a bug's text may hold a value too: never sent, type logged
        raise DataRefused(exc) from exc
    return run, digest


def preload_pinned(cfg: PartyConfig, tables: TableCache) -> None:
    """A daemon with a pinned spec: load its table now, before the first Prepare."""
    if cfg.spec is None:
        return
    spec, reader = _pinned_spec(cfg.spec)
    run_spec = spec.run if isinstance(spec, DPSpec) else spec
    schema = build_schema(run_spec, reader)
    tables.preload(run_hash(run_spec, schema.files), schema)


def confidence_binds(spec: RunSpec, required: Sequence[str] = ()) -> str:
    """What C actually bounds in an accepted run: the sensitive column and values (spec
    values the policy checked, not record values), or nothing.  ``required`` (the policy's
    ``sensitive_values``) are listed first and in full, never cut off; the spec's other
    values follow, counted (listed while short)."""
    terms = spec.privacy.as_lkc(len(spec.qids))
    sens = spec.sensitive_attr
    if terms is None or sens is None or not terms.sensitive_values:
        return "binds=[nothing: no sensitive values]"
    if terms.C >= 1:
        return "binds=[nothing: C = 1]"
    own = [v for v in required if v in terms.sensitive_values]
    extra = [v for v in terms.sensitive_values if v not in own]
    shown = ",".join(safe(v, 100) for v in own)
    if extra:
        listed = ",".join(extra)
        more = f"{len(extra)} more of the spec"
        tail = f"{more}: {safe(listed, 200)}" if len(listed) <= 200 else more
        shown = f"{shown} + {tail}" if shown else f"{len(extra)} of the spec: {safe(listed, 200)}"
    return f"binds=[C={float(terms.C):g} on {safe(sens.name, 100)}: {shown}]"


def accepted_line(
    run: PartyRun, leader: str, digest: bytes, policy: PartyPolicy | None = None
) -> str:
    """The one log line of an accepted run: what was agreed, never a record value (the
    policy's own sensitive values first, in full)."""
    spec = run.spec
    qids = ",".join(a.name for a in spec.qids)
    if run.dp is not None:
        cls = spec.class_attr.name if spec.class_attr is not None else ""
        model = (
            f"model=dp epsilon={float(run.dp.epsilon):g} h={run.dp.specializations} "
            f"score={run.dp.score}"
        )
        unchanged = cls
        binds = "binds=[nothing: a DP run releases no sensitive column]"
    else:
        model = f"{spec.privacy.describe()} score={spec.score}"  # LKC: L=.. K=.. C=..
        unchanged = ",".join(a.name for a in spec.attributes if a.role in UNCHANGED_ROLES)
        binds = confidence_binds(spec, policy.sensitive_values if policy is not None else ())
    return (
        f"run {run.run_id.hex()[:8]} accepted: leader={safe(leader, 64)} "
        f"ring={len(run.ring)} position={run.position} {model} qids=[{safe(qids, 400)}] "
        f"unchanged=[{safe(unchanged, 400)}] {binds} "
        f"spec={digest.hex()[:16]} rows={run.party.table.n_rows}"
    )
