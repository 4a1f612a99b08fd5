"""Recount (k, k^m)-anonymity from the released text alone (the safety check before
publishing, and ``fedanon kkm-audit``).

For every released record, every combination of its (generalized) demographics with up to m of
its released (generalized) codes must be shared by at least k released records: records with
the same demographic cells whose set cells contain those generalized codes.  Counting exact
cells is a lower bound on what an attacker cannot tell apart (an attacker who knows a value
also matches every record whose generalized value contains it), so passing this check implies
the guarantee.  With a schema, every generalized code must also lie inside one utility
constraint (Definition 9).  Given the released header, its columns must be the ones the spec
releases (:mod:`fedanon.privacy.columns`): an identifier or an undeclared column is a
violation, a missing one bad input.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from fedanon.kkm.metrics import parse_release
from fedanon.kkm.schema import KkmSchema
from fedanon.kkm.spec import KkmSpec
from fedanon.privacy.columns import ColumnCheck, check_columns


@dataclass(frozen=True)
class AuditResult:
    k: int
    m: int
    records: int
    min_support: int  # smallest count of any (demographics, <= m codes) combination; 0 if none
    violations: int  # records with a combination seen fewer than k times
    first_violation_row: int | None  # 1-based row of the release
    constraint_violations: int  # generalized codes spanning several utility constraints
    identifier_columns: tuple[str, ...] = ()  # released although declared identifier
    undeclared_columns: tuple[str, ...] = ()  # released although not in the spec

    @property
    def columns(self) -> ColumnCheck:
        return ColumnCheck(self.identifier_columns, self.undeclared_columns)

    @property
    def ok(self) -> bool:
        return self.violations == 0 and self.constraint_violations == 0 and self.columns.ok

    def as_dict(self) -> dict[str, object]:
        return {**self.__dict__, "ok": self.ok}


def check_kkm_columns(
    spec: KkmSpec, header: Sequence[str], source: str | None = None, sep: str | None = None
) -> ColumnCheck:
    """The column rule for a (k, k^m) release: every declared column but the identifiers."""
    return check_columns(
        header,
        [a.name for a in spec.attributes if a.role != "identifier"],
        [a.name for a in spec.attributes if a.role == "identifier"],
        source=source,
        sep=sep,
    )


def audit_release(
    spec: KkmSpec,
    data: dict[str, list[str]],
    schema: KkmSchema | None = None,
    *,
    header: Sequence[str] | None = None,
    source: str | None = None,
    sep: str | None = None,
) -> AuditResult:
    """Recount ``data`` (the released columns as text); with ``header``, the released table's
    columns are held to the column rule first (DataError for a missing or repeated one)."""
    cols = ColumnCheck() if header is None else check_kkm_columns(spec, header, source, sep)
    k, m = spec.privacy.k, spec.privacy.m
    parsed = parse_release(spec, data)
    n = len(parsed.tokens)
    demo_ids: dict[tuple[str, ...], int] = {}
    rows_demo = [demo_ids.setdefault(t, len(demo_ids)) for t in zip(*parsed.demo, strict=True)]
    tok_ids: dict[tuple[str, ...], int] = {}
    by_obj: dict[int, list[int]] = {}  # cells are shared lists (parse_release): by identity
    rows_tok = []
    for cell in parsed.tokens:
        ids = by_obj.get(id(cell))
        if ids is None:
            ids = by_obj[id(cell)] = sorted({tok_ids.setdefault(t, len(tok_ids)) for t in cell})
        rows_tok.append(ids)
    counts: Counter[tuple[int, ...]] = Counter()
    for d, toks in zip(rows_demo, rows_tok, strict=True):
        counts[(d,)] += 1
        for size in range(1, min(m, len(toks)) + 1):
            counts.update((d, *c) for c in combinations(toks, size))
    low = 0
    first: int | None = None
    min_sup = n
    for i, (d, toks) in enumerate(zip(rows_demo, rows_tok, strict=True)):
        worst = counts[(d,)]
        for size in range(1, min(m, len(toks)) + 1):
            for c in combinations(toks, size):
                worst = min(worst, counts[(d, *c)])
        min_sup = min(min_sup, worst)
        if worst < k:
            low += 1
            first = i + 1 if first is None else first
    bad = _constraint_violations(schema, list(tok_ids)) if schema is not None else 0
    return AuditResult(
        k, m, n, min_sup if n else 0, low, first, bad, cols.identifiers, cols.undeclared
    )


def _constraint_violations(schema: KkmSchema, tokens: Sequence[tuple[str, ...]]) -> int:
    index = schema.items.index
    cls = schema.constraints.code_class
    bad = 0
    for t in tokens:
        classes = {int(cls[index[c]]) if c in index else -1 for c in t}
        if len(classes) != 1 or -1 in classes:
            bad += 1
    return bad
