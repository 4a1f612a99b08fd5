"""Utility on the page: the discernibility of the release (DR = sum |group|^2 / |T|^2 and the
discernibility metric sum |group|^2, from the released table), and -- with a class column and
the original table -- the classification errors of :mod:`fedanon.evaluation.evaluate`: CE on
the release against BE (raw data) and UE (QIDs removed).

The original's cells are read into this process for the classifier only; nothing of them but
the three error rates reaches the page."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fedanon.errors import InputError
from fedanon.model.attributes import NOT_RELEASED
from fedanon.report.load import CodedTable, SpecView, read_coded
from fedanon.report.methods import kind_of


@dataclass(frozen=True)
class Classification:
    CE: float
    BE: float
    UE: float
    records: int

    def __post_init__(self) -> None:
        for v in (self.CE, self.BE, self.UE):
            if not 0.0 <= v <= 1.0:
                raise ValueError("an error rate lies in [0, 1]")


def classification(
    view: SpecView, released: CodedTable, original_path: Path
) -> tuple[Classification | None, str]:
    """CE, BE and UE, or None and why they are not shown."""
    if view.class_name is None:
        return None, "CE/BE/UE need an attribute with role = 'class' in the spec"
    if kind_of(view.model).shape != "records" or view.run_spec is None:
        return None, (
            f"CE/BE/UE compare a release with its original record by record; a {view.model} "
            "release does not keep the original's records in order"
        )
    try:
        from fedanon.evaluation.evaluate import evaluate_tables
    except ImportError:  # pragma: no cover - scikit-learn is the [eval] extra
        return None, "CE/BE/UE need scikit-learn (pip install 'fedanon[eval]')"
    spec = view.run_spec
    needed = [a.name for a in spec.attributes if a.role not in NOT_RELEASED]
    original = read_coded(original_path, needed)
    missing = [c for c in needed if c not in released.codes]
    if missing:
        raise InputError(
            "the released table lacks a column", file=released.source, column=missing[0]
        )
    if original.n_rows != released.n_rows:
        raise InputError(
            f"--original has {original.n_rows:,} records, the released table {released.n_rows:,}",
            file=str(original_path),
            expected="the original of this release, with its records in the same order",
        )
    orig_cols = {c: original.column(c).tolist() for c in needed}
    rel_cols = {c: released.column(c).tolist() for c in needed}
    m = evaluate_tables(spec, orig_cols, rel_cols)
    return Classification(m.CE, m.BE, m.UE, m.records), ""
