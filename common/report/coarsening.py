"""How each quasi-identifier was coarsened, read from the released labels: the cut (the
taxonomy levels of a categorical attribute's released values, the interval widths of a numeric
one) and the share of records per released value."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fedanon.model.taxonomy import parse_interval
from fedanon.report.load import CodedTable, QidView

SHOWN_VALUES = 12  # released values listed per attribute (the largest); the rest summed
_CLOSED = re.compile(r"^\[\s*(-?[0-9.eE+]+)\s*:\s*(-?[0-9.eE+]+)\s*\]$")  # kkm: [41:52]


@dataclass(frozen=True)
class ValueShare:
    label: str
    records: int
    share: float
    detail: str  # "level 2 of 4, 3 leaves" / "width 10" / ""


@dataclass(frozen=True)
class QidCut:
    name: str
    kind: str
    n_values: int
    cut: str  # one line: the levels or widths of the cut
    # share of records whose value is not a raw value: an inner node, a numeric interval
    generalized_share: float | None
    values: tuple[ValueShare, ...]  # the largest SHOWN_VALUES
    rest: tuple[int, int]  # (values, records) not listed


def value_counts(
    codes: npt.NDArray[np.int32], n_labels: int, weights: npt.NDArray[np.int64] | None
) -> npt.NDArray[np.int64]:
    counts = np.bincount(codes, weights=weights, minlength=n_labels)
    return np.rint(counts).astype(np.int64)


def qid_cut(q: QidView, table: CodedTable, weights: npt.NDArray[np.int64] | None) -> QidCut:
    labels = table.labels[q.name]
    counts = value_counts(table.codes[q.name], len(labels), weights)
    present = np.flatnonzero(counts > 0)
    total = int(counts.sum()) or 1
    order = present[np.argsort(-counts[present], kind="stable")]
    details, cut, general = _describe(q, [labels[i] for i in present], counts[present], total)
    by_label = dict(zip((labels[i] for i in present), details, strict=True))
    shown = tuple(
        ValueShare(labels[i], int(counts[i]), int(counts[i]) / total, by_label[labels[i]])
        for i in order[:SHOWN_VALUES]
    )
    rest_idx = order[SHOWN_VALUES:]
    return QidCut(
        name=q.name,
        kind=q.kind,
        n_values=int(present.size),
        cut=cut,
        generalized_share=general,
        values=shown,
        rest=(int(rest_idx.size), int(counts[rest_idx].sum())),
    )


def _describe(
    q: QidView, labels: list[str], counts: npt.NDArray[np.int64], total: int
) -> tuple[list[str], str, float | None]:
    """(a detail per released value, the cut in one line, share of generalized records)."""
    if q.kind == "set":
        return ["" for _ in labels], f"{len(labels)} distinct released sets of codes", None
    if q.kind == "numeric" and q.taxonomy is None:
        return _numeric(q, labels, counts, total)
    if q.taxonomy is None:
        return ["" for _ in labels], f"{len(labels)} released values (no taxonomy)", None
    tax = q.taxonomy
    index = {lab: i for i, lab in enumerate(tax.labels)}
    height = int(tax.depth.max())
    # a numeric taxonomy's leaves are intervals too: a value is generalized unless a point
    dom = None if q.domain is None else float(q.domain[1] - q.domain[0])
    numeric = q.kind == "numeric"
    details: list[str] = []
    levels: dict[int, int] = {}
    general = 0
    unknown = 0
    for lab, c in zip(labels, counts, strict=True):
        node = index.get(lab)
        if node is None:
            details.append("not in the taxonomy")
            unknown += 1
            continue
        d = int(tax.depth[node])
        leaves = int(tax.leaf_hi[node] - tax.leaf_lo[node])
        levels[d] = levels.get(d, 0) + 1
        width = _width(lab, dom) if numeric else None
        if leaves > 1 or (width is not None and width > 0):
            general += int(c)
        detail = f"level {d} of {height}, {leaves} lea{'f' if leaves == 1 else 'ves'}"
        details.append(detail if width is None else f"{detail}, width {_num(width)}")
    parts = [f"{n} at level {d}" for d, n in sorted(levels.items())]
    if unknown:
        parts.append(f"{unknown} not in the taxonomy")
    s = "" if len(labels) == 1 else "s"
    cut = f"{len(labels)} released value{s} of a taxonomy of {tax.n_leaves} leaves: "
    cut += ", ".join(parts)
    leaf = "an interval of the taxonomy" if numeric else "a raw value"
    cut += f" (level 0 = everything; a leaf is {leaf})"
    return details, cut, general / total


def _numeric(
    q: QidView, labels: list[str], counts: npt.NDArray[np.int64], total: int
) -> tuple[list[str], str, float | None]:
    widths: list[float] = []
    details: list[str] = []
    general = 0
    dom = None if q.domain is None else float(q.domain[1] - q.domain[0])
    for lab, c in zip(labels, counts, strict=True):
        w = _width(lab, dom)
        if w is None:
            details.append("not an interval")
            continue
        widths.append(w)
        details.append(f"width {_num(w)}" if w > 0 else "exact value")
        if w > 0:
            general += int(c)
    if not widths:
        return details, f"{len(labels)} released values, none an interval", None
    arr = np.asarray(widths)
    if arr.max() == 0:
        cut = f"{len(labels)} exact value{'' if len(labels) == 1 else 's'}, no interval"
    elif arr.min() == arr.max():
        s = "" if len(labels) == 1 else "s"
        cut = f"{len(labels)} interval{s}, width {_num(float(arr.min()))}"
    else:
        cut = (
            f"{len(labels)} intervals, widths {_num(float(arr.min()))} to "
            f"{_num(float(arr.max()))} (median {_num(float(np.median(arr)))})"
        )
    if dom is not None and arr.max() > 0:
        cut += f" of a domain {_num(dom)} wide"
    return details, cut, general / total


def _width(label: str, domain: float | None) -> float | None:
    if label in ("*", "ANY") and domain is not None:
        return domain
    iv = parse_interval(label)
    if iv is not None:
        return float(iv[1] - iv[0])
    m = _CLOSED.match(label)
    if m:
        return float(m.group(2)) - float(m.group(1))
    try:
        float(label)
    except ValueError:
        return None
    return 0.0


def _num(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.4g}"
