"""The ledger as a party daemon uses it: opened at start, one row per Prepare, the outcome.

:class:`DaemonLedger` is opened before the daemon binds its port (a ledger that cannot be
opened, is corrupt, whose hash chain is broken (a row edited, deleted or reordered), locked
by another daemon or cannot be written stops the start with a
:class:`fedanon.errors.LedgerError`), marks the runs a previous process reserved but never
ended as ``aborted`` (the budget stays spent: statistics may have left), and appends a
``start`` row (which proves the file is writable).

Per Prepare: :meth:`DaemonLedger.precheck` refuses a run id the ledger holds a row of (also
one used before a restart) and judges, before the table is read, every budget
that needs no parse of it (runs per day; the epsilon and releases of the file's last known
fingerprint while its identity is unchanged), so an exhausted budget answers the same
refusal whatever the data holds; :meth:`DaemonLedger.admit` checks the budgets and appends
the ``reserved`` row in one ``BEGIN IMMEDIATE`` transaction, before the daemon answers and
long before any statistic leaves; :meth:`DaemonLedger.recharge` reserves a new release for
a free re-run whose statistics leave the released runs' path
(:mod:`fedanon.ledger.transcript`); :meth:`DaemonLedger.refused` appends the row of a
refused or failed Prepare; :meth:`DaemonLedger.ended` the ``released`` / ``aborted`` row
with the bytes of statistics sent and the run's new send keys.  Every row's hash is logged
(a witness of the chain's head outside the file).

One daemon per ledger: an advisory lock on the database file's inode (whatever name or
symlink reaches it).  Before each reservation the path must still name that open file
(device and inode): a ledger deleted or replaced under a running daemon refuses every run.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import logging
import os
import stat
from pathlib import Path
from typing import Any

from fedanon.errors import LedgerError, ProtocolError
from fedanon.io.sources import DataSource
from fedanon.ledger.access import Access
from fedanon.ledger.budgets import (
    Budgets,
    Refusal,
    is_free,
    judge,
    known_sends,
    recharge,
    reserve,
)
from fedanon.ledger.fingerprint import Fingerprints
from fedanon.ledger.records import Caller, RunFacts, short
from fedanon.ledger.show import check_chain
from fedanon.ledger.store import Clock, Store, utc_now

log = logging.getLogger(__name__)
OPEN = """SELECT r.run_id FROM entries r WHERE r.event = 'reserved' AND NOT EXISTS (
    SELECT 1 FROM entries o WHERE o.run_id = r.run_id AND o.seq > r.seq
    AND o.event IN ('released', 'aborted')) ORDER BY r.seq"""
SEEN = "SELECT 1 FROM entries WHERE run_id = ? LIMIT 1"


def default_path(config: Path) -> Path:
    """``[ledger] path`` when party.toml names none: beside it, ``NAME.ledger.sqlite``."""
    return config.with_name(f"{config.stem}.ledger.sqlite")


def open_ledger(config: Any, *, start: bool = True) -> DaemonLedger:
    """The ledger of a :class:`fedanon.party.config.PartyConfig` (``[ledger] path``);
    ``start``: record the daemon's start now (else :meth:`DaemonLedger.started`, once the
    daemon has its port)."""
    if config.ledger is None:
        raise LedgerError(f"{config.source}: no [ledger] path and no config file to put it beside")
    policy = config.policy
    if policy is not None and getattr(policy, "max_releases", None) is None:
        log.warning(
            "%s: [policy] has no max_releases: this table may be released any number of "
            "times (different specs, rings or specializations, which can be intersected); "
            "set max_releases to bound them",
            config.source,
        )
    return DaemonLedger(config.ledger, policy, config.data, start=start)


class DaemonLedger:
    def __init__(
        self,
        path: Path,
        policy: Any,
        source: DataSource,
        *,
        clock: Clock = utc_now,
        start: bool = True,
    ) -> None:
        self.path = path
        self._fd, self._ident, fresh = _exclusive(path)
        try:
            self.store = Store(path, clock=clock)
            try:
                self.store.quick_check()
                _intact(self.store)
                # a file whose rows were all deleted is as new (the chain cannot show it)
                fresh = fresh or not self.store.read("SELECT 1 FROM entries LIMIT 1")
                self.budgets = Budgets.of(policy)
                self.access = Access(self.store, self.budgets)
                self._recover()
            except BaseException:
                self.store.close()
                raise
        except BaseException:
            os.close(self._fd)  # after SQLite's connection: closing it drops SQLite's locks
            raise
        if fresh:
            log.warning(
                "privacy ledger %s: a new, empty ledger (if one existed before, its budgets "
                "are not in this one)",
                path,
            )
        self.fingerprints = Fingerprints(source)
        last = self.store.read(
            "SELECT data FROM entries WHERE data IS NOT NULL ORDER BY seq DESC LIMIT 1"
        )
        if last:
            self.fingerprints.seed(last[0][0])
        if start:
            self.started()

    def started(self) -> None:
        """Record the daemon's start (its pid): once it serves, not when it could not."""
        with self.store.transaction("record the daemon's start") as txn:
            seq, digest = txn.append("start", reason=f"daemon started (pid {os.getpid()})")
        log.info("privacy ledger %s: row %d %s", self.path, seq, digest[:16])

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

    def close(self) -> None:
        self.fingerprints.close()
        self.store.close()
        os.close(self._fd)

    def _same_file(self) -> None:
        """The configured path still names the file this daemon opened (else: refuse)."""
        try:
            st = os.stat(self.path)
            same = (st.st_dev, st.st_ino) == self._ident
        except OSError:
            same = False
        if not same:
            raise LedgerError(
                f"privacy ledger {self.path}: cannot record runs: the file was deleted or "
                "replaced while the daemon ran (its budgets would be lost): restore it from "
                "the daemon's own copy or a backup, then restart the daemon"
            )

    # ------------------------------------------------------------------------ per run
    def precheck(
        self, caller: Caller, facts: RunFacts | None, run_id: str | None = None
    ) -> Refusal | None:
        """Before the table is read: a run id this ledger has seen (raises), the runs per
        day, and -- ``facts`` given, with the file's last known fingerprint -- its epsilon /
        releases budget.  Writes nothing (a refusal is ledgered by :meth:`refused`)."""
        if run_id is not None:
            _new_run_id(self.store.read(SEEN, (run_id,)), run_id)
        budgets = self.budgets
        if facts is None:
            budgets = dataclasses.replace(budgets, max_total_epsilon=None, max_releases=None)
            if budgets.max_runs_per_day is None:
                return None
        with self.store.transaction("check the budgets") as txn:
            self._same_file()
            return judge(txn, budgets, caller, facts or _NO_FACTS)

    def admit(self, caller: Caller, facts: RunFacts) -> Refusal | None:
        """Check the budgets and append the run's row (``reserved`` or ``refused``)."""
        return self.admit_run(caller, facts)[0]

    def admit_run(
        self, caller: Caller, facts: RunFacts
    ) -> tuple[Refusal | None, bool, frozenset[str]]:
        """:meth:`admit`, and for a reserved non-DP run whether it is a free re-run (its
        release key was reserved before) and the send keys ended runs of that key sent."""
        with self.store.transaction("reserve the run's budget") as txn:
            self._same_file()
            _new_run_id(txn.read(SEEN, (facts.run_id,)), facts.run_id)
            free = is_free(txn, facts)
            found = reserve(txn, self.budgets, caller, facts)
            known = frozenset() if found is not None else known_sends(txn, facts.release_key)
            if found is not None:
                self.access.count(txn, caller)
        rows = self.store.read("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1")
        what = "reserved" if found is None else "refused"
        log.info(
            "ledger: run %s %s (row %d %s)", short(facts.run_id), what, rows[0][0], rows[0][1][:16]
        )
        return found, free, known

    def recharge(self, caller: Caller, facts: RunFacts) -> Refusal | None:
        """A free re-run leaves the released runs' path: reserve a new release (or refuse)."""
        with self.store.transaction("reserve a new release") as txn:
            self._same_file()
            found = recharge(txn, self.budgets, caller, facts)
            if found is not None:
                self.access.count(txn, caller)
        what = "refused: max_releases" if found is not None else "a new release reserved"
        log.warning(
            "run %s: the leader's instructions left the path of the released runs of its spec: %s",
            short(facts.run_id),
            what,
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

    def ended(
        self,
        run_id: str,
        released: bool,
        phase: str,
        sent: int,
        release_key: str | None = None,
        transcript: str | None = None,
    ) -> None:
        """A reserved run's outcome (a non-DP run's release key and the send keys it was the
        first to send); a failure to write it is logged (the run stays reserved, and is
        marked aborted when the daemon next starts)."""
        try:
            with self.store.transaction("record the run's outcome") as txn:
                txn.append(
                    "released" if released else "aborted",
                    run_id=run_id,
                    phase=None if released else phase,
                    bytes=sent,
                    release_key=release_key,
                    transcript=transcript,
                )
        except LedgerError as exc:
            log.error("run %s: %s", short(run_id), exc)


def _intact(store: Store) -> None:
    """The budgets are what the rows add up to: a row edited, deleted or reordered since it
    was written (a careless "clean-up", a retention job deleting old rows) would silently
    give back budget, so the daemon does not start on a broken chain."""
    n, broken = check_chain(store)
    if broken is not None:
        raise LedgerError(
            f"privacy ledger {store.path}: its hash chain is broken at {broken}; "
            f"{n} rows before it are intact: the budgets it holds cannot be trusted. Restore "
            "it from a backup (never delete or edit it); `fedanon party ledger verify "
            "--config party.toml` names the row. Without a backup: move the file aside (keep "
            "it as evidence) and start on a new, empty ledger, with [policy] budgets lowered "
            "by what `fedanon party ledger show --config party.toml` says the old one spent"
        )


def _new_run_id(rows: list[Any], run_id: str) -> None:
    """A run id is used once, also across restarts (the daemon's own memory of the ids it
    was asked for starts empty): a re-run that leaves the released path is charged a
    release keyed by its run id, and a run's signed pairwise keys name it."""
    if rows:
        raise ProtocolError(f"run id {short(run_id)} was used before: every run needs a new one")


def _exclusive(path: Path) -> tuple[int, tuple[int, int], bool]:
    """One daemon per ledger: ``flock`` on the database file itself -- its inode, whatever
    name or symlink reaches it; no lock file a cleaner could delete.  (SQLite's own locks
    are POSIX record locks, which ``flock`` does not touch; the descriptor is closed only
    after SQLite's connection, since closing any descriptor of the file drops those.)

    Returns (descriptor, (device, inode), whether the file is new)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        hint = (
            "give a file path, not a directory"
            if exc.errno == errno.EISDIR
            else "the file or its directory cannot be written"
        )
        raise LedgerError(
            f"privacy ledger {path}: cannot open it: {exc.strerror}: {hint}"
        ) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise LedgerError(f"privacy ledger {path}: cannot open it: not a regular file")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise LedgerError(
            f"privacy ledger {path}: locked by another daemon (two daemons never share a ledger)"
        ) from None
    return fd, (st.st_dev, st.st_ino), st.st_size == 0


_NO_FACTS: Any = None  # precheck without facts: only the budgets that need none
