"""The one CSV writer of the experiment harnesses (LKC's, DiffGen's and (k, k^m)'s): the
columns are the union of the rows' keys in first-seen order, floats with 6 significant
digits, one ``\\n`` per line, UTF-8."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, keys, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in r.items()})
