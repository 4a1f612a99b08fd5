"""Evaluation of m-privacy (issue 22, item 5): utility and time against plain LKC (m = 0).

    .venv/bin/python bench/eval_mprivacy.py              # writes docs/results/mprivacy_*
    .venv/bin/python bench/eval_mprivacy.py --repeat 1 --out /tmp/x

The full Adult table (examples/adult/adult.csv.gz, 45,223 records; no sample) gets a
provider column ``hospital`` in a copy (the input is never modified) and is split over 3 and
5 hospitals three ways:

* ``even``: round-robin (record i to hospital i mod n);
* ``uneven``: one hospital holds half the records (a seeded random half), the others share
  the rest evenly;
* ``age``: populations differ: n age bands of equal size (records sorted by age, ties by row).

Each split is anonymized centrally (``fedanon anonymize``: the federated release with the
hospitals' MPC is the same, record for record, by tests/integration/test_mprivacy_daemons.py)
for m = 0 (plain LKC: the provider column is read and never released), m = 1 and, with 5
hospitals, m = 2, in two settings:

* ``kanon``: bench/specs/adult-kanon-full.toml (7 categorical QIDs, K = 20, L = 7, C = 1);
* ``lkc``: examples/adult/run.toml (13 QIDs, L = 4, K = 20, C = 0.2).

Per run: DR (the report's discernibility ratio), CE (classification error of salary-class
with fedanon.evaluation's tree, the same 2/3 - 1/3 split for every release) and the engine's
time (the report's ``timings.anonymize``, fastest of ``--repeat`` runs) against the m = 0
run of the same split.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT / "examples" / "adult" / "adult.csv.gz"
SETTINGS = {
    "kanon": ROOT / "bench" / "specs" / "adult-kanon-full.toml",
    "lkc": ROOT / "examples" / "adult" / "run.toml",
}
SPLITS = ("even", "uneven", "age")
HOSPITALS = (3, 5)
FEDANON = ROOT / ".venv" / "bin" / "fedanon"
PROVIDER = "hospital"


def assign(df: pd.DataFrame, how: str, n: int) -> np.ndarray:
    """The hospital (0..n-1) of every record."""
    rows = len(df)
    if how == "even":
        return np.arange(rows) % n
    if how == "uneven":
        order = np.random.default_rng(22).permutation(rows)
        half = rows // 2
        out = np.empty(rows, dtype=np.int64)
        out[order[:half]] = 0
        out[order[half:]] = 1 + np.arange(rows - half) % (n - 1)
        return out
    if how == "age":
        order = np.lexsort((np.arange(rows), df["age"].astype(int).to_numpy()))
        out = np.empty(rows, dtype=np.int64)
        out[order] = np.arange(rows) * n // rows
        return out
    raise ValueError(how)


def spec_file(work: Path, setting: str, m: int) -> Path:
    """The setting's spec with ``m`` and the provider column; taxonomies by absolute path."""
    src = SETTINGS[setting]
    text = re.sub(
        r'taxonomy = "([^"]+)"',
        lambda mo: f'taxonomy = "{(src.parent / mo.group(1)).resolve()}"',
        src.read_text(),
    )
    text = text.replace("[privacy]\n", f"[privacy]\nm = {m}\n", 1)
    text += f'\n[[attribute]]\nname = "{PROVIDER}"\nrole = "provider"\n'
    path = work / f"{setting}-m{m}.toml"
    path.write_text(text)
    return path


def anonymize(spec: Path, data: Path, out: Path, repeat: int) -> tuple[dict[str, Any], float]:
    """The report of one release and the fastest engine time of ``repeat`` runs."""
    best = float("inf")
    rep: dict[str, Any] = {}
    for _ in range(repeat):
        report = out.with_suffix(".json")
        cmd = [str(FEDANON), "anonymize", "--spec", str(spec), "--input", str(data)]
        cmd += ["--output", str(out), "--report", str(report), "--quiet"]
        subprocess.run(cmd, check=True)
        rep = json.loads(report.read_text())
        best = min(best, float(rep["timings"]["anonymize"]))
    return rep, best


def evaluate(setting: str, original: pd.DataFrame, released: Path, base: Any) -> Any:
    from fedanon.evaluation.evaluate import evaluate_tables
    from fedanon.model.spec import load_spec

    spec, _ = load_spec(SETTINGS[setting])
    rel = pd.read_csv(released, dtype=str, keep_default_na=False)
    if PROVIDER in rel.columns:
        raise SystemExit(f"{released}: the provider column was released")
    cols = {c: rel[c].tolist() for c in rel.columns}
    orig = {c: original[c].tolist() for c in original.columns}
    return evaluate_tables(spec, orig, cols, base)


def run_all(work: Path, repeat: int) -> list[dict[str, Any]]:
    from fedanon.evaluation.evaluate import baseline
    from fedanon.model.spec import load_spec

    df = pd.read_csv(ADULT, dtype=str, keep_default_na=False)
    orig = {c: df[c].tolist() for c in df.columns}
    bases = {s: baseline(load_spec(p)[0], orig) for s, p in SETTINGS.items()}
    rows: list[dict[str, Any]] = []
    for setting in SETTINGS:
        specs = {m: spec_file(work, setting, m) for m in (0, 1, 2)}
        for n in HOSPITALS:
            for how in SPLITS:
                data = work / f"adult-{how}-{n}.csv"
                if not data.exists():
                    copy = df.copy()
                    copy[PROVIDER] = [f"h{i}" for i in assign(df, how, n)]
                    copy.to_csv(data, index=False)
                ref: dict[str, float] = {}
                for m in (0, 1, 2) if n == 5 else (0, 1):
                    out = work / f"{setting}-{how}-{n}-m{m}.csv"
                    rep, secs = anonymize(specs[m], data, out, repeat)
                    met = evaluate(setting, df, out, bases[setting])
                    if m == 0:
                        ref = {"DR": float(rep["DR"]), "CE": met.CE, "s": secs}
                    mp = rep.get("m_privacy") or {}
                    row = {
                        "setting": setting,
                        "split": how,
                        "hospitals": n,
                        "m": m,
                        "records": int(rep["records"]),
                        "groups": int(rep["groups"]),
                        "DR": round(float(rep["DR"]), 4),
                        "DR_vs_m0_pct": round(100 * (float(rep["DR"]) / ref["DR"] - 1), 1),
                        "CE": round(met.CE, 4),
                        "CE_vs_m0_pp": round(100 * (met.CE - ref["CE"]), 2),
                        "BE": round(met.BE, 4),
                        "UE": round(met.UE, 4),
                        "anonymize_s": round(secs, 4),
                        "time_vs_m0": round(secs / ref["s"], 2),
                        "checked": mp.get("candidates_checked", ""),
                        "rejected": mp.get("candidates_rejected", ""),
                    }
                    rows.append(row)
                    print(",".join(str(v) for v in row.values()), flush=True)
    return rows


def plot(rows: list[dict[str, Any]], metric: str, path: Path, title: str, ylabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=False)
    configs = [(n, how) for n in HOSPITALS for how in SPLITS]
    width = 0.27
    for ax, setting in zip(axes, SETTINGS, strict=True):
        for j, m in enumerate((0, 1, 2)):
            xs, ys = [], []
            for i, (n, how) in enumerate(configs):
                hit = [
                    r[metric]
                    for r in rows
                    if (r["setting"], r["hospitals"], r["split"], r["m"]) == (setting, n, how, m)
                ]
                if hit:
                    xs.append(i + (j - 1) * width)
                    ys.append(100 * float(hit[0]))
            ax.bar(xs, ys, width, label=f"m = {m}" + (" (plain LKC)" if m == 0 else ""))
        ax.set_xticks(range(len(configs)))
        ax.set_xticklabels([f"{n} hosp.\n{how}" for n, how in configs])
        ax.set_title(f"{setting}: {SETTINGS[setting].relative_to(ROOT)}", fontsize=9)
        ax.set_xlabel("hospitals and split")
        ax.set_ylabel(ylabel)
        ax.set_ylim(top=ax.get_ylim()[1] * 1.2)
        ax.legend(fontsize=8, ncol=3, loc="upper center")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per release (fastest time)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_all(Path(tmp), args.repeat)
    with (args.out / "mprivacy_eval.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot(
        rows,
        "DR",
        args.out / "mprivacy_dr.png",
        "m-privacy on Adult: discernibility ratio (lower is better)",
        "DR (%)",
    )
    plot(
        rows,
        "CE",
        args.out / "mprivacy_ce.png",
        "m-privacy on Adult: classification error of salary-class",
        "CE (%)",
    )
    print(f"{len(rows)} runs in {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
