"""A hostile leader for the ledger tests: the stock CLI with the Decider patched to take
another valid candidate than the best one (ranked first, so the leader's own consistency
check passes).  Usage: python hostile_leader.py leader run --config F"""

from __future__ import annotations

import sys
from typing import Any

from fedanon.tds import decide

_ranking = decide.Decider._ranking


def _hostile_ranking(self: Any, excluded: Any) -> list[Any]:
    ranked = list(_ranking(self, excluded))
    if len(ranked) > 1:
        ranked.insert(0, ranked.pop())  # the worst candidate first
    return ranked


def _best(self: Any, excluded: Any) -> Any:
    ranked = self._ranking(excluded)
    return ranked[0] if ranked else None


decide.Decider._ranking = _hostile_ranking  # type: ignore[method-assign]
decide.Decider._best = _best  # type: ignore[method-assign]

if __name__ == "__main__":
    from fedanon.cli.main import main

    sys.argv = ["fedanon", *sys.argv[1:]]
    sys.exit(main())
