"""The party daemon's calls into its privacy ledger (:mod:`fedanon.ledger`).

:class:`LedgerGate` turns a gRPC context and a prepared :class:`PartyRun` into the ledger's
plain values and back into the daemon's errors:

* :meth:`LedgerGate.prepare` wraps a Prepare: the budgets that need no parse of the table
  are judged before it is read (``admit.early``: an exhausted budget refuses whatever the
  data holds), the budgets are reserved (``admit``) after the table is read and before the
  daemon answers -- before any statistic can leave; a non-DP run gets its
  :class:`fedanon.ledger.transcript.Transcript` (a free re-run that leaves the released
  runs' path is charged a new release before it sends, or aborted); a
  Prepare refused or failed anywhere is ledgered too, and counts towards
  ``max_refusals_per_hour`` (a data refusal included: it answers one bit about the data);
  a ledger that cannot be written
  refuses the run (``PolicyRefused`` with rule ``ledger``: exit 2 at the leader);
* :meth:`LedgerGate.ended` records a dropped run's outcome and bytes of statistics sent;
* :class:`LedgerGate` is also the access watch of the authorization interceptor
  (:class:`fedanon.security.auth.AuthInterceptor`): lockouts and refused calls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from functools import partial
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from fedanon.errors import AuthError, LedgerError, ProtocolError
from fedanon.ledger.daemon import DaemonLedger
from fedanon.ledger.fingerprint import DataFingerprint
from fedanon.ledger.records import DP, Caller, RunFacts
from fedanon.ledger.transcript import Transcript
from fedanon.logsafe import safe
from fedanon.methods import registry
from fedanon.net.meta import MD_LOCKED_OUT, MD_LOCKOUT_MINUTES
from fedanon.party.faults import DataRefused, local_detail
from fedanon.party.run import PartyRun
from fedanon.security.certs import identity_of
from fedanon.security.policy import PolicyRefused

log = logging.getLogger(__name__)


def caller_of(context: grpc.ServicerContext, insecure_name: str | None = None) -> Caller:
    """Who is calling: certificate subject and SHA-256, peer address (never fails)."""
    try:
        peer = str(context.peer())
    except Exception:
        peer = "-"
    if insecure_name is not None:
        return Caller(insecure_name, "-", peer)
    try:
        raw: Any = (context.auth_context() or {}).get("x509_pem_cert") or []
        pem = raw if isinstance(raw, bytes) else raw[0]
        cert = x509.load_pem_x509_certificate(bytes(pem))
        fp = cert.fingerprint(hashes.SHA256()).hex()
    except Exception:
        return Caller("-", "-", peer)
    try:
        name = identity_of(cert).name
    except (AuthError, ValueError):
        name = "-"
    return Caller(name, fp, peer)


def _facts(
    spec: Any, dp: Any, run_id: bytes, ring: Sequence[str], digest: bytes, data: object, rows: int
) -> RunFacts:
    from fedanon.ledger.fingerprint import DataFingerprint

    assert isinstance(data, DataFingerprint)
    if dp is not None:
        method, eps = DP, dp.epsilon
        params = f"epsilon={float(dp.epsilon):g} h={dp.specializations} score={dp.score}"
    else:
        method, eps = spec.privacy.model, None
        params = f"{spec.privacy.describe()} score={spec.score}"
    return RunFacts(
        run_id=run_id.hex(),
        ring=tuple(ring),
        spec_hash=digest.hex(),
        method=method,
        params=params,
        epsilon=eps,
        data=data,
        rows=rows,
    )


def facts_of(run: PartyRun, digest: bytes, data: object) -> RunFacts:
    ring = [p.name for p in run.ring]
    return _facts(run.spec, run.dp, run.run_id, ring, digest, data, run.party.table.n_rows)


class Admission:
    """What :meth:`LedgerGate.prepare` yields: ``admit(run, digest)`` reserves the budgets
    once the table is read; ``admit.early(proposal, spec, digest)`` judges, before it is
    read, what needs no parse of it."""

    def __init__(
        self, admit: Callable[[PartyRun, bytes], None], early: Callable[[Any, Any, bytes], None]
    ) -> None:
        self._admit = admit
        self.early = early

    def __call__(self, run: PartyRun, digest: bytes) -> None:
        self._admit(run, digest)


def _fingerprint(pending: Future[DataFingerprint]) -> DataFingerprint:
    """The data file's fingerprint.  One that cannot be taken (the file gone, unreadable,
    or still being written) is a failure of this hospital's data, answered as every other
    one (the leader learns one fixed sentence; the log says why): not the ledger's, whose
    refusal quotes its message -- the data file's path and what became of it."""
    try:
        return pending.result()
    except LedgerError as exc:
        raise DataRefused(exc) from None


def _unavailable(exc: LedgerError) -> PolicyRefused:
    log.error("%s", exc)
    detail = str(exc).split(": cannot ", 1)[-1]  # not the hospital's file path
    return PolicyRefused(
        "ledger",
        f"its privacy ledger cannot record the run ({safe(detail, 200)}): this hospital takes "
        "part in no run without it",
    )


class LedgerGate:
    def __init__(self, ledger: DaemonLedger, insecure_name: str | None = None) -> None:
        self.ledger = ledger
        self.insecure_name = insecure_name

    def caller(self, context: grpc.ServicerContext) -> Caller:
        return caller_of(context, self.insecure_name)

    @contextmanager
    def prepare(self, context: grpc.ServicerContext, run_id: bytes) -> Iterator[Admission]:
        """Around a Prepare: yields :class:`Admission`, which reserves the budgets."""
        ledger = self.ledger
        caller = self.caller(context)
        pending = ledger.fingerprints.start()
        state = {"recorded": False, "admitted": False}

        def early(proposal: Any, spec: Any, digest: bytes) -> None:
            known = ledger.fingerprints.known()
            if known is None and pending is not None and ledger.budgets.per_table:
                # the file changed (or was touched): its hash first, then the read, so a
                # spent budget never answers "does not fit"
                known = _fingerprint(pending)
            facts = None
            if known is not None:
                run_spec, dp = spec, registry.get(spec.privacy.model).party_params(spec)
                ring = [p.name for p in proposal.ring]
                facts = _facts(run_spec, dp, run_id, ring, digest, known, 0)
            try:
                found = ledger.precheck(caller, facts, run_id.hex())
            except LedgerError as exc:
                raise _unavailable(exc) from None
            if found is not None:
                raise PolicyRefused(found.rule, found.message)

        def admit(run: PartyRun, digest: bytes) -> None:
            if pending is not None:  # a file gone or unreadable: a failure of its data
                data = _fingerprint(pending)
            else:
                data = ledger.fingerprints.database(run.party.table.n_rows)
            try:
                facts = facts_of(run, digest, data)
                found, free, known = ledger.admit_run(caller, facts)
            except LedgerError as exc:
                state["recorded"] = True
                raise _unavailable(exc) from None
            state["recorded"] = True
            if found is not None:
                raise PolicyRefused(found.rule, found.message)
            state["admitted"] = True
            if facts.method != DP:  # a free re-run is free while it sends what was sent
                charge = partial(self._recharge, caller, facts) if free else None
                run.transcript = Transcript(facts.release_key, known, charge)

        try:
            yield Admission(admit, early)
        except Exception as exc:  # every refused or failed Prepare counts (data ones too)
            why = local_detail(exc)  # where and what was expected, never a record value
            if state["admitted"]:
                ledger.ended(run_id.hex(), False, f"Prepare: {safe(why, 200)}", 0)
            elif not state["recorded"]:
                failed = not isinstance(exc, PolicyRefused | ProtocolError | AuthError)
                try:
                    ledger.refused(caller, run_id.hex(), why, failed=failed)
                except LedgerError as err:
                    raise _unavailable(err) from None
            raise

    def _recharge(self, caller: Caller, facts: RunFacts) -> None:
        """A free re-run is about to send what no ended run of its spec sent: a new release."""
        try:
            found = self.ledger.recharge(caller, facts)
        except LedgerError as exc:
            raise _unavailable(exc) from None
        if found is not None:
            raise PolicyRefused(found.rule, found.message)

    def ended(self, run: PartyRun, why: str) -> None:
        """A prepared run was dropped: ``finished`` is a release, anything else an abort."""
        failure = run.status().failure
        released = why == "finished" and failure is None
        phase = why if failure is None else f"{why} after {failure.phase} failed ({failure.kind})"
        t = getattr(run, "transcript", None)
        key, sent = (None, None) if t is None else (t.release_key, t.recorded())
        self.ledger.ended(run.run_id.hex(), released, phase, run.stats_bytes_sent, key, sent)

    # the authorization interceptor's watch -------------------------------------------------
    def locked(self, context: grpc.ServicerContext) -> str | None:
        if not self.ledger.access.any_locked:
            return None
        found = self.ledger.access.lockout(self.caller(context))
        if found is None:
            return None
        left = str(found.minutes_left)
        context.set_trailing_metadata(((MD_LOCKED_OUT, found.who), (MD_LOCKOUT_MINUTES, left)))
        return found.reason

    def refused(self, context: grpc.ServicerContext, method: str, reason: str) -> None:
        try:
            self.ledger.access.refused(self.caller(context), method, reason)
        except LedgerError as exc:
            log.error("cannot ledger a refused call: %s", exc)
