"""The ledger as a party daemon uses it: opened at start, one row per Prepare, the outcome.

:class:`DaemonLedger` is opened before the daemon binds its port (a ledger that cannot be
opened, is corrupt, locked by another daemon or cannot be written stops the start with a
:class:`fedanon.errors.LedgerError`), marks the runs a previous process reserved but never
ended as ``aborted`` (the budget stays spent: statistics may have left), and appends a
``start`` row (which proves the file is writable).

Per Prepare: :meth:`DaemonLedger.admit` checks the budgets and appends the ``reserved`` row
in one ``BEGIN IMMEDIATE`` transaction, before the daemon answers and long before any
statistic leaves; :meth:`DaemonLedger.refused` appends the row of a refused or failed
Prepare; :meth:`DaemonLedger.ended` the ``released`` / ``aborted`` row with the bytes of
statistics sent.  Every row's hash is logged (a witness of the chain's head outside the
file).
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path
from typing import IO, Any

from fedanon.errors import LedgerError
from fedanon.io.sources import DataSource
from fedanon.ledger.access import Access
from fedanon.ledger.budgets import Budgets, Refusal, reserve
from fedanon.ledger.fingerprint import Fingerprints
from fedanon.ledger.records import Caller, RunFacts, short
from fedanon.ledger.store import Clock, Store, utc_now

log = logging.getLogger(__name__)
OPEN = """SELECT r.run_id FROM entries r WHERE r.event = 'reserved' AND NOT EXISTS (
    SELECT 1 FROM entries o WHERE o.run_id = r.run_id AND o.seq > r.seq
    AND o.event IN ('released', 'aborted')) ORDER BY r.seq"""


def default_path(config: Path) -> Path:
    """``[ledger] path`` when party.toml names none: beside it, ``NAME.ledger.sqlite``."""
    return config.with_name(f"{config.stem}.ledger.sqlite")


def open_ledger(config: Any) -> DaemonLedger:
    """The ledger of a :class:`fedanon.party.config.PartyConfig` (``[ledger] path``)."""
    if config.ledger is None:
        raise LedgerError(f"{config.source}: no [ledger] path and no config file to put it beside")
    return DaemonLedger(config.ledger, config.policy, config.data)


class DaemonLedger:
    def __init__(
        self, path: Path, policy: Any, source: DataSource, *, clock: Clock = utc_now
    ) -> None:
        self.path = path
        self._guard = _exclusive(path)
        try:
            self.store = Store(path, clock=clock)
            try:
                self.store.quick_check()
                self.budgets = Budgets.of(policy)
                self.access = Access(self.store, self.budgets)
                self._recover()
            except BaseException:
                self.store.close()
                raise
        except BaseException:
            self._guard.close()
            raise
        self.fingerprints = Fingerprints(source)

    def _recover(self) -> None:
        with self.store.transaction("mark the runs of the previous process") as txn:
            for (run_id,) in txn.read(OPEN):
                txn.append(
                    "aborted",
                    run_id=run_id,
                    phase="the daemon stopped before the run ended (killed or crashed)",
                    reason="unknown bytes of statistics may have left; the budget stays spent",
                )
                log.warning("run %s: the daemon stopped before it ended: aborted", short(run_id))
            seq, digest = txn.append("start", reason=f"daemon started (pid {os.getpid()})")
        log.info("privacy ledger %s: row %d %s", self.path, seq, digest[:16])

    def close(self) -> None:
        self.fingerprints.close()
        self.store.close()
        self._guard.close()

    # ------------------------------------------------------------------------ per run
    def admit(self, caller: Caller, facts: RunFacts) -> Refusal | None:
        """Check the budgets and append the run's row (``reserved`` or ``refused``)."""
        with self.store.transaction("reserve the run's budget") as txn:
            found = reserve(txn, self.budgets, caller, facts)
            if found is not None:
                self.access.count(txn, caller)
        rows = self.store.read("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1")
        what = "reserved" if found is None else "refused"
        log.info(
            "ledger: run %s %s (row %d %s)", short(facts.run_id), what, rows[0][0], rows[0][1][:16]
        )
        return found

    def refused(self, caller: Caller, run_id: str, reason: str, *, failed: bool = False) -> None:
        """The row of a Prepare that was refused (policy, protocol, authorization: ``refused``)
        or failed (the data did not fit, or anything else: ``failed``).  Both count towards
        ``max_refusals_per_hour``: a data refusal answers the leader one bit about the data,
        so probing by refused runs is bounded by the same limit."""
        with self.store.transaction("record the refusal") as txn:
            txn.append(
                "failed" if failed else "refused",
                run_id=run_id,
                identity=caller.identity,
                cert_fp=caller.cert_fp,
                peer=caller.peer,
                address=caller.address,
                phase="Prepare",
                reason=reason,
                bytes=0,
            )
            self.access.count(txn, caller)

    def ended(self, run_id: str, released: bool, phase: str, sent: int) -> None:
        """A reserved run's outcome; a failure to write it is logged (the run stays
        reserved, and is marked aborted when the daemon next starts)."""
        try:
            with self.store.transaction("record the run's outcome") as txn:
                txn.append(
                    "released" if released else "aborted",
                    run_id=run_id,
                    phase=None if released else phase,
                    bytes=sent,
                )
        except LedgerError as exc:
            log.error("run %s: %s", short(run_id), exc)


def _exclusive(path: Path) -> IO[bytes]:
    """One daemon per ledger: an advisory lock on ``PATH.lock`` held while it runs."""
    lock = path.with_name(path.name + ".lock")
    try:
        fh = lock.open("ab")
    except OSError as exc:
        raise LedgerError(
            f"privacy ledger {path}: cannot create {lock.name}: {exc.strerror}: the file or "
            "its directory cannot be written"
        ) from None
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise LedgerError(
            f"privacy ledger {path}: locked by another daemon (two daemons never share a ledger)"
        ) from None
    return fh
