"""The README is a landing page (issue 18): small, and every page it points to exists in docs/
(the site itself is built with ``mkdocs build --strict`` by ``make test``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent
README = ROOT / "README.md"
MAX_BYTES = 15 * 1024


def test_the_readme_is_a_landing_page_of_at_most_15_kb() -> None:
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size} bytes; the reference belongs in docs/"


def test_every_relative_link_of_the_readme_exists() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text(encoding="utf-8"))
    relative = [ln for ln in links if not re.match(r"[a-z]+:", ln) and not ln.startswith("#")]
    assert relative, "the README points to the docs"
    missing = [ln for ln in relative if not (ROOT / ln.split("#", 1)[0]).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_every_docs_page_is_in_the_site_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    absent = [p for p in pages if p not in nav]
    assert not absent, f"docs pages missing from mkdocs.yml nav: {absent}"
