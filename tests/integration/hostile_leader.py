"""A hostile leader for the ledger tests: the stock CLI whose deterministic Decider is composed
with a selector that takes the *worst* valid candidate each round (one per round) instead of
the best.  Every hospital accepts its instructions (it cannot check them without the global
counts).  Usage: python hostile_leader.py leader run --config F"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from functools import partial

from fedanon.tds import decide
from fedanon.tds.argmax import ArgmaxSelector
from fedanon.tds.ports import Candidate, Selector
from fedanon.tds.state import SharedState


class WorstSelector(ArgmaxSelector):
    """The argmax selector's port, choosing the lowest-ranked allowed candidate."""

    def select(
        self,
        state: SharedState,
        candidates: Sequence[Candidate],
        found: Sequence[set[Candidate]],
        several: bool = True,
    ) -> list[Candidate]:
        if not candidates:
            self._chain = []
            return []
        key = partial(self._key, state)
        pick = max(candidates, key=lambda v: key(*v))
        self._chain = [pick]
        return [pick]


# The port must not drift under the patch: a changed signature fails here, not mid-run.
if inspect.signature(WorstSelector.select) != inspect.signature(Selector.select):
    raise SystemExit("hostile_leader: Selector.select changed; update WorstSelector.select")
decide.ArgmaxSelector = WorstSelector  # type: ignore[misc]  # what Decider() composes

if __name__ == "__main__":
    from fedanon.cli.main import main

    sys.argv = ["fedanon", *sys.argv[1:]]
    sys.exit(main())
