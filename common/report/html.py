"""The page: one self-contained HTML file.

Inline CSS and inline SVG only: no script, no font, image, style sheet or link fetched from
anywhere (hospital networks are closed; a page that fetched nothing also leaks nothing), a
Content-Security-Policy that forbids any fetch should a viewer add one, and print-friendly
CSS (plots and tables kept whole on a page, links and the contents list hidden).  Every string
is escaped with :func:`html.escape`; a plot's SVG comes from :mod:`fedanon.report.plots`."""

from __future__ import annotations

import html

from fedanon.report.model import Headline, Plot, ReportData, Section, Table

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

CSS = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: #1b1b1b; margin: 0 auto; max-width: 60rem; padding: 1.5rem; line-height: 1.45; }
h1 { font-size: 1.6rem; margin: 0 0 .2rem; }
h2 { font-size: 1.25rem; border-bottom: 2px solid #1f3b57; padding-bottom: .2rem;
  margin-top: 2rem; }
.sub { color: #4a4a4a; margin: 0 0 1rem; }
.cards { display: flex; flex-wrap: wrap; gap: .6rem; margin: 1rem 0; }
.card { border: 1px solid #c8d3de; border-radius: .4rem; padding: .5rem .8rem;
  min-width: 9rem; background: #f5f8fb; }
.card .v { font-size: 1.35rem; font-weight: 700; display: block; }
.card .k { font-size: .8rem; color: #3d4b59; }
.ok { color: #1e6b34; } .bad { color: #a11d12; } .na { color: #5c4b00; }
.warn { border: 2px solid #a11d12; background: #fdecea; padding: .6rem .9rem;
  font-weight: 700; margin: 1rem 0; }
dl.facts { display: grid; grid-template-columns: minmax(12rem, 22rem) 1fr; gap: .15rem 1rem;
  margin: .5rem 0; }
dl.facts dt { color: #3d4b59; } dl.facts dd { margin: 0; font-variant-numeric: tabular-nums; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .9rem; width: 100%; }
caption { text-align: left; font-weight: 600; padding: .3rem 0; }
th, td { border-bottom: 1px solid #d9dee3; padding: .2rem .5rem; text-align: left;
  vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.bar { display: inline-block; height: .7rem; background: #1f3b57; vertical-align: middle;
  margin-right: .3rem; }
figure { margin: 1rem 0; } figure svg { width: 100%; max-width: 48rem; height: auto; }
figcaption { font-size: .85rem; color: #3d4b59; }
p.note { font-size: .9rem; color: #333; }
nav ol { columns: 2; font-size: .9rem; }
nav a { color: #1f3b57; }
footer { margin-top: 2rem; font-size: .8rem; color: #555; }
@media print {
  body { max-width: none; padding: 0; font-size: 10pt; }
  nav { display: none; }
  h2 { break-after: avoid; }
  figure, table, .cards, dl.facts { break-inside: avoid; }
  .card { background: none; }
  a { color: inherit; text-decoration: none; }
}
"""


def e(text: object) -> str:
    return html.escape(str(text), quote=True)


def render(data: ReportData) -> str:
    body = [
        f"<h1>{e(data.title)}</h1>",
        f'<p class="sub">{e(data.method)} &middot; spec {e(data.spec)} &middot; '
        f"released table {e(data.released)}</p>",
        *(f'<p class="warn" role="alert">{e(w)}</p>' for w in data.warnings),
        _headline(data.headline),
        _nav(data.sections),
        *(_section(s, i) for i, s in enumerate(data.sections)),
        "<footer>Made by fedanon report. Every figure about groups and risk is recomputed "
        "from the released table; no value of the original table appears on this page.</footer>",
    ]
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{e(CSP)}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{e(data.title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(body)
        + "\n</main>\n</body>\n</html>\n"
    )


def _headline(h: Headline) -> str:
    cls = {"holds": "ok", "VIOLATED": "bad"}.get(h.verdict, "na")
    cards = [
        ("audit verdict", h.verdict, cls, "verdict"),
        ("records", f"{h.records:,}", "", "records"),
        ("equivalence groups", f"{h.groups:,}", "", "groups"),
        ("min group size", f"{h.min_group:,}", "", "min-group"),
        ("highest risk", f"{h.highest_risk:.4f}", "", "highest-risk"),
        ("average risk", f"{h.average_risk:.4f}", "", "average-risk"),
        (
            "records in groups < 2K",
            "n/a" if h.below_2k is None else f"{100 * h.below_2k:.2f}%",
            "",
            "below-2k",
        ),
        ("DR", f"{h.dr:.4f}", "", "dr"),
    ]
    parts = [
        f'<div class="card" id="{i}"><span class="v {c}">{e(v)}</span>'
        f'<span class="k">{e(k)}</span></div>'
        for k, v, c, i in cards
    ]
    note = f'<p class="note" id="figures-note">{e(h.note)}</p>' if h.note else ""
    return '<section class="cards" aria-label="key figures">' + "".join(parts) + "</section>" + note


def _nav(sections: tuple[Section, ...]) -> str:
    items = "".join(
        f'<li><a href="#{_anchor(s, i)}">{e(s.title)}</a></li>' for i, s in enumerate(sections)
    )
    return f'<nav aria-label="contents"><ol>{items}</ol></nav>'


def _anchor(s: Section, i: int) -> str:
    return f"s{i}-{s.anchor}" if s.anchor else f"s{i}"


def _section(s: Section, i: int) -> str:
    out = [f'<section id="{_anchor(s, i)}">', f"<h2>{e(s.title)}</h2>"]
    if s.facts:
        out.append('<dl class="facts">')
        out.extend(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in s.facts)
        out.append("</dl>")
    out.extend(f'<p class="note">{e(n)}</p>' for n in s.notes)
    out.extend(_plot(p) for p in s.plots)
    out.extend(_table(t) for t in s.tables)
    out.append("</section>")
    return "\n".join(out)


def _plot(p: Plot) -> str:
    caption = p.alt if p.alt.startswith(p.title) else f"{p.title}. {p.alt}"
    return f"<figure>{p.svg}<figcaption>{e(caption)}</figcaption></figure>"


def _table(t: Table) -> str:
    head = "".join(f'<th scope="col">{e(h)}</th>' for h in t.header)
    rows = []
    for row in t.rows:
        cells = []
        for j, cell in enumerate(row):
            numeric = _is_number(cell)
            bar = ""
            if j == t.bar_column and numeric:
                width = max(0.0, min(1.0, float(cell))) * 8
                bar = f'<span class="bar" style="width:{width:.2f}rem" aria-hidden="true"></span>'
            cells.append(f'<td class="n">{bar}{e(cell)}</td>' if numeric else f"<td>{e(cell)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f"<table><caption>{e(t.caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _is_number(cell: str) -> bool:
    try:
        float(cell.replace(",", "").rstrip("%"))
    except ValueError:
        return False
    return bool(cell)
