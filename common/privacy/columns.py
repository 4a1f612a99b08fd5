"""Which columns a released table may carry: the column rule of ``fedanon audit``.

A release holds exactly the columns its spec releases: every declared column except the
identifiers (QIDs generalized; class, sensitive, other and -- for (k, k^m) -- set columns as
the model writes them).  Recounting groups says nothing about a column outside that list, so
it is checked on its own:

* a column the spec declares ``role = "identifier"`` in the released table: violated (exit 3),
  however well the groups are formed -- an identifier singles out its record;
* a column the spec does not declare at all: violated (exit 3) -- it is a raw column nobody
  reviewed, and it may identify (the spec reader refuses undeclared input columns for the same
  reason);
* a released column missing from the table: bad input (exit 2).  A table without a QID or the
  sensitive column cannot be recounted, and one without a class or ``other`` column is not the
  release of this spec (wrong file, wrong spec, wrong separator).  A release that leaves a
  column out on purpose is audited with that column declared ``identifier`` (never released);
* a header naming a column twice: bad input (exit 2), a column could hide behind its twin.

A DiffGen (``model = "dp"``) release holds the predictors (QIDs), the class and ``count``
(absent with ``--expand``); its sensitive and ``other`` columns are declared but withheld, and
one in the table is a violation like an identifier.  Only the columns of a DP release can be
checked: epsilon-DP is a property of the mechanism, so a DP release with the right columns
is still "cannot be audited" (exit 2).

Column order is not checked (it is presentation, not disclosure; another tool's export may
reorder).  Names are compared exactly as written, surrounding blanks dropped (``id`` is not
``ID``: it is undeclared).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from fedanon.errors import DataError
from fedanon.logsafe import safe

NAME_CHARS = 80  # a column name as shown in a printed line


@dataclass(frozen=True)
class ColumnCheck:
    """The columns of a released table that the spec does not release."""

    identifiers: tuple[str, ...] = ()  # declared identifier: never released
    undeclared: tuple[str, ...] = ()  # not in the spec: a raw column
    withheld: tuple[str, ...] = ()  # declared, but the spec's model does not release it

    @property
    def ok(self) -> bool:
        return not (self.identifiers or self.undeclared or self.withheld)

    def lines(self) -> list[str]:
        """Printable lines (names escaped like log lines), empty when ``ok``."""
        out = []
        if self.identifiers:
            out.append(
                f"  identifier column(s) released: {names(self.identifiers)} "
                '(the spec declares them role = "identifier": never released)'
            )
        if self.undeclared:
            out.append(
                f"  undeclared column(s) released: {names(self.undeclared)} "
                "(not in the spec: a raw column, it may identify)"
            )
        if self.withheld:
            out.append(
                f"  withheld column(s) released: {names(self.withheld)} "
                "(declared, but the spec's privacy model does not release them)"
            )
        return out


def names(columns: Sequence[str]) -> str:
    return ", ".join(f"'{safe(c, NAME_CHARS)}'" for c in columns)


def check_columns(
    header: Sequence[str],
    released: Sequence[str],
    identifiers: Sequence[str],
    *,
    optional: Sequence[str] = (),
    withheld: Sequence[str] = (),
    source: str | None = None,
    sep: str | None = None,
) -> ColumnCheck:
    """Compare a released table's ``header`` with the columns the spec ``released`` and
    declares as ``identifiers``; ``optional`` columns may be there (DiffGen's ``count``),
    ``withheld`` ones are declared but not released by the model (DiffGen: sensitive and
    other columns).  DataError (exit 2) for a repeated or a missing column; the columns that
    must not be there in the result (see the module docstring)."""
    dup = sorted(h for h, n in Counter(header).items() if n > 1)
    if dup:
        raise DataError(
            "a column name occurs twice in the header", file=source, line=1, column=dup[0]
        )
    present = set(header)
    missing = [c for c in released if c not in present]
    if missing:
        hint = ""
        if sep is not None and len(header) == 1:
            hint = f" (separator {sep!r}: is it the right one?)"
        raise DataError(
            f"the released table lacks a column the spec releases{hint}",
            file=source,
            line=1,
            column=missing[0],
            expected=f"a header naming {', '.join(released)} (in any order; a column left "
            'out on purpose: declare it role = "identifier")',
        )
    ident, held = set(identifiers), set(withheld) - set(released)
    known = set(released) | set(optional) | ident | held
    return ColumnCheck(
        identifiers=tuple(h for h in header if h in ident),
        undeclared=tuple(h for h in header if h not in known),
        withheld=tuple(h for h in header if h in held),
    )
