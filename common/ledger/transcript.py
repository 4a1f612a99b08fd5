"""What the leader made this hospital do in one non-DP run, and whether that is new.

``max_releases`` counts distinct releases of a table, and a re-run of a released spec on the
same ring over unchanged data is free -- *if* it gives the same release.  The hospital
cannot trust the leader for that: the leader alone chooses every specialization
(``Instruct``), so "same spec, same ring, same table" could still steer a different
release.  The transcript makes "free" mean what the hospital can check itself: *this
hospital's statistics stay exactly those it already sent in an ended run of the same
release key*.

* :meth:`Transcript.applied` chains every instruction the party applies (the update's
  decisions, its union sketch layout; not the sketch's key, a fresh random nonce per attempt
  that changes no record the sketch sums) into a SHA-256 chain;
* :meth:`Transcript.sending` is called before the party sends statistics (a ring vector, a
  pairwise contribution) or records (the mix-net batch): the state reached (chain) and what
  is asked of it (phase, round, size, layout) hash to a *send key*.  A key some ended run of
  the same release key sent is free; the first key that is not charges a new release
  (``charge``: a ``BEGIN IMMEDIATE`` reservation checked against ``max_releases``) before
  anything of that state leaves -- and a refusal there aborts the run;
* the keys a run sent that were not known before are recorded in its ``released`` /
  ``aborted`` row (``transcript``), so the next re-run that takes the same path is free.

The statistics of a state are a function of the state and the request (the party checks the
layout), so the same send key means the same bytes of this hospital's data left again.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

KEY_HEX = 32  # a send key: the first 16 bytes of SHA-256, as hex
START = hashlib.sha256(b"fedanon-transcript-v1").digest()
SKETCH = "UNION_SKETCH"  # its layout hash names the sketch's key: the chain has its layout


def update_bytes(update: Any, chained: bool) -> bytes:
    """The canonical encoding of an applied :class:`fedanon.tds.state.Update`."""
    union = update.union
    layout = None if union is None else union.layout.digest.hex()
    doc = [
        int(update.round),
        [[int(x) for x in s] for s in update.splits],
        [[int(x) for x in i] for i in update.invalid],
        None if update.best is None else [int(x) for x in update.best],
        bytes(update.children_mask).hex(),
        bool(update.end),
        layout,
        bool(chained),
    ]
    return json.dumps(doc, separators=(",", ":")).encode("ascii")


def split_keys(text: str | None) -> Iterable[str]:
    """The send keys of a ``transcript`` column."""
    if text:
        for i in range(0, len(text), KEY_HEX):
            yield text[i : i + KEY_HEX]


class Transcript:
    """One run's chain of applied instructions and the send keys it produced.

    ``known``: the send keys ended runs of the same release key sent (free); ``charge``:
    called once, before the first send that is not known -- it reserves a new release or
    raises (the refusal is then raised again for every later new send).  ``charge`` None:
    the run was charged as a new release when it was reserved; nothing is checked."""

    def __init__(
        self, release_key: str, known: frozenset[str], charge: Callable[[], None] | None
    ) -> None:
        self.release_key = release_key
        self.known = known
        self._charge = charge
        self._refused: Exception | None = None
        self._chain = START
        self._lock = threading.Lock()
        self.new: list[str] = []  # send keys not in ``known``, in order
        self._new_set: set[str] = set()
        self.new_release = False  # a send left the known path and a new release was charged

    def applied(self, update: Any, chained: bool = False) -> None:
        """An instruction was applied (the state changed)."""
        with self._lock:
            self._chain = hashlib.sha256(self._chain + update_bytes(update, chained)).digest()

    def sending(self, phase: str, round_: int, size: int, layout: bytes) -> None:
        """About to send statistics (or records) of the current state: charge a new release
        first if no ended run of this release key sent them; raises when refused."""
        what = [phase, int(round_), int(size), "" if phase == SKETCH else bytes(layout).hex()]
        with self._lock:
            h = hashlib.sha256(self._chain + json.dumps(what).encode("ascii"))
            key = h.hexdigest()[:KEY_HEX]
            if key in self.known or key in self._new_set:
                return
            if self._refused is not None:
                raise self._refused
            if self._charge is not None:
                try:
                    self._charge()
                except Exception as exc:
                    self._refused = exc
                    raise
                self._charge = None
                self.new_release = True
            self.new.append(key)
            self._new_set.add(key)

    def recorded(self) -> str | None:
        """The ``transcript`` column of the run's outcome row (None: nothing new sent)."""
        with self._lock:
            return "".join(self.new) or None
