"""A hostile leader for the ledger tests: the stock CLI with the engine's argmax selector
patched to take the *worst* valid candidate each round (one per round) instead of the best.
Every hospital accepts its instructions (it cannot check them without the global counts).
Usage: python hostile_leader.py leader run --config F"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

from fedanon.tds import argmax


def _worst(
    self: argmax.ArgmaxSelector, state: Any, candidates: Sequence[Any], found: Any
) -> list[Any]:
    if not candidates:
        self._chain = []
        return []
    key = partial(self._key, state)
    pick = max(candidates, key=lambda v: key(*v))
    self._chain = [pick]
    return [pick]


argmax.ArgmaxSelector.select = _worst  # type: ignore[method-assign]

if __name__ == "__main__":
    from fedanon.cli.main import main

    sys.argv = ["fedanon", *sys.argv[1:]]
    sys.exit(main())
