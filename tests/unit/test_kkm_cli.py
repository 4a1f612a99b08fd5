"""The kkm commands end to end: generate-rt, anonymize (Algorithms 1 and 2), audit, evaluate
(and the old kkm-audit, kkm-evaluate aliases); releases re-checked with the independent
checker."""

from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path

import pytest

from fedanon.apispec import Spec
from fedanon.cli.main import main
from fedanon.kkm.hierarchy import builtin

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kkm_checker import covers, is_kkm_anonymous

ROOT = Path(__file__).resolve().parent.parent.parent
RT_SPEC = ROOT / "examples" / "rt" / "run.toml"
FIG1 = Path(__file__).resolve().parent / "kkm_fig1"


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def test_generate_rt_is_deterministic_and_realistic(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    assert main(["generate-rt", "--n", "400", "--seed", "3", "--out", str(a)]) == 0
    assert main(["generate-rt", "--n", "400", "--seed", "3", "--out", str(b)]) == 0
    assert main(["generate-rt", "--n", "400", "--seed", "4", "--out", str(c)]) == 0
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    header, rows = _rows(a)
    assert header == ["age", "sex", "race", "native-country", "diagnoses"]
    leaves = builtin("icd9cm").index
    sizes = [len(r[4].split("|")) for r in rows]
    assert min(sizes) >= 1 and max(sizes) <= 15
    assert all(code in leaves for r in rows for code in r[4].split("|"))
    uc = tmp_path / "uc.toml"
    assert (
        main(
            [
                "generate-rt",
                "--n",
                "50",
                "--out",
                str(tmp_path / "d.csv"),
                "--constraints-out",
                str(uc),
                "--level",
                "section",
                "--age-width",
                "24",
            ]
        )
        == 0
    )
    text = uc.read_text()
    assert text.count("[[constraint]]") == 184  # ICD-9-CM sections, bands repeat
    assert "age = [17, 40]" in text and 'diagnoses = ["001-009"]' in text
    young = [s for r, s in zip(rows, sizes, strict=True) if int(r[0]) < 30]
    old = [s for r, s in zip(rows, sizes, strict=True) if int(r[0]) >= 60]
    assert sum(old) / len(old) > sum(young) / len(young)  # more codes with age


def test_anonymize_audit_evaluate_generated(tmp_path: Path) -> None:
    work = tmp_path / "rt"
    shutil.copytree(ROOT / "examples" / "rt", work)
    (tmp_path / "adult").symlink_to(ROOT / "examples" / "adult")
    data = work / "rt.csv"
    assert main(["generate-rt", "--n", "600", "--seed", "1", "--out", str(data)]) == 0
    spec = work / "run.toml"
    text = spec.read_text().replace("\nepsilon_suppress = 0.2", "\nepsilon_suppress = 1.0")
    spec.write_text(text.replace("\ndelta = 0.5", "\ndelta = 0.3"))
    out, rep = work / "out.csv", work / "rep.json"
    assert (
        main(
            [
                "anonymize",
                "--spec",
                str(spec),
                "--input",
                str(data),
                "--output",
                str(out),
                "--report",
                str(rep),
                "--quiet",
            ]
        )
        == 0
    )
    report = json.loads(rep.read_text())
    assert report["model"] == "kkm" and report["audit"]["ok"]
    assert report["NCP"] <= 0.3 + 1e-9 and set(report["ARE"]) == {"W1", "W2", "W3"}
    _, rows = _rows(out)
    _, orig = _rows(data)
    assert is_kkm_anonymous([r[:4] for r in rows], [r[4] for r in rows], k=5, m=2)
    kept = [i for i in range(len(orig)) if i + 1 not in set(report["suppressed_record_rows"])]
    for i, r in zip(kept, rows, strict=True):
        assert covers(orig[i][4].split("|"), r[4])[0]
    assert main(["kkm-audit", "--spec", str(spec), "--released", str(out)]) == 0
    ev = work / "ev.json"
    assert (
        main(
            [
                "kkm-evaluate",
                "--spec",
                str(spec),
                "--original",
                str(data),
                "--released",
                str(out),
                "--report",
                str(rep),
                "--queries",
                "20",
                "--json",
                str(ev),
            ]
        )
        == 0
    )
    metrics = json.loads(ev.read_text())
    assert metrics["NCP"] == pytest.approx(report["NCP"])
    assert metrics["UL"] == pytest.approx(report["UL"])


def test_audit_flags_a_tampered_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fig3.csv"
    assert (
        main(
            [
                "anonymize",
                "--spec",
                str(FIG1 / "run.toml"),
                "--input",
                str(FIG1 / "figure1a.csv"),
                "--output",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    text = out.read_text().replace("51,Africa,Male,493.2\n", "51,Africa,Male,494.1\n", 1)
    out.write_text(text)
    args = ["--spec", str(FIG1 / "run.toml"), "--released", str(out)]
    capsys.readouterr()
    # one exit-code table: a violated release is 3 for `audit` and its old alias alike
    assert main(["audit", *args]) == 3
    assert "deprecated" not in capsys.readouterr().err
    assert main(["kkm-audit", *args]) == 3
    err = capsys.readouterr().err
    assert "`fedanon kkm-audit` is deprecated" in err and "use: fedanon audit --spec" in err


def test_algorithm_2_relaxes_and_reports(tmp_path: Path) -> None:
    for f in FIG1.iterdir():
        shutil.copy(f, tmp_path / f.name)
    spec = tmp_path / "run.toml"
    spec.write_text(spec.read_text().replace("\ndelta = 0.6", "\ndelta = 0.3"))
    out, rep = tmp_path / "out.csv", tmp_path / "rep.json"
    args = [
        "anonymize",
        "--spec",
        str(spec),
        "--input",
        str(tmp_path / "figure1a.csv"),
        "--output",
        str(out),
        "--report",
        str(rep),
        "--quiet",
    ]
    assert main(args) == 2 and not out.exists()  # Algorithm 1: NCP 0.323 > delta 0.3
    spec.write_text(spec.read_text() + "\n[relax]\nmax_delta = 0.5\n")
    assert main(args) == 0
    report = json.loads(rep.read_text())
    assert report["algorithm"].startswith("ArtUC with progressive relaxation")
    assert report["relaxed"]["delta"]["released"] == pytest.approx(0.3229, abs=1e-3)
    assert report["relaxed"]["epsilon_suppress"]["released"] == pytest.approx(2 / 19)
    assert "Step 16" in report["algorithm_1_stopped"]
    _, rows = _rows(out)
    assert is_kkm_anonymous([r[:3] for r in rows], [r[3] for r in rows], k=2, m=2)
    spec.write_text(spec.read_text().replace("max_delta = 0.5", "max_delta = 0.31"))
    assert main(args) == 2  # the owner does not accept even the first clustering


def test_kkm_experiment_smoke(tmp_path: Path, monkeypatch) -> None:
    """A one-point grid of every experiment: CSV with the metrics and a PNG per experiment."""
    pytest.importorskip("matplotlib")
    from fedanon.kkm import experiments

    tiny = {"k": [3], "m": [1], "delta": [0.3], "constraints": [("chapter", 50)], "size": [300]}
    monkeypatch.setattr(experiments, "QUICK", tiny)
    monkeypatch.setattr(experiments, "QUICK_N", 300)
    written = experiments.run_experiments(
        "all", tmp_path, Spec.from_toml(experiments.SPEC).view, quick=True
    )
    assert len(written) == 10 and all(p.exists() and p.stat().st_size > 0 for p in written)
    with (tmp_path / "kkm_k.csv").open() as fh:
        row = next(csv.DictReader(fh))
    assert row["k"] == "3" and row["status"] == "released"
    assert 0.0 <= float(row["NCP"]) <= 0.3 + 1e-9 and float(row["ARE_W1"]) >= 0.0


def test_table_and_report_both_or_neither(tmp_path: Path) -> None:
    """A report that cannot be written stops the run before any work, and nothing is written;
    when both can be written, both appear (one atomic publish, as for LKC runs)."""
    out = tmp_path / "out.csv"
    base = ["anonymize", "--spec", str(FIG1 / "run.toml"), "--input", str(FIG1 / "figure1a.csv")]
    missing = tmp_path / "no-such-folder" / "rep.json"
    assert main([*base, "--output", str(out), "--report", str(missing), "--quiet"]) == 2
    assert not out.exists()
    assert main([*base, "--output", str(out), "--report", str(out), "--quiet"]) == 2
    assert not out.exists()
    rep = tmp_path / "rep.json"
    assert main([*base, "--output", str(out), "--report", str(rep), "--quiet"]) == 0
    assert out.exists() and json.loads(rep.read_text())["audit"]


@pytest.mark.parametrize("name", ["rel.csv.gz", "rel.parquet"])
def test_release_and_generated_table_in_the_format_their_name_says(
    tmp_path: Path, name: str
) -> None:
    """generate-rt and a (k,k^m) release write gzip CSV or Parquet by the name's suffix (they
    used to write plain CSV under any name); the contents equal the plain CSV's."""
    import gzip

    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    suffix = name.removeprefix("rel")
    src, plain_src = tmp_path / f"rt{suffix}", tmp_path / "rt.csv"
    for out in (src, plain_src):
        assert main(["generate-rt", "--n", "2000", "--seed", "1", "--out", str(out)]) == 0
    rel, plain = tmp_path / name, tmp_path / "plain.csv"
    for inp, out in ((src, rel), (plain_src, plain)):
        args = ["anonymize", "--spec", str(RT_SPEC), "--input", str(inp), "--output", str(out)]
        assert main([*args, "--quiet"]) == 0

    def table(path: Path):  # every column as text
        if path.suffix == ".parquet":
            assert path.read_bytes()[:4] == b"PAR1"
            t = pq.read_table(path)
            return {c: t.column(c).cast("string").to_pylist() for c in t.column_names}
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                fh.read(1)  # a real gzip stream
        header = pacsv.read_csv(path).column_names
        opts = pacsv.ConvertOptions(column_types=dict.fromkeys(header, "string"))
        t = pacsv.read_csv(path, convert_options=opts)
        return {c: t.column(c).cast("string").to_pylist() for c in t.column_names}

    assert table(src) == table(plain_src)
    assert table(rel) == table(plain)
    assert main(["audit", "--spec", str(RT_SPEC), "--released", str(rel)]) == 0
