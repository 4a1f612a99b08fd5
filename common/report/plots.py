"""The page's plots: matplotlib (Agg, no display) drawn as SVG and made inline-safe.

Text stays text (``svg.fonttype = none``: no glyph outlines, the browser's own sans-serif);
the XML prologue, the ``<metadata>`` block and every namespace URL are removed, so the page
names no address at all; each SVG gets ``role="img"``, an ``aria-label`` and a ``<title>``
holding the plot's text alternative.  Deterministic: a fixed hash salt, no date."""

from __future__ import annotations

import html
import io
import itertools
import re
from collections.abc import Sequence

from fedanon.report.model import Plot

WIDTH_IN = 7.0
HEIGHT_IN = 3.0
INK = "#1f3b57"
ACCENT = "#c0392b"

_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_XMLNS = re.compile(r'\s+xmlns(:\w+)?="[^"]*"')


def _pyplot() -> object:
    try:
        import matplotlib
    except ImportError as exc:
        from fedanon.errors import ConfigError

        raise ConfigError(
            "the HTML report draws its plots with matplotlib, which is not installed",
            expected="pip install 'fedanon[report]'",
        ) from exc

    matplotlib.use("Agg", force=True)
    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": "fedanon-report",
            "font.family": "sans-serif",
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    import matplotlib.pyplot as plt

    return plt


def _svg(fig: object, title: str, alt: str) -> Plot:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})  # type: ignore[attr-defined]
    plt.close(fig)  # type: ignore[arg-type]
    text = _PROLOGUE.sub("", buf.getvalue(), count=1)
    text = _METADATA.sub("", text)
    text = _XMLNS.sub("", text)
    label = html.escape(alt, quote=True)
    text = text.replace(
        "<svg ",
        f'<svg role="img" aria-label="{label}" focusable="false" ',
        1,
    )
    head_end = text.index(">") + 1
    text = (
        text[:head_end]
        + f"<title>{html.escape(title)}: {html.escape(alt)}</title>"
        + text[head_end:]
    )
    return Plot(title, alt, text)


def group_size_histogram(
    edges: Sequence[int], groups: Sequence[int], records: Sequence[int], k: int | None
) -> Plot:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN))  # type: ignore[attr-defined]
    lefts = list(edges[:-1])
    widths = [b - a for a, b in itertools.pairwise(edges)]
    ax.bar(lefts, list(records), width=widths, align="edge", color=INK, edgecolor="white")
    ax.set_xscale("log")
    ax.set_xlabel("group size (records sharing all released QID values, log scale)")
    ax.set_ylabel("records in such groups")
    title = "Group size distribution"
    ax.set_title(title)
    if k is not None:
        for x, name in ((k, "K"), (2 * k, "2K")):
            ax.axvline(x, color=ACCENT, linestyle="--", linewidth=1)
            ax.annotate(
                name,
                (x, 1),
                xycoords=("data", "axes fraction"),
                color=ACCENT,
                ha="left",
                va="top",
                xytext=(2, -2),
                textcoords="offset points",
            )
    parts = [
        f"{g:,} groups of size {a:,}"
        + (f" to {b - 1:,}" if b - 1 > a else "")
        + f" holding {r:,} records"
        for a, b, g, r in zip(edges[:-1], edges[1:], groups, records, strict=True)
        if g
    ]
    alt = "Histogram of group sizes: " + "; ".join(parts) + "."
    return _svg(fig, title, alt)


def risk_curve(sizes_sorted: Sequence[int], cum_share: Sequence[float], k: int | None) -> Plot:
    """Share of records in groups of at most a given size (1 / size = the prosecutor risk)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN))  # type: ignore[attr-defined]
    ax.step(list(sizes_sorted), [100 * s for s in cum_share], where="post", color=INK)
    ax.set_xscale("log")
    ax.set_ylim(0, 100)
    ax.set_xlabel("group size s (prosecutor risk 1/s), log scale")
    ax.set_ylabel("% of records in groups of size <= s")
    title = "Records by re-identification risk"
    ax.set_title(title)
    if k is not None:
        ax.axvline(2 * k, color=ACCENT, linestyle="--", linewidth=1)
    marks: list[tuple[int, float]] = []
    for s, c in zip(sizes_sorted, cum_share, strict=True):
        if not marks or c - marks[-1][1] >= 0.1 or s == sizes_sorted[-1]:
            marks.append((s, c))
    alt = (
        "Cumulative share of records by group size: "
        + "; ".join(
            f"{100 * c:.1f}% of records in groups of size {s:,} or less (risk at least {1 / s:.3g})"
            for s, c in marks[:12]
        )
        + "."
    )
    return _svg(fig, title, alt)


def bars(
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    xlabel: str,
    ylabel: str,
    unit: str = "",
) -> Plot:
    """Horizontal bars, one per label (largest list first, as given)."""
    plt = _pyplot()
    height = max(1.6, 0.3 * len(labels) + 0.9)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, height))  # type: ignore[attr-defined]
    ys = list(range(len(labels)))[::-1]
    ax.barh(ys, list(values), color=INK)
    ax.set_yticks(ys)
    ax.set_yticklabels([_short(lab) for lab in labels])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    alt = (
        f"{title}: "
        + "; ".join(f"{lab} {_fmt(v)}{unit}" for lab, v in zip(labels, values, strict=True))
        + "."
    )
    return _svg(fig, title, alt)


def _short(label: str, width: int = 40) -> str:
    """A tick label: shortened, and a ``$`` escaped (matplotlib would read mathtext)."""
    label = label if len(label) <= width else label[: width - 1] + "\u2026"
    return label.replace("$", r"\$")


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.4g}"
