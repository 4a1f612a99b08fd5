"""How many calls each federation member may have in flight at the party daemon at once.

Every call a daemon serves holds one of its :data:`SERVER_THREADS` server threads until its
handler returns (or, for a response stream, until the stream ends), and a call may wait up
to ``[party] max_wait_seconds`` (:mod:`fedanon.party.callcap`).  Without a limit any
authenticated member -- a hospital with its party certificate, any leader certificate --
could open a few dozen ``Relay`` streams it never feeds, reopen each as it ends, and leave
the daemon answering nobody.  :class:`PeerLimit` counts the calls in flight per certificate
identity (role and name) and refuses one more (``RESOURCE_EXHAUSTED``) beyond:

* ``max_leader_calls`` (default 16) for this daemon's leader (``[peers] leader``): a run
  keeps a few calls in flight here -- a sum's ``Relay`` / ``Collect`` or ``Contribute``
  plus ``PairKeys``, an ``Instruct`` or two, a ``Status`` probe, a coalition check or a
  union step -- so several runs at once fit;
* ``max_peer_calls`` (default 4) for any other identity (a ring predecessor relays one
  vector of a run at a time, answered as soon as it is stored), and all other identities
  together at most the threads the leader leaves, less :data:`RESERVED`.

So the leader and every other member at their limits still leave :data:`RESERVED` threads
free: a refusal is answered at once, and neither a hospital nor a foreign leader certificate
can take the threads the leader's runs need (a coalition of members can still fill the
others' share; the leader's is theirs never).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from fedanon.security.auth import run_once
from fedanon.security.certs import Identity

SERVER_THREADS = 32  # the daemon's gRPC server threads (fedanon.party.server)
RESERVED = 4  # threads no caller's share reaches: refusals and the leader's next call
DEFAULT_LEADER_CALLS = 16
DEFAULT_PEER_CALLS = 4
MAX_LEADER_CALLS = SERVER_THREADS - RESERVED - 1  # at least one thread for the others

Release = Callable[[], None]


def others_share(leader_calls: int) -> int:
    """The calls every identity but the leader may have in flight together."""
    return SERVER_THREADS - RESERVED - leader_calls


@dataclass(frozen=True)
class Limits:
    leader: str  # [peers] leader: the identity (role leader) allowed max_leader_calls
    leader_calls: int = DEFAULT_LEADER_CALLS
    peer_calls: int = DEFAULT_PEER_CALLS

    def __post_init__(self) -> None:
        if not 1 <= self.leader_calls <= MAX_LEADER_CALLS:
            raise ValueError(f"max_leader_calls must be in [1, {MAX_LEADER_CALLS}]")
        if not 1 <= self.peer_calls <= others_share(self.leader_calls):
            raise ValueError("max_peer_calls must be at least 1 and at most the others' share")


class PeerLimit:
    """Calls in flight per identity; :meth:`enter` takes a slot or says why not."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._others_max = others_share(limits.leader_calls)
        self._lock = threading.Lock()
        self._held: dict[Identity, int] = {}
        self._others = 0  # calls in flight of every identity but the leader
        self.refused = 0  # calls refused over a limit (since start)
        self.peak: dict[Identity, int] = {}  # most calls in flight at once, per identity

    def _is_leader(self, who: Identity) -> bool:
        return who.role == "leader" and who.name == self.limits.leader

    def enter(self, who: Identity) -> Release | str:
        """A slot for one call of ``who`` (call the release exactly once when the call no
        longer holds its server thread), or the refusal's message."""
        leader = self._is_leader(who)
        own_max = self.limits.leader_calls if leader else self.limits.peer_calls
        with self._lock:
            held = self._held.get(who, 0)
            full = held >= own_max or (not leader and self._others >= self._others_max)
            if not full:
                self._held[who] = held + 1
                self.peak[who] = max(self.peak.get(who, 0), held + 1)
                if not leader:
                    self._others += 1
            else:
                self.refused += 1
        if full:  # the interceptor audits the refusal (fedanon.security.auth)
            if held >= own_max:
                why = f"{own_max} calls of this peer are in flight here, the most it may have"
            else:
                why = f"{self._others_max} calls of the federation's members are in flight here"
            return f"{why}; try again once one has ended"
        return run_once(lambda: self._leave(who, leader))

    def _leave(self, who: Identity, leader: bool) -> None:
        with self._lock:
            held = self._held.get(who, 0) - 1
            if held > 0:
                self._held[who] = held
            else:
                self._held.pop(who, None)
            if not leader:
                self._others -= 1

    def peaks(self) -> dict[Identity, int]:
        """The most calls each identity had in flight at once."""
        with self._lock:
            return dict(self.peak)

    def in_flight(self, who: Identity | None = None) -> int:
        """Calls in flight of ``who`` (of everyone when None)."""
        with self._lock:
            if who is None:
                return sum(self._held.values())
            return self._held.get(who, 0)
