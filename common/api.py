"""fedanon as a Python library: build or load a spec, anonymize a DataFrame, audit a table.

::

    from fedanon.api import LKC, Attribute, Privacy, Spec, anonymize, audit

    spec = Spec.from_toml("examples/adult/run.toml")      # or built in code (below)
    release = anonymize(df, spec)         # df: pandas.DataFrame, or a CSV / CSV.gz / Parquet path
    release.table                         # pandas.DataFrame of str: the CLI's released file
    release.report                        # dict: the CLI's --report JSON without "timings"
    result = audit(release.table, spec)   # independent recount (fedanon.privacy.audit)
    result.ok, result.min_group_size, result.max_confidence, result.violations

A spec in code maps one to one onto the TOML file (``[privacy]`` -> :class:`LKC` or
:class:`Privacy`, each ``[[attribute]]`` -> :class:`Attribute`, ``[utility] score``)::

    spec = Spec(
        privacy=LKC(L=2, K=2, C=0.5, sensitive_values=["Transgender"]),
        score="infogain",
        attributes=[
            Attribute("ID", role="identifier"),
            Attribute("Job", role="qid", type="categorical", taxonomy="job.txt"),
            Attribute("Sex", role="qid", type="categorical", taxonomy_text="ANY\\n  M\\n  F\\n"),
            Attribute("Age", role="qid", type="numeric", domain=(1, 99), step=1),
            Attribute("Transfuse", role="class", values=["N", "Y"]),
            Attribute("Surgery", role="sensitive"),
        ],
        base_dir="examples/table1",       # where relative taxonomy paths are (default: cwd)
    )

Any registered privacy model and score (:mod:`fedanon.privacy.base`,
:mod:`fedanon.scores.base`, or an installed plug-in, :mod:`fedanon.plugins`) is selected by
name, with exactly the ``[privacy]`` keys that model takes::

    Spec(privacy=Privacy("kanon", K=5), score="maxfreq", attributes=[...])
    Privacy("lkc", L=2, K=2, C=0.5, sensitive_values=["Transgender"])  # = LKC(...)

``audit`` recounts LKC-privacy, or the LKC-privacy another model amounts to (k-anonymity:
L = |QID|, C = 1); a model without such an equivalent cannot be audited (SpecError).

DiffGen is the model ``"dp"`` (``Privacy("dp", epsilon=1.0, specializations=10)``, score
"max" or "infogain"): ``anonymize`` returns the noisy release (predictors, class, ``count``)
and the DP report; ``seed=`` (tests only: NOT PRIVATE) and ``expand=`` apply to it alone.

The run is the centralized algorithm of ``fedanon anonymize`` with the same functions
(schema, encoding, round loop, safety recount, report), so the released table and report are
those of the CLI on the same data.  Errors are the CLI's: :class:`fedanon.errors.InputError`
and its subclasses for bad specs and data (exit code 2 on the command line).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fedanon.apispec import LKC, Attribute, PathLike, Privacy, Spec
from fedanon.apivalues import is_integer
from fedanon.errors import DataError, InputError, OutputError, SpecError
from fedanon.io.fsutil import check_outputs
from fedanon.io.release import publish
from fedanon.privacy.audit import AuditResult, GroupViolation

__all__ = [
    "LKC",
    "Attribute",
    "AuditResult",
    "GroupViolation",
    "Privacy",
    "Release",
    "Spec",
    "anonymize",
    "audit",
]


@dataclass(frozen=True, eq=False)
class Release:
    """What a run publishes: the table (every cell a str; a DP release's ``count`` column
    is int64) and the report."""

    table: pd.DataFrame
    report: dict[str, Any]
    _writer: Callable[[Path, Path | None], None] | None = field(default=None, repr=False)
    _inputs: tuple[Path, ...] = field(default=(), repr=False)  # files the run read

    def write(self, output: PathLike, report: PathLike | None = None) -> None:
        """Publish like the CLI: the CSV (gzip when ``output`` ends in .gz) and the JSON
        report written atomically, both or neither (a DP release: the CLI's file, its
        ``# NOT PRIVATE`` line included when a seed was given).  As the CLI, it never
        overwrites a file the run read: the input file, the spec file, a taxonomy."""
        for name, value in (("output", output), ("report", report or "")):
            if not isinstance(value, str | os.PathLike):
                raise OutputError(
                    f"Release.write: {name} must be a file path", value=type(value).__name__
                )
        out = Path(output)
        rep = None if report is None else Path(report)
        check_outputs({"output": out, "report": rep}, self._inputs)
        if self._writer is not None:
            self._writer(out, rep)
            return
        columns = [str(c) for c in self.table.columns]
        data = {c: self.table[c].tolist() for c in columns}
        publish(out, columns, data, rep, self.report)


def anonymize(
    data: pd.DataFrame | PathLike,
    spec: Spec,
    *,
    seed: int | None = None,
    expand: bool = False,
) -> Release:
    """The centralized anonymization of ``data`` (a DataFrame, or a CSV, CSV.gz or Parquet
    file) under ``spec``; the same release as ``fedanon anonymize`` on the same table.

    A DP spec only: ``seed`` fixes the randomness for tests and experiments (the release is
    then NOT differentially private, and its report says so: ``report["private"]`` False,
    ``report["warning"]``); ``expand`` releases one row per counted record."""
    source = _table_arg(data, "data")
    _python_api(spec)
    if seed is not None:
        if not is_integer(seed) or seed < 0:
            raise SpecError(
                "anonymize: seed must be an integer >= 0 (tests only: NOT PRIVATE)",
                value=str(seed),
                expected="an int, or no seed (a private release)",
            )
        seed = int(seed)  # numpy's int64 as well
    if not isinstance(expand, bool | np.bool_):
        raise SpecError("anonymize: expand must be True or False", value=str(expand))
    frame, rep, writer = spec.method.api_anonymize(
        source, spec.view, spec.taxonomy_reader(), seed, expand
    )
    read = [*spec.input_files(), *([source] if isinstance(source, Path) else [])]
    return Release(frame, rep, writer, tuple(read))


def audit(
    table: pd.DataFrame | PathLike, spec: Spec, *, sep: str = ",", limit: int = 10
) -> AuditResult:
    """Recount LKC-privacy of a released table (a DataFrame, or a CSV / CSV.gz file with
    separator ``sep``), independently of the engine (see :mod:`fedanon.privacy.audit`).  DataFrame
    cells are compared as the text a CSV would hold (:mod:`fedanon.io.frames`).  For another
    model, the LKC-privacy it amounts to (SpecError when it states none, and for DP).  An
    identifier or undeclared column in the table is a violation (``identifier_columns``,
    ``undeclared_columns``); a missing released column a DataError."""
    src = _table_arg(table, "table")
    _python_api(spec)
    if not is_integer(limit) or limit < 0:
        raise InputError(
            "audit: limit (how many violations to list) must be an integer >= 0",
            value=str(limit),
        )
    if not isinstance(sep, str) or len(sep) != 1:
        raise InputError(
            "audit: sep (a CSV file's separator) must be one character",
            value=str(sep),
            expected="',' or ';' or '\\t'",
        )
    result: AuditResult = spec.method.api_audit(src, spec.view, sep, int(limit))
    return result


def _table_arg(data: object, name: str) -> pd.DataFrame | Path:
    """A DataFrame, or a file's path; anything else is refused naming what it is (Path()
    raised TypeError: expected str, bytes or os.PathLike object)."""
    if isinstance(data, pd.DataFrame):
        return data
    if isinstance(data, str | os.PathLike):
        return Path(data)
    hint = (
        " (a Series: pass series.to_frame(), or the whole DataFrame)"
        if isinstance(data, pd.Series)
        else " (make one with pandas.DataFrame(...))"
        if isinstance(data, dict | list | tuple | np.ndarray)
        else ""
    )
    raise DataError(
        f"{name} must be a pandas DataFrame or the path of a CSV, CSV.gz or Parquet file{hint}",
        value=type(data).__name__,
    )


def _python_api(spec: Spec) -> None:
    """A method without a Python API (its capability) is refused: it runs from the CLI."""
    if not isinstance(spec, Spec):
        hint = (
            f": load the file with fedanon.Spec.from_toml({os.fspath(spec)!r})"
            if isinstance(spec, str | os.PathLike)
            else ""
        )
        raise SpecError(
            f"spec must be a fedanon.Spec{hint}",
            value=type(spec).__name__,
            expected="fedanon.Spec.from_toml(path), or fedanon.Spec(privacy=..., attributes=[...])",
        )
    method = spec.method
    if not method.capabilities.python_api:
        raise SpecError(
            f"the Python API runs LKC and registered models; model = {method.name!r} runs with "
            "`fedanon anonymize` / `fedanon audit`",
            file=spec.source,
            value=method.name,
        )
