"""What the privacy officer's page shows, as plain frozen data: a headline of key figures and
a list of sections (facts, tables, plots, notes).  :mod:`fedanon.report.build` gathers it from
the spec, the released table, the optional original table and the run report;
:mod:`fedanon.report.html` renders it.  Every string here is text (escaped when rendered); a
plot's SVG is the one piece of markup, made by :mod:`fedanon.report.plots`."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Table:
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    bar_column: int | None = None  # a column of shares in [0, 1] drawn as a bar too

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.header):
                raise ValueError(f"table {self.caption!r}: a row of {len(row)} cells")


@dataclass(frozen=True)
class Plot:
    """An inline SVG with its title and a text alternative (what the plot shows, in words)."""

    title: str
    alt: str
    svg: str

    def __post_init__(self) -> None:
        if not self.title or not self.alt or not self.svg.lstrip().startswith("<svg"):
            raise ValueError("a plot needs a title, a text alternative and an <svg> element")


@dataclass(frozen=True)
class Section:
    title: str
    facts: tuple[tuple[str, str], ...] = ()
    tables: tuple[Table, ...] = ()
    plots: tuple[Plot, ...] = ()
    notes: tuple[str, ...] = ()
    anchor: str = ""

    def __post_init__(self) -> None:
        if not self.title:
            raise ValueError("a section needs a title")


@dataclass(frozen=True)
class Headline:
    """The figures at the top of the page (also what the browser test looks for)."""

    verdict: str  # "holds" | "VIOLATED" | "cannot be audited on a table"
    records: int
    groups: int
    min_group: int
    highest_risk: float
    average_risk: float
    below_2k: float | None
    dr: float
    note: str = ""  # what the figures are, where the method's differ (DiffGen: noisy counts)


@dataclass(frozen=True)
class ReportData:
    title: str
    method: str  # e.g. "LKC-privacy", "DiffGen (epsilon-differential privacy)"
    spec: str  # the spec file's name
    released: str  # the released table's name
    headline: Headline
    sections: tuple[Section, ...] = field(default=())
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.sections:
            raise ValueError("a report needs sections")
