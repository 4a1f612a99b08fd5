"""The figures the HTML report states, checked against counts made here with pandas from the
input and the released table (never with fedanon's own counting): a page that says a QID was
not generalized, that a seeded DiffGen release is private, or that codes were kept that were
dropped with their records, misleads the hospital that signs the release."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd

from fedanon.cli.main import main

EXAMPLES = Path(__file__).parent.parent.parent / "examples"


class _Facts(HTMLParser):
    """The page's ``<dt>``/``<dd>`` pairs, its warnings and its figure captions, as text."""

    def __init__(self) -> None:
        super().__init__()
        self.facts: dict[str, str] = {}
        self.warnings: list[str] = []
        self.captions: list[str] = []
        self._text = ""
        self._dt = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._text = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "dt":
            self._dt = self._text.strip()
        elif tag == "dd":
            self.facts[self._dt] = self._text.strip()
        elif tag == "p" and self._text.startswith("NOT PRIVATE"):
            self.warnings.append(self._text.strip())
        elif tag == "figcaption":
            self.captions.append(self._text.strip())

    def handle_data(self, data: str) -> None:
        self._text += data


def _page(path: Path) -> _Facts:
    p = _Facts()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False, comment="#")


def _share(fact: str) -> float:
    m = re.search(r"([0-9.]+)% of records generalized", fact)
    assert m, fact
    return float(m.group(1))


def test_a_numeric_qid_with_an_interval_taxonomy_is_counted_generalized(tmp_path: Path) -> None:
    # Table I's Age has a taxonomy of intervals: every released age is an interval, none is
    # the patient's age, yet the page said "0.0% of records generalized" (its leaves counted
    # as raw values)
    d = EXAMPLES / "table1"
    out, rep, page = tmp_path / "t2.csv", tmp_path / "t2.json", tmp_path / "t2.html"
    argv = ["anonymize", "--spec", str(d / "run.toml"), "--input", str(d / "table1.csv")]
    argv += ["--output", str(out), "--report", str(rep), "--html", str(page), "--quiet"]
    assert main(argv) == 0
    orig, rel = _read(d / "table1.csv"), _read(out)
    facts = _page(page).facts
    for q in ("Job", "Sex", "Age"):
        changed = 100 * (orig[q].str.strip() != rel[q].str.strip()).mean()
        assert _share(facts[q]) == round(changed, 1), (q, facts[q])
    assert "raw values" not in facts["Age"]


def _small_dp_case(tmp_path: Path) -> Path:
    import numpy as np

    rng = np.random.default_rng(7)
    n = 300
    pd.DataFrame(
        {
            "Sex": rng.choice(["M", "F"], n, p=[0.8, 0.2]),
            "Age": rng.integers(18, 90, n),
            "Cls": rng.choice(["N", "Y"], n, p=[0.7, 0.3]),
        }
    ).to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "sex.txt").write_text("ANY\n  M\n  F\n")
    spec = tmp_path / "dp.toml"
    spec.write_text(
        '[privacy]\nmodel = "dp"\nepsilon = 1.0\nspecializations = 3\n\n'
        '[utility]\nscore = "max"\n\n'
        '[[attribute]]\nname = "Sex"\nrole = "qid"\ntype = "categorical"\ntaxonomy = "sex.txt"\n\n'
        '[[attribute]]\nname = "Age"\nrole = "qid"\ntype = "numeric"\ndomain = [18, 90]\n'
        "step = 1\n\n"
        '[[attribute]]\nname = "Cls"\nrole = "class"\nvalues = ["N", "Y"]\n'
    )
    return spec


def test_a_seeded_dp_release_is_not_private_on_its_page_without_the_run_report(
    tmp_path: Path,
) -> None:
    # the table's first line says NOT PRIVATE; the page of the table alone said nothing of it
    spec = _small_dp_case(tmp_path)
    for name in ("dp.csv", "dp.parquet"):
        out = tmp_path / name
        argv = ["anonymize", "--spec", str(spec), "--input", str(tmp_path / "t.csv")]
        assert main([*argv, "--output", str(out), "--seed", "3", "--quiet"]) == 0
        page = tmp_path / f"{name}.html"
        assert (
            main(["report", "--spec", str(spec), "--released", str(out), "--html", str(page)]) == 0
        )
        warnings = _page(page).warnings
        assert warnings and "fixed seed 3" in warnings[0], name
    argv = ["anonymize", "--spec", str(spec), "--input", str(tmp_path / "t.csv")]
    assert main([*argv, "--output", str(tmp_path / "private.csv"), "--quiet"]) == 0
    page = tmp_path / "private.html"
    released = str(tmp_path / "private.csv")
    assert main(["report", "--spec", str(spec), "--released", released, "--html", str(page)]) == 0
    assert not _page(page).warnings


def test_kkm_code_figures_match_a_recount(tmp_path: Path) -> None:
    data, out, rep = tmp_path / "rt.csv", tmp_path / "rt-rel.csv", tmp_path / "rt.json"
    spec_text = (EXAMPLES / "rt" / "run.toml").read_text()
    spec_text = re.sub(
        r'(taxonomy|constraints) = "(?!builtin)', rf'\1 = "{EXAMPLES / "rt"}/', spec_text
    )
    spec = tmp_path / "run.toml"
    spec.write_text(spec_text)
    assert main(["generate-rt", "--n", "3000", "--seed", "1", "--out", str(data)]) == 0
    argv = ["anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out)]
    page = tmp_path / "rt.html"
    assert main([*argv, "--report", str(rep), "--html", str(page), "--quiet"]) == 0
    orig, rel = _read(data), _read(out)
    dropped = set(json.loads(rep.read_text())["suppressed_record_rows"])
    assert dropped  # the case needs records suppressed whole
    kept_rows = orig[[i + 1 not in dropped for i in range(len(orig))]].reset_index(drop=True)
    assert len(kept_rows) == len(rel)

    def codes(cell: str) -> set[str]:
        return set(cell.split("|")) if cell else set()

    def covered(cell: str) -> set[str]:
        out: set[str] = set()
        for item in codes(cell):
            out |= set(item[1:-1].split()) if item.startswith("(") else {item}
        return out

    entries = sum(len(codes(c)) for c in orig["diagnoses"])
    kept = lost = 0
    lost_in: dict[tuple[str, ...], set[str]] = {}
    for (_, o), (_, r) in zip(kept_rows.iterrows(), rel.iterrows(), strict=True):
        have, shown = codes(o["diagnoses"]), covered(r["diagnoses"])
        kept += len(have & shown)
        lost += len(have - shown)
        key = tuple(r[c] for c in ("age", "sex", "race", "native-country"))
        lost_in.setdefault(key, set()).update(have - shown)
    of_dropped = entries - kept - lost
    p = _page(page)
    assert p.facts["(patient, code) entries"] == f"{entries:,}"
    assert p.facts["suppressed (patient, code) entries of released records"] == f"{lost:,}"
    assert p.facts["(patient, code) entries of suppressed records"] == f"{of_dropped:,}"
    per_cluster = sum(len(v) for v in lost_in.values())
    assert "distinct codes suppressed" not in p.facts  # it was a sum over the clusters
    assert p.facts["codes suppressed, counted once per cluster"] == f"{per_cluster:,}"
    bars = next(c for c in p.captions if c.startswith("(patient, code) entries"))
    assert f"kept {kept:,}" in bars and f"suppressed {lost:,}" in bars
    assert f"of suppressed records {of_dropped:,}" in bars


def test_a_dp_pages_key_figures_say_they_are_noisy(tmp_path: Path) -> None:
    # the cards read 'records 46,201' for 45,223 patients and 'min group size 1' with no word
    # that they are noisy counts: the note says so right under them; an LKC page has none
    spec = _small_dp_case(tmp_path)
    out, page = tmp_path / "dp.csv", tmp_path / "dp.html"
    argv = ["anonymize", "--spec", str(spec), "--input", str(tmp_path / "t.csv")]
    extra = ["--report", str(tmp_path / "dp.json"), "--html", str(page)]
    assert main([*argv, "--output", str(out), "--quiet", *extra]) == 0
    html = page.read_text(encoding="utf-8")
    cards_end = html.index("</section>", html.index('aria-label="key figures"'))
    assert html[cards_end:].startswith('</section><p class="note" id="figures-note">')
    assert "noisy total" in html
    lkc_page = tmp_path / "lkc.html"
    table1 = EXAMPLES / "table1"
    argv = ["anonymize", "--spec", str(table1 / "run.toml"), "--input", str(table1 / "table1.csv")]
    extra = ["--report", str(tmp_path / "l.json"), "--html", str(lkc_page)]
    assert main([*argv, "--output", str(tmp_path / "l.csv"), "--quiet", *extra]) == 0
    assert 'id="figures-note"' not in lkc_page.read_text(encoding="utf-8")


def test_an_m_private_pages_method_section_shows_the_coalition_checks(tmp_path: Path) -> None:
    # the run report's m_privacy block (m, providers, candidates checked and rejected) was not
    # on the page: it read 'holds' with nothing of the coalitions the engine checked
    table1 = EXAMPLES / "table1"
    frame = pd.concat([pd.read_csv(table1 / "table1.csv", dtype=str)] * 6, ignore_index=True)
    frame["hospital"] = [("a", "b", "c")[i % 3] for i in range(len(frame))]
    frame.to_csv(tmp_path / "data.csv", index=False)
    text = (table1 / "run.toml").read_text(encoding="utf-8")
    text = text.replace('taxonomy = "', f'taxonomy = "{table1}/')
    text = text.replace("[privacy]\n", "[privacy]\nm = 1\n", 1)
    spec = tmp_path / "m1.toml"
    spec.write_text(text + '\n[[attribute]]\nname = "hospital"\nrole = "provider"\n')
    page, rep = tmp_path / "o.html", tmp_path / "o.json"
    argv = ["anonymize", "--spec", str(spec), "--input", str(tmp_path / "data.csv")]
    extra = ["--output", str(tmp_path / "o.csv"), "--report", str(rep), "--html", str(page)]
    assert main([*argv, *extra, "--quiet"]) == 0
    mp = json.loads(rep.read_text())["m_privacy"]
    facts = _page(page).facts
    assert facts["m-privacy: largest coalition of hospitals (m)"] == "1"
    assert facts["m-privacy: hospitals (providers)"] == str(mp["providers"]) == "3"
    checked = facts["m-privacy: candidates checked against every coalition"]
    assert checked == str(mp["candidates_checked"]) and int(checked) > 0
    assert facts["m-privacy: candidates rejected by a coalition"] == str(mp["candidates_rejected"])
