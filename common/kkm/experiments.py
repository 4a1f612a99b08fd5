"""ArtUC experiments in the spirit of the seed's Section 5 on the synthetic RT-dataset.

NCP, UL, share of suppressed code entries, ARE (workloads W1, W2, W3; 100 queries each) and
run time (ArtUC only, one process) against k, m, delta, the utility constraint set and the
data size.  Defaults: 10,000 patients (``generate-rt --seed 1``), k = 5, m = 2, delta = 0.2,
constraints = age bands of 12 years x ICD-9-CM chapters; epsilon_suppress = 1 so that every
run releases and the suppression is reported instead of failing the run.  One CSV and one PNG
per experiment (``kkm_<name>.csv`` / ``.png``).  A setting whose k-anonymous clusters already
exceed delta (Step 16) is recorded with its reason and no metrics.
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedanon.bundled import EXAMPLES
from fedanon.evaluation.tables import write_csv
from fedanon.kkm.artuc import RequirementNotMet, build_problem, run_artuc
from fedanon.kkm.generator import constraint_rows, constraints_toml, generate, to_csv_text
from fedanon.kkm.io import read_rt
from fedanon.kkm.metrics import are, parse_release, workload
from fedanon.kkm.release import render
from fedanon.kkm.release import report as make_report
from fedanon.kkm.run import WORKLOADS, original_cells
from fedanon.kkm.schema import build_kkm_schema
from fedanon.kkm.spec import KkmSpec

log = logging.getLogger(__name__)
SPEC = EXAMPLES / "rt" / "run.toml"
Row = dict[str, Any]
DEFAULT = {"k": 5, "m": 2, "delta": 0.2, "n": 10_000, "level": "chapter", "width": 12}
FULL: dict[str, list[Any]] = {
    "k": [2, 5, 10, 20],
    "m": [1, 2, 3],
    "delta": [0.1, 0.15, 0.2, 0.3, 0.4],
    "constraints": [
        ("chapter", 12),
        ("section", 12),
        ("3digit", 12),
        ("chapter", 24),
        ("chapter", 50),
    ],
    "size": [10_000, 50_000, 200_000],
}
QUICK: dict[str, list[Any]] = {
    "k": [2, 5, 10],
    "m": [1, 2],
    "delta": [0.1, 0.2, 0.3],
    "constraints": [("chapter", 12), ("3digit", 12), ("chapter", 50)],
    "size": [2_000, 10_000],
}
QUICK_N = 2_000


def run_experiments(name: str, out: Path, spec: KkmSpec, quick: bool = False) -> list[Path]:
    """``spec``: the view of :data:`SPEC` parsed (its constraints are each run's own)."""
    grid = QUICK if quick else FULL
    base = dict(DEFAULT, n=QUICK_N if quick else DEFAULT["n"])
    names = ["k", "m", "delta", "constraints", "size"] if name == "all" else [name]
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(Path(tmp), spec)
        for exp in names:
            rows = []
            for value in grid[exp]:
                params = dict(base)
                if exp == "constraints":
                    params["level"], params["width"] = value
                elif exp == "size":
                    params["n"] = value
                else:
                    params[exp] = value
                rows.append(lab.run(params))
                log.info("%s %s: %s", exp, value, rows[-1])
            csv_path = out / f"kkm_{exp}.csv"
            write_csv(csv_path, rows)
            png = out / f"kkm_{exp}.png"
            _plot(png, exp, rows)
            written += [csv_path, png]
    return written


class Lab:
    """Generated data and constraint files, cached per size / constraint set."""

    def __init__(self, tmp: Path, spec: KkmSpec) -> None:
        self.tmp = tmp
        self.spec = spec

    def _data(self, n: int) -> Path:
        path = self.tmp / f"rt{n}.csv"
        if not path.exists():
            path.write_text(to_csv_text(generate(n, 1)))
        return path

    def _reader(self, level: str, width: int) -> Callable[[str], bytes]:
        cons = constraints_toml(constraint_rows(level, width)).encode()
        base = SPEC.parent

        def reader(rel: str) -> bytes:
            return cons if rel == "<constraints>" else (base / rel).read_bytes()

        return reader

    def run(self, p: dict[str, Any]) -> Row:
        priv = dataclasses.replace(
            self.spec.privacy,
            k=int(p["k"]),
            m=int(p["m"]),
            delta=float(p["delta"]),
            epsilon_suppress=1.0,
            constraints="<constraints>",
        )
        spec: KkmSpec = dataclasses.replace(self.spec, privacy=priv)
        schema = build_kkm_schema(spec, self._reader(p["level"], int(p["width"])))
        table = read_rt(schema, self._data(int(p["n"])))
        t0 = time.perf_counter()
        try:
            out = run_artuc(build_problem(schema, table))
        except RequirementNotMet as exc:  # recorded, the sweep goes on
            return {**_params(p, schema.constraints.n_listed), "status": exc.message}
        seconds = time.perf_counter() - t0
        rel = render(out)
        rep = make_report(out, rel)
        demo = [
            original_cells(schema, a.name, table.qid[i].tolist()) for i, a in enumerate(spec.qids)
        ]
        flat, ip = table.codes.tolist(), table.indptr.tolist()
        label = schema.items.leaf_label
        codes = [[label(c) for c in flat[ip[r] : ip[r + 1]]] for r in range(table.n)]
        parsed = parse_release(spec, rel.data)
        row: Row = {
            **_params(p, schema.constraints.n_listed),
            "status": "released",
            "clusters": rep["clusters"],
            "NCP": rep["NCP"],
            "UL": rep["UL"],
            "suppressed_share": rep["suppressed_code_entries"] / max(1, rep["code_entries"]),
            "seconds": seconds,
        }
        for j, w in enumerate(WORKLOADS):
            row[f"ARE_{w}"] = are(workload(w, 100, j, demo, codes), schema, parsed, demo, codes)
        return row


def _params(p: dict[str, Any], n_constraints: int) -> Row:
    return {
        "n": p["n"],
        "k": p["k"],
        "m": p["m"],
        "delta": p["delta"],
        "constraints": f"{p['level']}-{p['width']}",
        "n_constraints": n_constraints,
    }


def _plot(path: Path, exp: str, rows: list[Row]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [
        r["constraints"] if exp == "constraints" else r[{"size": "n"}.get(exp, exp)] for r in rows
    ]
    labels = [str(x) for x in xs]
    pos = list(range(len(rows)))
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    panels: list[tuple[str, list[str]]] = [
        ("NCP / UL / suppressed share", ["NCP", "UL", "suppressed_share"]),
        ("ARE", ["ARE_W1", "ARE_W2", "ARE_W3"]),
        ("clusters", ["clusters"]),
        ("ArtUC seconds", ["seconds"]),
    ]
    for ax, (title, keys) in zip(axes, panels, strict=True):
        for key in keys:
            ys = [r.get(key, float("nan")) for r in rows]
            ax.plot(pos, ys, marker="o", label=key)
        ax.set_xticks(pos, labels, rotation=20 if exp == "constraints" else 0)
        ax.set_title(title)
        ax.set_xlabel({"size": "records", "constraints": "constraint set"}.get(exp, exp))
        if title == "ARE":
            ax.set_yscale("log")
        if len(keys) > 1:
            ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(f"ArtUC on the synthetic RT-dataset: varying {exp}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
