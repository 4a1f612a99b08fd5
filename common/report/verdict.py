"""The audit verdict on the page: the independent recount of ``fedanon audit``
(:mod:`fedanon.privacy.audit` for LKC-privacy and the models stating an LKC equivalent,
:mod:`fedanon.kkm.audit` for (k, k^m)-anonymity), run on the released table.  LKC's recount
groups the table's distinct rows weighted by how many records each stands for (the same result
as grouping every record, in a fraction of the time on a large release).  A DiffGen release
cannot be audited on a table: only its columns are checked."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fedanon.errors import SpecError
from fedanon.methods import registry
from fedanon.report.load import CodedTable, SpecView
from fedanon.report.methods import kind_of
from fedanon.report.risk import combine

SHOWN_VIOLATIONS = 10


@dataclass(frozen=True)
class Verdict:
    ok: bool | None  # None: cannot be audited on a table (DP)
    headline: str
    lines: tuple[str, ...]

    @property
    def word(self) -> str:
        if self.ok is None:
            return "cannot be audited on a table"
        return "holds" if self.ok else "VIOLATED"


def audit_columns(view: SpecView) -> list[str]:
    """The columns the recount reads (beyond the QIDs).  Never the provider column of an
    m-private spec: a release does not carry it (``fedanon audit`` joins it to check the
    coalitions; the page says m-privacy is not checked)."""
    if view.run_spec is not None and kind_of(view.model).shape == "records":
        from fedanon.privacy.audit import released_columns

        prov = view.run_spec.provider_attr
        return [c for c in released_columns(view.run_spec) if prov is None or c != prov.name]
    return [q.name for q in view.qids]


def verdict(view: SpecView, table: CodedTable) -> Verdict:
    shape = kind_of(view.model).shape
    if shape == "counts":
        return _dp(view, table)
    if shape == "sets":
        return _kkm(view, table)
    return _lkc(view, table)


def _lkc(view: SpecView, table: CodedTable) -> Verdict:
    from fedanon.privacy.audit import audit_table

    cols = audit_columns(view)
    key, first = combine([table.codes[c] for c in cols])
    weights = np.bincount(key, minlength=len(first)).astype(np.int64)
    frame = pd.DataFrame(
        {c: np.asarray(table.labels[c], dtype=object)[table.codes[c][first]] for c in cols}
    )
    try:
        res = audit_table(
            frame,
            view.run_spec,
            limit=SHOWN_VIOLATIONS,
            header=list(table.header),
            source=table.source,
            weights=weights,
        )
    except SpecError as exc:  # a plug-in model stating no LKC equivalent
        return Verdict(None, f"cannot be audited on a table: {exc.message}", ())
    head = (
        f"{'holds' if res.ok else 'VIOLATED'}: L={res.L} K={res.K} C={res.C} on "
        f"{res.records:,} records"
    )
    lines = [
        f"{res.subsets_checked:,} QID subsets of size {res.subset_size} checked "
        f"(smaller subsets are implied), {res.groups_checked:,} groups",
        f"min group size {res.min_group_size:,} (K = {res.K}), max confidence "
        f"{res.max_confidence:.4f} (C = {res.C})",
        *(line.strip() for line in res.columns.lines()),
        *(line.strip() for line in (res.mprivacy.lines() if res.mprivacy else [])),
    ]
    if res.groups_below_k or res.groups_above_c:
        lines.append(
            f"violating groups: {res.groups_below_k:,} with fewer than K records, "
            f"{res.groups_above_c:,} with a confidence above C"
        )
        lines.extend(f"worst: {v.describe()}" for v in res.violations)
    if view.model != registry.LKC:
        lines.insert(0, f"model {view.model!r} is recounted as the LKC-privacy it amounts to")
    return Verdict(res.ok, head, tuple(lines))


def _kkm(view: SpecView, table: CodedTable) -> Verdict:
    from fedanon.kkm.audit import audit_release
    from fedanon.kkm.schema import build_kkm_schema

    spec, reader = view.one.view, view.one.file_bytes_reader()
    schema = build_kkm_schema(spec, reader)
    names = [q.name for q in view.qids]
    data = {n: [str(v) for v in table.column(n)] for n in names}
    res = audit_release(spec, data, schema, header=list(table.header), source=table.source)
    head = f"{'holds' if res.ok else 'VIOLATED'}: k={res.k} m={res.m} on {res.records:,} records"
    lines = [
        f"min support {res.min_support:,} (k = {res.k}), {res.violations:,} records with a "
        "combination seen fewer than k times",
        f"{res.constraint_violations:,} generalized codes across utility constraints",
        *(line.strip() for line in res.columns.lines()),
    ]
    return Verdict(res.ok, head, tuple(lines))


def _dp(view: SpecView, table: CodedTable) -> Verdict:
    from fedanon.dp.release import COUNT
    from fedanon.privacy.columns import check_columns

    run = view.run_spec
    cols = check_columns(
        list(table.header),
        [*(q.name for q in view.qids), *([view.class_name] if view.class_name else [])],
        list(view.identifiers),
        optional=[COUNT],
        withheld=[a.name for a in run.attributes if a.role in ("sensitive", "other")],
        source=table.source,
    )
    if not cols.ok:
        return Verdict(
            False,
            "VIOLATED: the table carries columns a DiffGen release must not carry",
            tuple(line.strip() for line in cols.lines()),
        )
    return Verdict(
        None,
        "cannot be audited on a table: differential privacy is a property of the randomized "
        "mechanism, not of its output",
        ("the table's columns are the ones DiffGen releases (predictors, class, count)",),
    )
