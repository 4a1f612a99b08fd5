"""`fedanon federate`: certificates, one real party daemon per table, the leader, clean-up.

For tests, demos and benchmarks on one machine: every party is a separate process serving
mTLS on 127.0.0.1 with an ephemeral port.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedanon.errors import ConfigError
from fedanon.io.fsutil import check_outputs
from fedanon.leader.cli import add_seed_option, check_seed
from fedanon.leader.config import (
    SECURE_SUM_CHOICES,
    UNION_CHOICES,
    FederationConfig,
    PartyAddress,
)
from fedanon.leader.federateinputs import (
    LEADER,
    check_distinct_tables,
    check_party_files,
    parse_parties,
)
from fedanon.leader.localdaemons import (
    Daemon,
    daemons,
    free_ports,
    loaded,
    stop,
)

if TYPE_CHECKING:  # (the policy module loads the spec model and numpy: not for every CLI call)
    from fedanon.model.spec import RunSpec
    from fedanon.security.policy import PartyPolicy

log = logging.getLogger(__name__)
MAX_FIELD_BYTES = 1 << 16
# the local daemons (fedanon.leader.localdaemons), named here too for the tests and tools
__all__ = [
    "Daemon",
    "daemons",
    "federate",
    "federate_cli",
    "federation_config",
    "free_ports",
    "loaded",
    "register",
    "stop",
]


def register(sub: Any) -> None:
    f = sub.add_parser("federate", help="local federation: one daemon per table, then the leader")
    f.add_argument("--spec", type=Path, required=True, help="run spec (TOML)")
    f.add_argument(
        "--party", action="append", default=[], metavar="NAME=DATA.csv", help="one per party"
    )
    f.add_argument("--output", type=Path, required=True, help="released CSV")
    f.add_argument("--report", type=Path, help="JSON report")
    f.add_argument(
        "--max-field-bytes",
        type=_field_bytes,
        default=64,
        help=f"padded size of each released non-QID field in the mix-net (1..{MAX_FIELD_BYTES})",
    )
    f.add_argument(
        "--union",
        choices=UNION_CHOICES,
        default="auto",
        help="how the released records are integrated (as [run] union in federation.toml; "
        "default: auto)",
    )
    f.add_argument(
        "--secure-sum",
        choices=SECURE_SUM_CHOICES,
        default="pairwise",
        help="how the statistics are summed (as [run] secure_sum in federation.toml; default: "
        "pairwise, where hospitals talk to the leader only)",
    )
    f.add_argument("--quiet", action="store_true", help="no summary; log warnings and errors only")
    add_seed_option(f)
    from fedanon.report.cli import add_html_option

    add_html_option(f)
    f.set_defaults(handler=federate_cli)


def _field_bytes(text: str) -> int:
    """argparse type of --max-field-bytes (argparse names the flag in its error)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_FIELD_BYTES:
        raise argparse.ArgumentTypeError(
            f"{text!r}: must be an integer in 1..{MAX_FIELD_BYTES} (bytes)"
        )
    return value


def federation_config(
    ds: Sequence[Daemon],
    workdir: Path,
    spec: Path,
    output: Path,
    report: Path | None,
    max_field_bytes: int = 64,
    union: str = "auto",
    secure_sum: str = "pairwise",
) -> FederationConfig:
    certdir = workdir / "certs"
    return FederationConfig(
        spec=spec,
        output=output,
        report=report,
        name=LEADER,
        ca=certdir / "ca.pem",
        cert=certdir / f"{LEADER}.pem",
        key=certdir / f"{LEADER}.key",
        parties=tuple(
            PartyAddress(
                d.name, f"127.0.0.1:{d.port}", f"127.0.0.1:{d.mpc_port}" if d.mpc_port else ""
            )
            for d in ds
        ),
        max_field_bytes=max_field_bytes,
        union=union,
        source="fedanon federate",
        secure_sum=secure_sum,
    )


@dataclass(frozen=True)
class _Plan:
    """The spec (for its taxonomy files) and every daemon's policy: exactly this spec
    allowed (its method's :meth:`~fedanon.methods.base.Method.local_policy`)."""

    run_spec: RunSpec
    policy: PartyPolicy
    pin: bool  # the policy accepts the spec: every daemon pins it and loads its table early


def federate(
    spec: Path,
    parties: Sequence[tuple[str, Path]],
    output: Path,
    report: Path | None,
    max_field_bytes: int = 64,
    union: str = "auto",
    fork_daemons: bool = False,
    seed: int | None = None,
    secure_sum: str = "pairwise",
) -> dict[str, Any]:
    """Start the daemons, run the leader, stop the daemons; the report.  ``fork_daemons``:
    fork them warm from this process (the CLI: a fresh process; see :mod:`fedanon.leader.forked`).
    Every federated method runs :func:`fedanon.leader.run.run_federation` (``seed``: for a
    method that draws, tests only)."""
    from fedanon.leader.links import PartyRejected
    from fedanon.leader.run import run_federation
    from fedanon.model.spec import taxonomy_paths
    from fedanon.party.faults import logged_refusal

    check_seed(seed, spec)
    plan = _plan(spec, union, max_field_bytes)
    check_party_files(parties)
    reads = [spec, *taxonomy_paths(plan.run_spec, spec), *(data for _, data in parties)]
    check_outputs({"--output": output, "--report": report}, reads)
    with tempfile.TemporaryDirectory(prefix="fedanon-federate-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o700)
        t0 = time.perf_counter()
        # the content check runs while the daemons start and load their tables: it reads
        # every table too, and nothing of the run happens before it passes.  Every daemon
        # pins the spec its policy accepts (it allows exactly that spec anyway), so it reads
        # its table as it starts, alongside the check, instead of at Prepare
        with daemons(
            parties,
            work,
            pins={name: spec for name, _ in parties} if plan.pin else None,
            policy=plan.policy,
            fork=fork_daemons,
            while_starting=lambda ds: check_distinct_tables(parties, plan.run_spec, loaded(ds)),
            mpc=plan.run_spec.m > 0,  # m-privacy: the daemons' MPC workers get their ports
        ) as ds:
            startup = time.perf_counter() - t0
            log.info("%d party daemons ready in %.2fs", len(ds), startup)
            cfg = federation_config(
                ds, work, spec, output, report, max_field_bytes, union, secure_sum
            )
            try:
                out = run_federation(cfg, seed=seed, startup_seconds=startup)
            except PartyRejected as exc:  # its user holds every table: where, as logged
                where = logged_refusal(work / f"{exc.party}.log")
                if where is None:
                    raise
                raise PartyRejected(f"{exc}: {where}", party=exc.party, rule=exc.rule) from None
        return out.report


def _plan(spec: Path, union: str, max_field_bytes: int) -> _Plan:
    """The spec, checked before any daemon starts (its method runs federated and takes the
    options); every daemon allows exactly it."""
    from fedanon.apispec import Spec
    from fedanon.leader.run import leader_side_of
    from fedanon.methods import registry
    from fedanon.security.policy import PolicyRefused

    if not 1 <= max_field_bytes <= MAX_FIELD_BYTES:
        raise ConfigError(
            f"--max-field-bytes must be an integer in 1..{MAX_FIELD_BYTES}",
            value=str(max_field_bytes),
        )
    method = registry.require_federated(spec)  # exit 2 with the reason, e.g. ArtUC's
    one = Spec.from_toml(spec)  # the one spec; checked by its method
    run_spec = one.run_spec
    leader_side_of(spec, run_spec, union, "--union", None)
    policy = method.local_policy(run_spec)
    try:  # as a daemon checks a pinned spec at start-up (fedanon.party.server)
        policy.check_spec(one.view)
    except PolicyRefused:  # refused at Prepare instead, naming the rule (not pinned)
        return _Plan(run_spec, policy, pin=False)
    return _Plan(run_spec, policy, pin=True)


def federate_cli(args: argparse.Namespace) -> int:
    from fedanon.apispec import Spec
    from fedanon.report.cli import html_with_outputs

    parties = parse_parties(args.party)
    reads = [data for _, data in parties]
    page_spec = None if args.html is None else Spec.from_toml(args.spec)
    with html_with_outputs(args.html, page_spec, args.output, args.report, reads=reads):
        rep = federate(
            args.spec,
            parties,
            args.output,
            args.report,
            args.max_field_bytes,
            args.union,
            fork_daemons=True,
            seed=args.seed,
            secure_sum=args.secure_sum,
        )
    if not args.quiet:
        from fedanon.leader.run import summary

        print(summary(args.spec, rep, args.output, args.report))
    return 0  # the process then ends without teardown (fedanon.cli.main.entry)
