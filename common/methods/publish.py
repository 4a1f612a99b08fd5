"""The one publisher of a run, every method, centralized and federated: the released table and
the JSON report, both or neither (:func:`fedanon.io.fsutil.atomic_write_all`).  With ``--html``
the command holds both (:func:`fedanon.io.fsutil.hold`, in ``fedanon.report.cli``) and
publishes them with the page: the three or none."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fedanon.io.fsutil import Pending, atomic_write_all

Report = Mapping[str, Any] | Callable[[], Mapping[str, Any]]


def report_file(path: Path, report: Report) -> Pending:
    """The JSON report as a pending file; a callable is asked for the report when it is
    written (after the table: a write time can be recorded)."""

    def dump(fh: Any) -> None:
        json.dump(report() if callable(report) else report, fh, indent=2)

    return Pending(path, dump)


def publish_release(table: Pending, report_path: Path | None, report: Report) -> None:
    """Write the table and (with ``report_path``) the report: both or neither."""
    files = [table]
    if report_path is not None:
        files.append(report_file(report_path, report))
    atomic_write_all(files)
