"""Access analysis: refused calls counted per identity and per address, and the lockout.

Refusals are ledgered as they happen: a call the authorization interceptor refused or a
method the daemon does not serve (``access`` rows, :meth:`Access.refused`), a Prepare its
policy or budgets refused (``refused`` rows, written by the daemon) and a Prepare that
failed -- the hospital's data did not fit the spec, or anything else (``failed`` rows).  A
data refusal tells the leader one bit about the data; counting it bounds that probe.  A
peer with a certificate identity is counted and locked out by that identity only (its
address may be the leader's too: NAT, a gateway); a peer without one by its address.  After
``max_refusals_per_hour`` of them (default 100: the rows one peer writes per hour stay
bounded) within the last hour, the daemon refuses every call of that peer for
``lockout_minutes`` (a ``lockout`` row; one warning line in the log).
``fedanon party ledger unlock`` appends
an ``unlock`` row that lifts it, also in a running daemon.

Counting starts afresh after a lockout or an unlock; calls refused *because* of a lockout
are not ledgered (a locked-out peer cannot fill the disk).  Failed TLS handshakes never
reach Python: gRPC's server ends them inside its C core without a callback, so they are not
counted (a client without a valid certificate that completes the handshake on a
plaintext-free port cannot exist; see the README's threat model).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
from dataclasses import dataclass
from functools import partial

from fedanon.ledger.budgets import Budgets
from fedanon.ledger.records import Caller
from fedanon.ledger.store import Store, Txn, parse_stamp, stamp

log = logging.getLogger(__name__)
COUNTED = ("refused", "failed", "access")  # failed: a Prepare the data (or anything) failed
HOUR = dt.timedelta(hours=1)
# without max_refusals_per_hour: still a limit, so the rows one peer writes per hour are
# bounded (each is an fsync'd commit; a full disk would stop every run)
DEFAULT_MAX_REFUSALS = 100


def _keys(caller: Caller) -> list[tuple[str, str]]:
    """(column, value) a peer is counted and locked out by: its identity when it has one
    (an authenticated peer's address is shared -- NAT, a gateway -- with the leader it could
    otherwise lock out), its address only when it has none."""
    if caller.identity not in ("", "-"):
        return [("identity", caller.identity)]
    if caller.address not in ("", "-"):
        return [("address", caller.address)]
    return []


def _last_reset(txn: Txn, column: str, value: str) -> str | None:
    row = txn.read(
        f"SELECT max(time) FROM entries WHERE {column} = ? "  # noqa: S608 -- fixed names
        "AND event IN ('lockout', 'unlock')",
        (value,),
    )
    return row[0][0] if row else None


@dataclass(frozen=True)
class Lockout:
    """A peer refused at the door: by ``what`` (identity or address) ``who`` (what
    ``fedanon party ledger unlock`` takes), until ``until``, ``minutes_left`` (rounded up)."""

    what: str
    who: str
    until: dt.datetime
    minutes_left: int

    @property
    def reason(self) -> str:
        return (
            f"{self.what} {self.who} is locked out until {stamp(self.until)[:19]}Z after too "
            "many refused calls"
        )


class Access:
    """Lockouts of one daemon, cached in memory (a call from a peer that is not locked out
    reads nothing from the file)."""

    def __init__(self, store: Store, budgets: Budgets) -> None:
        self.store = store
        self.budgets = budgets
        self._lock = threading.Lock()
        self._until: dict[tuple[str, str], dt.datetime] = {}
        self._load()

    def _load(self) -> None:
        now = stamp(self.store.clock())
        rows = self.store.read(
            "SELECT identity, address, until, seq FROM entries WHERE event = 'lockout' "
            "AND until > ? ORDER BY seq",
            (now,),
        )
        for identity, address, until, _ in rows:
            key = ("identity", identity) if identity else ("address", address)
            self._until[key] = parse_stamp(until)

    # ------------------------------------------------------------------------ checking
    @property
    def any_locked(self) -> bool:
        """Is any peer locked out (a cheap test before :meth:`locked`)?"""
        return bool(self._until)

    def locked(self, caller: Caller) -> str | None:
        """Why ``caller`` is refused now, or None."""
        found = self.lockout(caller)
        return None if found is None else found.reason

    def lockout(self, caller: Caller) -> Lockout | None:
        """The lockout in force for ``caller``, or None."""
        if not self._until:
            return None
        now = self.store.clock()
        for key in _keys(caller):
            with self._lock:
                until = self._until.get(key)
            if until is None:
                continue
            if until <= now or self._unlocked(key):
                with self._lock:
                    self._until.pop(key, None)
                continue
            left = math.ceil((until - now).total_seconds() / 60)
            return Lockout("identity" if key[0] == "identity" else "address", key[1], until, left)
        return None

    def _unlocked(self, key: tuple[str, str]) -> bool:
        """An ``unlock`` row written after the lockout (by ``ledger unlock``)?"""
        col, value = key
        rows = self.store.read(
            f"SELECT event FROM entries WHERE {col} = ? "  # noqa: S608 -- fixed names
            "AND event IN ('lockout', 'unlock') ORDER BY seq DESC LIMIT 1",
            (value,),
        )
        return bool(rows) and rows[0][0] == "unlock"

    # ------------------------------------------------------------------------ counting
    def refused(self, caller: Caller, method: str, reason: str) -> None:
        """Ledger a call refused before any servicer ran (auth, unknown method)."""
        with self.store.transaction("ledger a refused call") as txn:
            txn.append(
                "access",
                identity=caller.identity,
                cert_fp=caller.cert_fp,
                peer=caller.peer,
                address=caller.address,
                phase=method,
                reason=reason,
            )
            self.count(txn, caller)

    def count(self, txn: Txn, caller: Caller) -> None:
        """After a refusal row: lock the peer out if it reached ``max_refusals_per_hour``."""
        limit = self.budgets.max_refusals_per_hour or DEFAULT_MAX_REFUSALS
        now = txn.now()
        for col, value in _keys(caller):
            since = stamp(now - HOUR)
            reset = _last_reset(txn, col, value)
            if reset is not None and reset > since:
                since = reset
            anonymous = " AND identity IN ('-', '')" if col == "address" else ""
            n = txn.read(
                f"SELECT count(*) FROM entries WHERE {col} = ? "  # noqa: S608 -- fixed names
                f"AND event IN ('refused', 'failed', 'access') AND time > ?{anonymous}",
                (value, since),
            )[0][0]
            if n < limit:
                continue
            until = now + self.budgets.lockout
            what = "identity" if col == "identity" else "address"
            reason = f"{n} refused calls in the last hour (max_refusals_per_hour = {limit})"
            fields = {col: value, "until": stamp(until), "reason": reason}
            txn.append("lockout", **fields)
            line = (
                f"locking out {what} {value} for {self.budgets.lockout.total_seconds() / 60:g} "
                f"minutes: {reason}; `fedanon party ledger unlock {value} --config party.toml` "
                "lifts it"
            )
            txn.after_commit.append(partial(self._announce, (col, value), until, line))

    def _announce(self, key: tuple[str, str], until: dt.datetime, line: str) -> None:
        with self._lock:
            self._until[key] = until
        log.warning("%s", line)

    # ------------------------------------------------------------------------ unlocking
    def unlock(self, who: str) -> bool:
        """Lift a lockout of identity or address ``who``; False if none is in force."""
        return unlock(self.store, who)


def unlock(store: Store, who: str) -> bool:
    """Append ``unlock`` rows for ``who`` (an identity or an address) if locked out now."""
    with store.transaction("unlock") as txn:
        now = stamp(txn.now())
        lifted = False
        for col in ("identity", "address"):
            last = txn.read(
                f"SELECT event, until FROM entries WHERE {col} = ? "  # noqa: S608
                "AND event IN ('lockout', 'unlock') ORDER BY seq DESC LIMIT 1",
                (who,),
            )
            if last and last[0][0] == "lockout" and last[0][1] > now:
                txn.append("unlock", **{col: who, "reason": "unlocked by the privacy officer"})
                lifted = True
        return lifted
