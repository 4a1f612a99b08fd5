"""Gathering the page's content (:class:`fedanon.report.model.ReportData`) from the spec, the
released table, the optional original table and the optional run report.

Everything about groups and risk is recomputed from the RELEASED table (group sizes by
grouping its labels, vectorised); the run report adds what only the run knows (the method's
ledger or losses, the federation's traffic).  The original table, when given, serves CE/BE/UE
only: none of its cells is put on the page."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.errors import DataError
from fedanon.methods import registry
from fedanon.model.attributes import NOT_RELEASED
from fedanon.report import plots
from fedanon.report.coarsening import QidCut, qid_cut
from fedanon.report.hospital import hospital_sections
from fedanon.report.load import (
    CodedTable,
    SpecView,
    load_view,
    read_coded,
    read_header,
    read_run_report,
    read_warning,
)
from fedanon.report.methods import kind_of, method_sections, method_title, model_of
from fedanon.report.model import Headline, ReportData, Section, Table
from fedanon.report.risk import Risk, groups_of, prosecutor_risk, size_histogram
from fedanon.report.utility import classification
from fedanon.report.verdict import Verdict, audit_columns, verdict

COUNT = "count"


@dataclass(frozen=True)
class Inputs:
    """Where the report's inputs are; ``*_name``: the name to show and to judge the format
    by, when the file is a temporary (an HTML written with the run's own outputs)."""

    spec: Any  # the parsed spec (fedanon.Spec), parsed once by the command
    released: Path
    original: Path | None = None
    run_report: Path | None = None
    released_name: str | None = None
    run_report_name: str | None = None
    party_config: Path | None = None  # this hospital's party.toml: its [policy]
    party: Any = None  # that file as the daemon reads it (fedanon.party.config.PartyConfig)
    ledger: Path | None = None  # its privacy ledger: the run's rows (needs the run report)


def build(inputs: Inputs) -> ReportData:
    view = load_view(inputs.spec)
    run = (
        read_run_report(inputs.run_report, name=inputs.run_report_name)
        if inputs.run_report is not None
        else None
    )
    if run is not None:
        _same_model(view, run, inputs)
    wanted = list(dict.fromkeys([*(q.name for q in view.qids), *audit_columns(view)]))
    shape = kind_of(view.model).shape
    if inputs.original is not None and view.run_spec is not None and shape != "counts":
        wanted += [a.name for a in view.run_spec.attributes if a.role not in NOT_RELEASED]
    name = inputs.released_name or str(inputs.released)
    if shape == "counts":
        wanted += _count_column(inputs.released, name)
    table = read_coded(inputs.released, list(dict.fromkeys(wanted)), name=name)
    weights = _weights(table) if COUNT in table.codes else None
    groups = groups_of([table.codes[q.name] for q in view.qids], weights)
    risk = prosecutor_risk(groups, view.k)
    audit = verdict(view, table)
    cuts = [qid_cut(q, table, weights) for q in view.qids]
    sections = [
        _method_section(view, run),
        _audit_section(audit),
        _risk_section(risk, groups.sizes, view),
        _coarsening_section(cuts),
        _utility_section(view, table, risk, inputs.original),
    ]
    if run is not None:
        sections.extend(method_sections(run))
    warnings: list[str] = []
    if inputs.party_config is not None or inputs.ledger is not None:
        hospital_sections(inputs, run, sections, warnings)
    if run is not None and run.get("private") is False:
        warnings.append(str(run.get("warning") or "NOT PRIVATE"))
    elif shape == "counts":  # the table itself says so, with or without the run report
        note = read_warning(inputs.released, name=name)
        if note is not None:
            warnings.append(note)
    return ReportData(
        title=f"Release report: {Path(name).name}",
        method=method_title(view.model),
        spec=Path(view.source).name,
        released=Path(name).name,
        headline=Headline(
            verdict=audit.word,
            records=risk.records,
            groups=risk.groups,
            min_group=risk.min_group,
            highest_risk=risk.highest,
            average_risk=risk.average,
            below_2k=risk.below_2k,
            dr=risk.dr,
            note=kind_of(view.model).headline_note,
        ),
        sections=tuple(sections),
        warnings=tuple(warnings),
    )


def _same_model(view: SpecView, run: Mapping[str, Any], inputs: Inputs) -> None:
    from fedanon.errors import InputError

    named = model_of(run)
    family = kind_of(view.model).shape == "records"  # a plug-in's run may name LKC
    if named != view.model and not (family and named == registry.LKC):
        raise InputError(
            f"the run report describes a {named!r} run, the spec a {view.model!r} one",
            file=inputs.run_report_name or str(inputs.run_report),
            expected="the report of a run of this spec",
        )


def _count_column(path: Path, name: str) -> list[str]:
    """A DiffGen count table carries ``count``; an --expand release does not."""
    return [COUNT] if COUNT in read_header(path, name=name) else []


def _weights(table: CodedTable) -> np.ndarray[Any, np.dtype[np.int64]]:
    labels = table.labels[COUNT]
    try:
        values = np.asarray([int(v) for v in labels], dtype=np.int64)
    except ValueError:
        raise DataError("a count is not a whole number", file=table.source, column=COUNT) from None
    if (values < 0).any():
        raise DataError("a count is negative", file=table.source, column=COUNT)
    return values[table.codes[COUNT]]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.2f}%"


def _method_section(view: SpecView, run: Mapping[str, Any] | None) -> Section:
    facts = [("method", method_title(view.model)), *view.parameters]
    facts.append(("quasi-identifiers", ", ".join(q.name for q in view.qids)))
    if view.class_name:
        facts.append(("class column", view.class_name))
    notes = (
        ()
        if run is not None
        else (
            "No run report was given: the method's own figures "
            "(ledger, losses, traffic) are not shown.",
        )
    )
    return Section("Method and parameters", facts=tuple(facts), notes=notes, anchor="params")


def _audit_section(audit: Verdict) -> Section:
    return Section(
        "Audit verdict (independent recount)",
        facts=(("verdict", audit.headline),),
        notes=audit.lines,
        anchor="audit",
    )


def _risk_section(risk: Risk, sizes: np.ndarray[Any, Any], view: SpecView) -> Section:
    edges, g, r = size_histogram(sizes)
    order = np.sort(sizes)
    uniq, idx = np.unique(order, return_index=True)
    cum = np.cumsum(order)
    upto = cum[np.append(idx[1:], len(order)) - 1] / float(cum[-1])
    k = view.k
    facts = (
        ("records", f"{risk.records:,}"),
        ("equivalence groups", f"{risk.groups:,}"),
        ("smallest group", f"{risk.min_group:,}"),
        ("median group", f"{risk.median_group:,.1f}"),
        ("largest group", f"{risk.max_group:,}"),
        ("highest risk (1 / smallest group)", f"{risk.highest:.4f}"),
        ("average risk (groups / records)", f"{risk.average:.4f}"),
        (
            f"records in groups smaller than 2K{'' if k is None else f' = {2 * k}'}",
            _pct(risk.below_2k),
        ),
        (f"records in groups smaller than K{'' if k is None else f' = {k}'}", _pct(risk.below_k)),
        ("records unique in the release", f"{risk.unique:,}"),
    )
    notes = [
        "Prosecutor model: the attacker knows their target is in the release and knows "
        "its quasi-identifiers; the target is one of the records of its group."
    ]
    kind = kind_of(view.model)
    lkc = view.run_spec.privacy.as_lkc(len(view.qids)) if kind.shape == "records" else None
    if lkc is not None and len(view.qids) > lkc.L:
        notes.append(
            f"The groups here are on all {len(view.qids)} quasi-identifiers; LKC-privacy bounds "
            f"the groups on any {lkc.L} of them (an attacker knowing at most L values), so a "
            "group here may be smaller than K without violating the model."
        )
    if kind.risk_note:
        notes.append(kind.risk_note)
    return Section(
        "Re-identification risk (prosecutor model)",
        facts=facts,
        plots=(
            plots.group_size_histogram(edges.tolist(), g.tolist(), r.tolist(), k),
            plots.risk_curve(uniq.tolist(), upto.tolist(), k),
        ),
        notes=tuple(notes),
        anchor="risk",
    )


def _coarsening_section(cuts: list[QidCut]) -> Section:
    tables = []
    for c in cuts:
        rows = tuple((v.label, f"{v.records:,}", f"{v.share:.4f}", v.detail) for v in c.values)
        if c.rest[0]:
            rows += ((f"({c.rest[0]:,} more values)", f"{c.rest[1]:,}", "", ""),)
        tables.append(
            Table(
                f"{c.name}: {c.cut}",
                ("released value", "records", "share", "cut"),
                rows,
                bar_column=2,
            )
        )
    overview = plots.bars(
        "Released values per quasi-identifier",
        [c.name for c in cuts],
        [float(c.n_values) for c in cuts],
        "distinct released values",
        "quasi-identifier",
    )
    facts = tuple(
        (
            c.name,
            c.cut
            + (
                ""
                if c.generalized_share is None
                else f"; {100 * c.generalized_share:.1f}% of records generalized"
            ),
        )
        for c in cuts
    )
    return Section(
        "How each quasi-identifier was coarsened",
        facts=facts,
        tables=tuple(tables),
        plots=(overview,),
        anchor="coarsening",
    )


def _utility_section(
    view: SpecView, table: CodedTable, risk: Risk, original: Path | None
) -> Section:
    facts = [
        ("DR (discernibility ratio, sum |group|^2 / |T|^2)", f"{risk.dr:.4f}"),
        ("discernibility metric (sum |group|^2)", f"{risk.discernibility:,}"),
    ]
    plot_list = []
    notes = []
    if original is None:
        notes.append("CE/BE/UE: give --original (the table this release was made from).")
    else:
        cls, why = classification(view, table, original)
        if cls is None:
            notes.append(why)
        else:
            facts += [
                ("CE classification error (released)", _pct(cls.CE)),
                ("BE baseline error (raw data)", _pct(cls.BE)),
                ("UE upper-bound error (QIDs removed)", _pct(cls.UE)),
                ("CE - BE cost of anonymization", f"{100 * (cls.CE - cls.BE):+.2f}%"),
                ("UE - CE benefit over removing the QIDs", f"{100 * (cls.UE - cls.CE):+.2f}%"),
            ]
            plot_list.append(
                plots.bars(
                    "Classification error",
                    ["BE (raw)", "CE (released)", "UE (no QIDs)"],
                    [100 * cls.BE, 100 * cls.CE, 100 * cls.UE],
                    "error (%)",
                    "table",
                    "%",
                )
            )
            notes.append(
                "Decision tree on 2/3 of the records, tested on the other 1/3 "
                "(fedanon.evaluation); only the three error rates come from the "
                "original table."
            )
    return Section(
        "Utility", facts=tuple(facts), plots=tuple(plot_list), notes=tuple(notes), anchor="utility"
    )
