"""`fedanon report` and `--html`: figures recomputed from the released table (checked against
brute-force counts), the weighted audit equal to the full one, a page with no value of the
original table, everything escaped, all-or-nothing publication, exit 2 for bad input."""

from __future__ import annotations

import csv
import gzip
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedanon.apispec import Spec
from fedanon.cli.main import main
from fedanon.io.fsutil import Pending, atomic_write, atomic_write_all, hold
from fedanon.privacy.audit import audit_lkc
from fedanon.report.build import Inputs, build
from fedanon.report.html import render
from fedanon.report.methods import method_sections
from fedanon.report.risk import groups_of, prosecutor_risk

MARKER = "QQMARKERqq7"
MARKER_WEIGHT = "1234567"  # a raw fnlwgt planted in the original; released as an interval


def _codes(frame: pd.DataFrame, cols: list[str]) -> list[np.ndarray]:
    return [pd.factorize(frame[c])[0].astype(np.int32) for c in cols]


def test_risk_figures_match_a_brute_force_count() -> None:
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(
        {c: rng.integers(0, card, size=2000).astype(str) for c, card in zip("abc", (3, 4, 9))}
    )
    sizes = Counter(zip(frame["a"], frame["b"], frame["c"], strict=True))
    risk = prosecutor_risk(groups_of(_codes(frame, list("abc"))), k=5)
    n = len(frame)
    assert risk.records == n and risk.groups == len(sizes)
    assert risk.min_group == min(sizes.values())
    assert risk.highest == pytest.approx(1 / min(sizes.values()))
    avg = sum(1 / sizes[t] for t in zip(frame["a"], frame["b"], frame["c"], strict=True)) / n
    assert risk.average == pytest.approx(avg)
    assert risk.below_2k == pytest.approx(sum(s for s in sizes.values() if s < 10) / n)
    assert risk.dr == pytest.approx(sum(s * s for s in sizes.values()) / n**2)


def test_weights_count_rows_and_zero_weight_groups_vanish() -> None:
    codes = [np.array([0, 0, 1, 2], dtype=np.int32)]
    g = groups_of(codes, np.array([3, 4, 5, 0]))
    assert sorted(g.sizes.tolist()) == [5, 7] and g.records == 12


def test_weighted_audit_equals_the_audit_of_every_record() -> None:
    rng = np.random.default_rng(11)
    n = 3000
    frame = pd.DataFrame(
        {
            "q1": rng.choice(["a", "b", "c"], n),
            "q2": rng.choice(["x", "y"], n, p=[0.9, 0.1]),
            "q3": rng.choice([f"v{i}" for i in range(12)], n),
            "s": rng.choice(["ill", "well", "other"], n, p=[0.1, 0.6, 0.3]),
        }
    )
    args = (["q1", "q2", "q3"], "s", ["ill"], 2, 15, 0.3)
    full = audit_lkc(frame, *args)
    agg = frame.groupby(list(frame.columns), sort=False).size().reset_index(name="w")
    weighted = audit_lkc(agg.drop(columns="w"), *args, weights=agg["w"].to_numpy())
    assert len(agg) < n
    for field in ("ok", "records", "min_group_size", "groups_below_k", "groups_above_c"):
        assert getattr(weighted, field) == getattr(full, field), field
    assert weighted.max_confidence == pytest.approx(full.max_confidence)
    assert weighted.groups_checked == full.groups_checked
    assert {(v.subset, v.values, v.size) for v in weighted.violations} == {
        (v.subset, v.values, v.size) for v in full.violations
    }


def test_hold_publishes_all_or_nothing(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    with hold([a, b]) as held:
        atomic_write_all(
            [Pending(a, lambda fh: fh.write("1")), Pending(b, lambda fh: fh.write("x"))]
        )
        atomic_write(b, lambda fh: fh.write("2"))  # written twice: the last one counts
        atomic_write(c, lambda fh: fh.write("free"))  # not held
        assert not a.exists() and not b.exists() and c.read_text() == "free"
        assert held.temp_of(b) is not None and held.temp_of(b).read_text() == "2"  # type: ignore[union-attr]
        held.publish([Pending(tmp_path / "d.txt", lambda fh: fh.write("page"))])
    assert (a.read_text(), b.read_text(), (tmp_path / "d.txt").read_text()) == ("1", "2", "page")
    with pytest.raises(RuntimeError), hold([a]):
        atomic_write(a, lambda fh: fh.write("new"))
        raise RuntimeError("the page failed")
    assert a.read_text() == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt", "c.txt", "d.txt"]


@pytest.fixture(scope="module")
def adult_case(adult_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """3000 Adult records with a unique patient id (the identifier) holding MARKER, one raw
    fnlwgt set to MARKER_WEIGHT, anonymized with --report and --html."""
    tmp = tmp_path_factory.mktemp("report")
    with gzip.open(adult_dir / "adult.csv.gz", "rt", newline="") as fh:
        rows = list(csv.reader(fh))[:3001]
    header = ["patient-id", *rows[0]]
    body = [[f"{MARKER}-{i:05d}", *r] for i, r in enumerate(rows[1:])]
    body[17][header.index("fnlwgt")] = MARKER_WEIGHT
    original = tmp / "original.csv"
    with original.open("w", newline="") as fh:
        csv.writer(fh).writerows([header, *body])
    spec_text = (adult_dir / "run.toml").read_text()
    spec_text = spec_text.replace('taxonomy = "', f'taxonomy = "{adult_dir}/')
    spec_text += '\n[[attribute]]\nname = "patient-id"\nrole = "identifier"\n'
    spec = tmp / "run.toml"
    spec.write_text(spec_text)
    out = {"spec": spec, "original": original, "dir": tmp}
    for name in ("released.csv", "report.json", "page.html"):
        out[name] = tmp / name
    argv = ["anonymize", "--spec", str(spec), "--input", str(original), "--quiet"]
    argv += ["--output", str(out["released.csv"]), "--report", str(out["report.json"])]
    assert main([*argv, "--html", str(out["page.html"])]) == 0
    return out


def _released_sizes(path: Path, qids: list[str]) -> Counter[tuple[str, ...]]:
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    return Counter(tuple(r[q] for q in qids) for r in rows)


def test_anonymize_html_shows_the_recounted_figures(adult_case: dict[str, Path]) -> None:
    page = adult_case["page.html"].read_text()
    rep = json.loads(adult_case["report.json"].read_text())
    sizes = _released_sizes(adult_case["released.csv"], rep["parameters"]["qids"])
    n = sum(sizes.values())
    assert f'id="min-group"><span class="v ">{min(sizes.values()):,}<' in page
    assert f"{1 / min(sizes.values()):.4f}" in page
    dr = sum(s * s for s in sizes.values()) / n**2
    assert f'id="dr"><span class="v ">{dr:.4f}<' in page
    assert ">holds<" in page and "Specializations, in the order they were chosen" in page
    assert page.count("<svg") >= 3 and page.count("<figcaption>") == page.count("<svg")
    assert page.count('role="img"') == page.count("<svg") and "<title>" in page


def test_no_value_of_the_original_is_on_the_page(adult_case: dict[str, Path]) -> None:
    html_out = adult_case["dir"] / "with-original.html"
    code = main(
        [
            "report",
            "--spec", str(adult_case["spec"]),
            "--released", str(adult_case["released.csv"]),
            "--original", str(adult_case["original"]),
            "--run-report", str(adult_case["report.json"]),
            "--html", str(html_out),
        ]
    )  # fmt: skip
    assert code == 0
    for page in (html_out.read_text(), adult_case["page.html"].read_text()):
        assert MARKER not in page and MARKER.lower() not in page.lower()
        assert MARKER_WEIGHT not in page and "1,234,567" not in page
    text = html_out.read_text()
    assert "CE classification error" in text and "BE baseline error" in text


def test_the_page_names_no_address(adult_case: dict[str, Path]) -> None:
    page = adult_case["page.html"].read_text()
    assert not re.search(r"https?:|ftp:|//[a-z0-9]", page, re.I)
    assert "<script" not in page.lower() and "@import" not in page and "@font-face" not in page
    for ref in re.findall(r"(?:href|src)\s*=\s*\"([^\"]*)\"", page):
        assert ref.startswith(("#", "data:")), ref
    for ref in re.findall(r"url\(([^)]*)\)", page):
        assert ref.strip("'\"").startswith(("#", "data:")), ref


def test_labels_are_escaped(table1_dir: Path, tmp_path: Path) -> None:
    released = tmp_path / "export.csv"
    hostile = '<script>alert("x")</script>'
    rows = [["Job", "Sex", "Age", "Transfuse", "Surgery"]]
    rows += [[hostile, "M", "[1-99)", "Y", "Plastic"]] * 3 + [
        ["Janitor", "F", "[1-99)", "N", "Vascular"]
    ] * 3
    with released.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    page = render(build(Inputs(Spec.from_toml(table1_dir / "run.toml"), released)))
    assert "<script" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


def test_dp_page_has_the_ledger_but_no_selection_score(
    adult_csv: Path, adult_dir: Path, tmp_path: Path
) -> None:
    out, rep, page = tmp_path / "dp.csv", tmp_path / "dp.json", tmp_path / "dp.html"
    argv = ["anonymize", "--spec", str(adult_dir / "dp.toml"), "--input", str(adult_csv)]
    argv += [
        "--output",
        str(out),
        "--report",
        str(rep),
        "--html",
        str(page),
        "--seed",
        "3",
        "--quiet",
    ]
    assert main(argv) == 0
    doc = json.loads(rep.read_text())
    text = page.read_text()
    assert "DiffGen: the epsilon ledger" in text and "Epsilon spent by step" in text
    assert "cannot be audited on a table" in text and "NOT PRIVATE" in text
    for entry in doc["budget"]["ledger"]:
        assert (
            f"<td>{entry['what']}</td>".replace('"', "&quot;") in text or entry["step"] == "noise"
        )
    for sel in doc["selections"]:
        score = sel["score"]
        shown = [f"{score}", f"{score:,.0f}", f"{score:.4g}"]
        assert not any(f">{s}<" in text for s in shown), sel
    noisy = doc["release"]["noisy_total"]
    assert f">{noisy:,}<" in text  # the records of a count table: the sum of the noisy counts


def test_federation_and_policies_from_the_run_report() -> None:
    run = {
        "parameters": {"L": 2, "K": 5, "C": 1.0, "qids": ["a"]},
        "specializations": [],
        "federation": {
            "parties": ["north", "south", "east"],
            "rounds": 4,
            "bytes_total": {"sent": 1200, "received": 3400},
            "bytes_by_step": {"prepare": {"sent": 1000, "received": 400},
                              "round 0": {"sent": 200, "received": 3000}},
            "seconds": {"total": 1.5, "prepare": 0.5, "rounds": 0.9},
            "policies": {"north": {"min_k": 5, "allowed_models": ["lkc"]}},
        },
    }  # fmt: skip
    sections = method_sections(run)
    fed = sections[-1]
    assert fed.title == "Federated run"
    assert ("hospitals", "3: north, south, east") in fed.facts
    captions = [t.caption for t in fed.tables]
    assert "Bytes by phase" in captions and "The hospitals' policies that applied" in captions
    pol = fed.tables[captions.index("The hospitals' policies that applied")]
    assert ("north", "min_k", "5") in pol.rows
    assert {p.title for p in fed.plots} == {
        "Bytes by phase (sent + received at the leader)",
        "Time by phase",
    }


def _report(*argv: str) -> int:
    return main(["report", *argv])


def test_bad_inputs_exit_2(
    adult_case: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, rel = str(adult_case["spec"]), adult_case["released.csv"]
    lacking = tmp_path / "lacking.csv"
    frame = pd.read_csv(rel, dtype=str).drop(columns=["education"])
    frame.to_csv(lacking, index=False)
    cases = [
        (["--released", str(lacking)], "lacks a column"),
        (["--released", str(rel), "--run-report", str(spec)], "not JSON"),
        (["--released", str(tmp_path / "none.csv")], "no such file"),
        (["--released", str(rel), "--html", str(rel)], "refusing to overwrite"),
    ]
    dp_rep = tmp_path / "dp.json"
    dp_rep.write_text(json.dumps({"model": "dp", "budget": {}}))
    cases.append((["--released", str(rel), "--run-report", str(dp_rep)], "describes a 'dp' run"))
    for extra, needle in cases:
        argv = ["--spec", spec, *extra]
        if "--html" not in extra:
            argv += ["--html", str(tmp_path / "out.html")]
        assert _report(*argv) == 2, extra
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err, err
        assert not (tmp_path / "out.html").exists()


def test_a_failing_page_publishes_nothing(
    adult_case: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fedanon.report.cli as report_cli

    def broken(inputs: object) -> str:
        raise RuntimeError("the page failed")

    monkeypatch.setattr(report_cli, "render_page", broken)
    argv = ["anonymize", "--spec", str(adult_case["spec"]), "--input", str(adult_case["original"])]
    argv += ["--output", str(tmp_path / "r.csv"), "--report", str(tmp_path / "r.json")]
    assert main([*argv, "--html", str(tmp_path / "r.html"), "--quiet"]) == 1
    assert list(tmp_path.iterdir()) == []


def test_html_needs_a_report(
    adult_case: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["anonymize", "--spec", str(adult_case["spec"]), "--input", str(adult_case["original"])]
    argv += ["--output", str(tmp_path / "r.csv"), "--html", str(tmp_path / "r.html")]
    assert main(argv) == 2
    assert "--html needs the run's JSON report (--report)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_leader_run_html_is_checked_before_any_connection(
    tmp_path: Path, table1_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for f in table1_dir.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    certs = tmp_path / "certs"
    certs.mkdir()
    for name in ("ca.pem", "leader.pem", "leader.key"):
        (certs / name).write_text("placeholder\n")
    cfg = tmp_path / "federation.toml"
    parties = "".join(
        f'[[party]]\nname = "{p}"\naddress = "127.0.0.1:{i + 1}"\n' for i, p in enumerate("abc")
    )
    cfg.write_text(
        '[run]\nspec = "run.toml"\noutput = "out.csv"\n[leader]\nname = "leader"\n'
        '[tls]\nca = "certs/ca.pem"\ncert = "certs/leader.pem"\nkey = "certs/leader.key"\n'
        + parties
    )
    code = main(["leader", "run", "--config", str(cfg), "--html", str(tmp_path / "p.html")])
    assert code == 2
    assert "--html needs the run's JSON report ([run] report)" in capsys.readouterr().err
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "p.html").exists()


def test_kkm_page(tmp_path: Path, examples_dir: Path) -> None:
    data, out, rep = tmp_path / "rt.csv", tmp_path / "rt-rel.csv", tmp_path / "rt.json"
    spec_text = (examples_dir / "rt" / "run.toml").read_text()
    spec_text = re.sub(
        r'(taxonomy|constraints) = "(?!builtin)', rf'\1 = "{examples_dir / "rt"}/', spec_text
    )
    spec = tmp_path / "run.toml"
    spec.write_text(spec_text)
    assert main(["generate-rt", "--n", "3000", "--seed", "1", "--out", str(data)]) == 0
    argv = ["anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out)]
    assert main([*argv, "--report", str(rep), "--html", str(tmp_path / "rt.html"), "--quiet"]) == 0
    page = (tmp_path / "rt.html").read_text()
    doc = json.loads(rep.read_text())
    assert "(k, k^m)-anonymity: NCP, UL and suppressed codes" in page
    assert f"{doc['NCP']:.4g}" in page and f"{doc['suppressed_code_entries']:,}" in page
    assert ">holds<" in page


def test_size_histogram_counts_every_group() -> None:
    from fedanon.report.risk import size_histogram

    sizes = np.array([1, 1, 2, 3, 7, 40, 40, 1000], dtype=np.int64)
    edges, groups, records = size_histogram(sizes)
    assert groups.sum() == len(sizes) and records.sum() == sizes.sum()
    for a, b, g in zip(edges[:-1], edges[1:], groups, strict=True):
        assert g == int(((sizes >= a) & (sizes < b)).sum())


def test_labels_read_trimmed_from_csv_and_parquet(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fedanon.report.load import read_coded

    csv_path = tmp_path / "t.csv"
    csv_path.write_text("# NOT PRIVATE: a seeded release\na,b\n M,1\nM ,2\nF,1\n")
    pq_path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [" M", "M ", "F"], "b": [1, 2, 1]}), pq_path)
    for path in (csv_path, pq_path):
        t = read_coded(path, ["a", "b"])
        assert t.n_rows == 3 and t.labels["a"] == ("F", "M") and t.labels["b"] == ("1", "2")
        assert t.column("a").tolist() == ["M", "M", "F"]
        assert t.column("b").tolist() == ["1", "2", "1"]
