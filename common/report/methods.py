"""The method-specific sections, from what the run report JSON holds.

One table, :data:`KINDS`, maps a method (:mod:`fedanon.methods.registry`: a plug-in model is
the LKC family) to what the report shows of it: its title, the shape of its release and its
run report's sections (the one place of method dispatch in this package; build, load,
utility and verdict ask :func:`kind_of`).  A federated run's
``federation`` block adds its own section whatever the model.  Only what the run published is
shown: a DiffGen report's selection scores are exact functions of the raw data (its
``confidential`` note) and never reach the page, nor do a (k, k^m) report's suppressed row
numbers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from fedanon.dp.model import MODEL as DP
from fedanon.kkm.spec import MODEL as KKM
from fedanon.methods import registry
from fedanon.report import plots
from fedanon.report.model import Section, Table

SectionsOf = Callable[[Mapping[str, Any]], list[Section]]
# the release's shape: "records" (the original's records, generalized: the LKC family,
# recounted by the L, K, C its model amounts to), "counts" (a noisy count table: DiffGen),
# "sets" (records with set-valued codes: (k, k^m), recounted by its own audit)
Shape = Literal["records", "counts", "sets"]


def model_of(run: Mapping[str, Any]) -> str:
    """The model a run report describes (LKC when it names none)."""
    name = run.get("model")
    if name is None:
        par = run.get("parameters")
        name = par.get("model") if isinstance(par, Mapping) else None
    return str(name or registry.LKC)


def _num(v: Any, digits: int = 4) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.0f}" if v.is_integer() and abs(v) >= 1000 else f"{v:.{digits}g}"
    if isinstance(v, Mapping) and "value" in v:  # an exact fraction and its float
        return f"{v.get('exact')} ({_num(v['value'])})"
    if isinstance(v, list | tuple):
        return ", ".join(str(x) for x in v)
    return str(v)


def _facts(run: Mapping[str, Any], keys: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((label, _num(run[key])) for key, label in keys if key in run)


def _lkc(run: Mapping[str, Any]) -> list[Section]:
    specs = run.get("specializations") or []
    rows = tuple(
        (
            str(i + 1),
            str(s.get("attribute", "")),
            str(s.get("value", "")),
            " | ".join(str(c) for c in s.get("children", [])),
            _num(s.get("score")),
        )
        for i, s in enumerate(specs)
    )
    facts = _facts(
        run,
        [
            ("records", "records"),
            ("groups", "equivalence groups (engine)"),
            ("min_group_size", "min group size over L-subsets (engine)"),
            ("max_confidence", "max confidence (engine)"),
            ("DR", "DR (engine)"),
            ("anonymize_seconds", "anonymization seconds"),
        ],
    )
    mp = run.get("m_privacy")
    if isinstance(mp, Mapping):  # m-privacy: the coalition checks the engine made
        facts += _facts(
            mp,
            [
                ("m", "m-privacy: largest coalition of hospitals (m)"),
                ("providers", "m-privacy: hospitals (providers)"),
                ("candidates_checked", "m-privacy: candidates checked against every coalition"),
                ("candidates_rejected", "m-privacy: candidates rejected by a coalition"),
            ],
        )
    table = Table(
        "Specializations, in the order they were chosen",
        ("#", "attribute", "value", "specialized into", "score"),
        rows,
    )
    return [
        Section(
            "Specializations (top-down, from the run report)",
            facts=facts,
            tables=(table,) if rows else (),
            notes=("The engine's own figures; the audit above recounts them independently.",),
            anchor="method",
        )
    ]


def _dp(run: Mapping[str, Any]) -> list[Section]:
    budget = run.get("budget") or {}
    facts = list(
        _facts(
            budget,
            [
                ("epsilon", "total epsilon"),
                ("mechanism_calls", "mechanism calls"),
                ("epsilon_prime", "epsilon per call"),
                ("noise_budget", "noise budget"),
                ("laplace_scale", "Laplace scale of the counts"),
                ("spent_total", "epsilon spent"),
                ("unspent", "epsilon unspent"),
            ],
        )
    )
    notes = []
    if run.get("private") is False:
        notes.append(str(run.get("warning") or "NOT PRIVATE: the run used a fixed seed"))
    ledger = budget.get("ledger") or []
    rows = tuple(
        (
            str(e.get("round", "")),
            str(e.get("step", "")),
            str(e.get("epsilon", "")),
            str(e.get("what", "")),
        )
        for e in ledger
    )
    spent = budget.get("spent") or {}
    plot_list = []
    if spent:
        labels = list(spent)
        values = [float(spent[k]["value"]) for k in labels]
        plot_list.append(
            plots.bars("Epsilon spent by step", labels, values, "epsilon", "step of DiffGen")
        )
    release = run.get("release") or {}
    facts.extend(
        _facts(
            release,
            [
                ("format", "release format"),
                ("groups", "generalized groups"),
                ("rows_written", "rows written"),
                ("noisy_total", "noisy total of the counts"),
                ("negative_counts_set_to_zero", "negative noisy counts set to zero"),
            ],
        )
    )
    notes.append(
        "The selection scores of the run report are exact functions of the raw data and are "
        "not shown here; the epsilon ledger, the budget and the cut are outputs of the mechanism."
    )
    return [
        Section(
            "DiffGen: the epsilon ledger",
            facts=tuple(facts),
            tables=(Table("Every spend of the budget", ("round", "step", "epsilon", "what"), rows),)
            if rows
            else (),
            plots=tuple(plot_list),
            notes=tuple(notes),
            anchor="method",
        )
    ]


def _kkm(run: Mapping[str, Any]) -> list[Section]:
    facts = _facts(
        run,
        [
            ("NCP", "NCP of the demographics (0 untouched, 1 generalized away)"),
            ("UL", "UL (utility loss of the codes)"),
            ("records", "records in"),
            ("released_records", "records released"),
            ("suppressed_records", "records suppressed (groups smaller than k)"),
            ("clusters", "clusters"),
            ("min_cluster_size", "smallest cluster"),
            ("code_entries", "(patient, code) entries"),
            ("suppressed_code_entries", "suppressed (patient, code) entries of released records"),
            ("max_suppressed_code_entries", "allowed suppressed entries"),
            ("suppressed_record_code_entries", "(patient, code) entries of suppressed records"),
            ("suppressed_codes_s", "codes suppressed, counted once per cluster"),
            ("distinct_codes", "distinct codes in"),
        ],
    )
    tables = []
    relaxed = run.get("relaxed")
    if isinstance(relaxed, list) and relaxed:
        tables.append(
            Table(
                "Relaxed requirements",
                ("requirement", "requested", "released", "limit"),
                tuple(
                    tuple(_num(r.get(k)) for k in ("name", "requested", "released", "limit"))
                    for r in relaxed
                    if isinstance(r, Mapping)
                ),
            )
        )
    plot_list = []
    entries, supp = run.get("code_entries"), run.get("suppressed_code_entries")
    gone = run.get("suppressed_record_code_entries")
    if isinstance(entries, int) and isinstance(supp, int) and entries > 0:
        # the entries of suppressed records are neither kept nor among the suppressed ones
        if isinstance(gone, int):
            names, counts = ["kept", "suppressed", "of suppressed records"], [supp, gone]
        elif run.get("suppressed_records"):  # a report of before that figure
            names, counts = ["kept or of suppressed records", "suppressed"], [supp]
        else:
            names, counts = ["kept", "suppressed"], [supp]
        plot_list.append(
            plots.bars(
                "(patient, code) entries",
                names,
                [entries - sum(counts), *counts],
                "entries",
                "",
            )
        )
    return [
        Section(
            "(k, k^m)-anonymity: NCP, UL and suppressed codes",
            facts=facts,
            tables=tuple(tables),
            plots=tuple(plot_list),
            notes=(
                "Which codes were suppressed is not listed: they are codes of the original "
                "records; only their numbers are.",
            ),
            anchor="method",
        )
    ]


def _federation(fed: Mapping[str, Any]) -> Section:
    parties = [str(p) for p in fed.get("parties", [])]
    total = fed.get("bytes_total") or {}
    facts = [
        ("hospitals", f"{len(parties)}: " + ", ".join(parties)),
        *_facts(
            fed,
            [
                ("rounds", "rounds"),
                ("count_sums", "count sums"),
                ("secure_sum", "secure sum"),
                ("sums", "sums"),
            ],
        ),
        ("bytes sent by the leader", _num(total.get("sent"))),
        ("bytes received by the leader", _num(total.get("received"))),
    ]
    union = fed.get("union")
    if isinstance(union, Mapping):
        facts.append(("secure union", str(union.get("method"))))
    steps = fed.get("bytes_by_step") or {}
    rows = tuple((str(k), _num(v.get("sent")), _num(v.get("received"))) for k, v in steps.items())
    seconds = fed.get("seconds") or {}
    timing = tuple((str(k), f"{float(v):.3f}") for k, v in seconds.items())
    plot_list = []
    if steps:
        plot_list.append(
            plots.bars(
                "Bytes by phase (sent + received at the leader)",
                list(steps),
                [float(v.get("sent", 0)) + float(v.get("received", 0)) for v in steps.values()],
                "bytes",
                "phase",
            )
        )
    phases = {k: float(v) for k, v in seconds.items() if k not in ("total", "network")}
    if phases:
        plot_list.append(
            plots.bars(
                "Time by phase", list(phases), list(phases.values()), "seconds", "phase", " s"
            )
        )
    tables = [Table("Bytes by phase", ("phase", "sent", "received"), rows)] if rows else []
    if timing:
        tables.append(Table("Seconds by phase (at the leader)", ("phase", "seconds"), timing))
    tables.extend(_policies(fed))
    return Section(
        "Federated run",
        facts=tuple(facts),
        tables=tuple(tables),
        plots=tuple(plot_list),
        anchor="federation",
    )


def _policies(fed: Mapping[str, Any]) -> list[Table]:
    """The hospitals' policies, when the run report carries them (``policies``: one
    mapping of rule to value per hospital)."""
    pol = fed.get("policies")
    if not isinstance(pol, Mapping) or not pol:
        return []
    rows = tuple(
        (str(party), str(rule), _num(value))
        for party, rules in pol.items()
        if isinstance(rules, Mapping)
        for rule, value in rules.items()
    )
    return [Table("The hospitals' policies that applied", ("hospital", "rule", "value"), rows)]


@dataclass(frozen=True)
class Kind:
    """What the report shows of a method: its title, its release's shape, its sections and
    a note on the group sizes of its release."""

    title: str
    shape: Shape
    sections: SectionsOf
    risk_note: str = ""
    headline_note: str = ""  # under the key figures


KINDS: dict[str, Kind] = {
    registry.LKC: Kind("LKC-privacy", "records", _lkc),
    DP: Kind(
        "DiffGen (epsilon-differential privacy)",
        "counts",
        _dp,
        "A DiffGen release's counts are noisy: these group sizes are the noisy "
        "counts; its guarantee is epsilon, not a group size.",
        "These figures are computed from the release's noisy counts (records is the "
        "noisy total, not the number of patients); DiffGen's guarantee is epsilon, not a "
        "group size or a risk.",
    ),
    KKM: Kind(
        "(k, k^m)-anonymity (ArtUC)",
        "sets",
        _kkm,
        "Groups here are records identical on the demographics and the whole set "
        "of codes; (k, k^m) protects against an attacker knowing up to m codes.",
    ),
}


def kind_of(model: str) -> Kind:
    """The report's kind of ``[privacy] model`` (a plug-in model: the LKC family's)."""
    return KINDS[registry.get(model).name]


def method_title(model: str) -> str:
    """The method's title, or a plug-in model's own name."""
    return kind_of(model).title if registry.get(model).name == model else model


def method_sections(run: Mapping[str, Any]) -> list[Section]:
    """The sections of a run report: its model's, then its federation's."""
    sections = kind_of(model_of(run)).sections(run)
    fed = run.get("federation")
    if isinstance(fed, Mapping):
        if "policies" not in fed and isinstance(run.get("policies"), Mapping):
            fed = {**fed, "policies": run["policies"]}
        sections.append(_federation(fed))
    elif isinstance(run.get("policies"), Mapping):
        tables = _policies({"policies": run["policies"]})
        sections.append(Section("Hospitals' policies", tables=tuple(tables)))
    return sections
