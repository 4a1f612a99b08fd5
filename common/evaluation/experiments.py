"""The paper's experiments on Adult (Sec. 6): grids of LKC runs, CSV results and PNG plots.

Every run anonymizes in memory with the centralized engine (one `LocalParty`); the federated
protocol releases exactly the table the centralized algorithm releases on the union of the
parties' rows (same statistics, same sums, same decisions), so "distributed" in Fig. 8 is the
centralized run on all rows.  "Naive" splits the rows into 3 equal parties (fixed seed),
anonymizes each alone and concatenates the results.
"""

from __future__ import annotations

import logging
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.arrays import IntArray
from fedanon.bundled import EXAMPLES
from fedanon.errors import InputError, PrivacyError
from fedanon.evaluation.evaluate import Baseline, baseline, evaluate_tables
from fedanon.evaluation.tables import write_csv
from fedanon.io.release import output_columns, write_table
from fedanon.io.table import EncodedTable, Schema, build_schema, encode_table, read_csv_columns
from fedanon.model.spec import RunSpec
from fedanon.tds.decide import Decider
from fedanon.tds.engine import LocalFederation, run
from fedanon.union.localparty import LocalParty

log = logging.getLogger(__name__)
Row = dict[str, Any]
DEFAULT_SPEC = EXAMPLES / "adult" / "run.toml"  # package data in a wheel (fedanon.bundled)
DEFAULT_DATA = EXAMPLES / "adult" / "adult.csv.gz"
SEED = 0
PRUNED_ALPHA = 3e-4  # the C4.5-like pruned variant reported beside the unpruned tree


@dataclass(frozen=True)
class Grid:
    ks: tuple[int, ...]
    ls: tuple[int, ...]
    cs: tuple[float, ...]
    sizes: tuple[int, ...]


FULL = Grid(
    (20, 40, 60, 80, 100),
    (2, 4, 6),
    (0.05, 0.10, 0.15, 0.20, 0.25, 0.30),
    (200_000, 400_000, 600_000, 800_000, 1_000_000),
)
QUICK = Grid((20, 100), (2, 4), (0.10, 0.20, 0.30), (100_000, 200_000))


@dataclass
class Context:
    spec: RunSpec
    schema: Schema
    table: EncodedTable
    original: dict[str, list[str]]
    base: Baseline
    pruned: Baseline
    grid: Grid
    cache: dict[tuple[str, int, int, float], Row] = field(default_factory=dict)


def load_context(one: Any, data_path: Path, grid: Grid, rows: int | None) -> Context:
    """``one``: the base spec, a parsed :class:`fedanon.Spec` (its engine view)."""
    spec, reader = one.run_spec, one.taxonomy_reader()
    schema = build_schema(spec, reader)
    table = encode_table(schema, data_path)
    header, cols = read_csv_columns(data_path)
    original = {h: [v.strip() for v in c] for h, c in zip(header, cols, strict=True)}
    if rows is not None and rows < table.n_rows:
        table = subset(table, np.arange(rows, dtype=np.int64))
        original = {k: v[:rows] for k, v in original.items()}
    base = baseline(spec, original)
    pruned = baseline(spec, original, ccp_alpha=PRUNED_ALPHA)
    log.info(
        "%d rows; BE = %.4f, UE = %.4f (pruned tree: BE = %.4f, UE = %.4f)",
        table.n_rows,
        base.BE,
        base.UE,
        pruned.BE,
        pruned.UE,
    )
    return Context(spec, schema, table, original, base, pruned, grid)


def subset(table: EncodedTable, idx: IntArray) -> EncodedTable:
    return replace(
        table,
        qid_leaves=table.qid_leaves[:, idx],
        cls=table.cls[idx],
        sens=table.sens[idx],
        kept={k: v[idx] for k, v in table.kept.items()},
        kept_codes={k: v[idx] for k, v in table.kept_codes.items()},
    )


def with_privacy(schema: Schema, L: int, K: int, C: float) -> Schema:
    spec = schema.spec
    return replace(schema, spec=replace(spec, privacy=spec.privacy.replace(L=L, K=K, C=C)))


def anonymize(schema: Schema, table: EncodedTable) -> dict[str, list[str]]:
    party = LocalParty(schema, table)
    decider = Decider(schema.spec, schema.new_trees(), len(table.class_labels))
    run(decider, LocalFederation([party]))
    return party.released_columns()


def measure(ctx: Context, L: int, K: int, C: float, method: str = "centralized") -> Row:
    """CE, DR, ... of one LKC run (cached), `method` centralized or naive (3 parties)."""
    key = (method, L, K, C)
    if key in ctx.cache:
        return ctx.cache[key]
    schema = with_privacy(ctx.schema, L, K, C)
    row: Row = {"method": method, "L": L, "K": K, "C": C}
    t0 = time.perf_counter()
    try:
        if method == "centralized":
            released = anonymize(schema, ctx.table)
        else:
            released = naive(schema, ctx.table)
    except PrivacyError as exc:
        log.warning("L=%d K=%d C=%.2f %s: infeasible: %s", L, K, C, method, exc)
        row.update(CE=math.nan, BE=ctx.base.BE, UE=ctx.base.UE, DR=math.nan, groups=0)
        row.update(CE_pruned=math.nan, BE_pruned=ctx.pruned.BE, UE_pruned=ctx.pruned.UE)
        row.update(seconds=time.perf_counter() - t0, status="infeasible")
    else:
        secs = time.perf_counter() - t0
        m = evaluate_tables(ctx.spec, ctx.original, released, ctx.base)
        row.update(CE=m.CE, BE=m.BE, UE=m.UE, DR=m.DR, groups=m.groups, seconds=secs)
        p = evaluate_tables(ctx.spec, ctx.original, released, ctx.pruned)
        row.update(CE_pruned=p.CE, BE_pruned=p.BE, UE_pruned=p.UE)
        row["status"] = "ok"
        log.info("%s L=%d K=%d C=%.2f: CE=%.4f DR=%.4f", method, L, K, C, m.CE, m.DR)
    ctx.cache[key] = row
    return row


def naive(schema: Schema, table: EncodedTable, parties: int = 3) -> dict[str, list[str]]:
    """Generalize-then-integrate: each party alone, results back in input row order."""
    perm = np.random.default_rng(SEED).permutation(table.n_rows)
    out: dict[str, np.ndarray[Any, Any]] = {}
    for part in np.array_split(perm, parties):
        idx = np.sort(part).astype(np.int64)
        rel = anonymize(schema, subset(table, idx))
        for name, col in rel.items():
            if name not in out:
                out[name] = np.empty(table.n_rows, dtype=object)
            out[name][idx] = col
    return {k: v.tolist() for k, v in out.items()}


# experiments -------------------------------------------------------------------------------
def ce_vs_k(ctx: Context) -> list[Row]:
    return [measure(ctx, L, K, 0.2) for L in ctx.grid.ls for K in ctx.grid.ks]


def ce_vs_c(ctx: Context) -> list[Row]:
    return [measure(ctx, L, 100, C) for L in ctx.grid.ls for C in ctx.grid.cs]


def dr(ctx: Context) -> list[Row]:
    nq = len(ctx.spec.qids)
    rows = [{**r, "figure": "7a"} for r in ce_vs_k(ctx)]
    rows += [
        {**measure(ctx, nq, K, 1.0), "figure": "7a", "method": "K-anonymity"} for K in ctx.grid.ks
    ]
    rows += [{**r, "figure": "7b"} for r in ce_vs_c(ctx)]
    rows.append({**measure(ctx, nq, 100, 1.0), "figure": "7b", "method": "K-anonymity"})
    return rows


def distributed_vs_naive(ctx: Context) -> list[Row]:
    rows = [{**measure(ctx, 4, K, 0.2), "method": "distributed"} for K in ctx.grid.ks]
    return rows + [measure(ctx, 4, K, 0.2, "naive") for K in ctx.grid.ks]


def blow_up(original: dict[str, list[str]], spec: RunSpec, target: int) -> dict[str, list[str]]:
    """`target` rows: the originals, then variations with numeric QIDs moved a little."""
    n = len(next(iter(original.values())))
    src = np.arange(target) % n
    variation = np.arange(target) // n
    rng = np.random.default_rng(SEED)
    out = {k: np.asarray(v, dtype=object)[src] for k, v in original.items()}
    for a in spec.qids:
        if a.type != "numeric" or a.domain is None:
            continue
        lo, hi = a.domain
        w = max(1, round(0.01 * (hi - lo)))
        vals = np.asarray(original[a.name], dtype=np.float64)[src]
        delta = rng.integers(-w, w + 1, size=target) * (variation > 0)
        new = np.clip(vals + delta, lo, math.ceil(hi) - 1)
        out[a.name] = np.asarray([str(int(x)) for x in new], dtype=object)
    return {k: v.tolist() for k, v in out.items()}


def scalability(ctx: Context) -> list[Row]:
    spec = replace(ctx.spec, privacy=ctx.spec.privacy.replace(L=4, K=20, C=1.0))
    schema = replace(ctx.schema, spec=spec)
    cols = list(ctx.original)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="fedanon-scal-") as tmp:
        for size in ctx.grid.sizes:
            data = blow_up(ctx.original, spec, size)
            src = Path(tmp) / "in.csv"
            write_table(src, cols, data)
            del data
            t0 = time.perf_counter()
            table = encode_table(schema, src)
            t1 = time.perf_counter()
            released = anonymize(schema, table)
            t2 = time.perf_counter()
            write_table(Path(tmp) / "out.csv", output_columns(spec, table.columns), released)
            t3 = time.perf_counter()
            row = {
                "rows": size,
                "read": t1 - t0,
                "anonymize": t2 - t1,
                "write": t3 - t2,
                "total": t3 - t0,
            }
            log.info("scalability %d rows: %.1fs (anonymize %.1fs)", size, t3 - t0, t2 - t1)
            rows.append(row)
    return rows


# output ------------------------------------------------------------------------------------
def _series(rows: Sequence[Row], x: str, y: str, **match: Any) -> tuple[list[Any], list[float]]:
    sel = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    sel.sort(key=lambda r: r[x])
    return [r[x] for r in sel], [float(r[y]) for r in sel]


def _pct(v: Sequence[float]) -> list[float]:
    return [100 * x for x in v]


def plot(name: str, rows: Sequence[Row], ctx: Context, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ls = ctx.grid.ls
    marks = "osd^v"
    ncols = 2 if name in ("dr", "distributed-vs-naive") else 1
    fig, axes = plt.subplots(1, ncols, figsize=(6.4 * ncols, 4.4), squeeze=False)
    ax = axes[0][0]

    def refs(a: Any) -> None:
        a.axhline(100 * ctx.base.BE, color="k", ls="--", lw=1, label=f"BE {100 * ctx.base.BE:.1f}%")
        a.axhline(
            100 * ctx.base.UE, color="grey", ls=":", lw=1.5, label=f"UE {100 * ctx.base.UE:.1f}%"
        )

    if name in ("ce-vs-k", "ce-vs-c"):
        x, var = ("K", "C = 20%") if name == "ce-vs-k" else ("C", "K = 100")
        for i, L in enumerate(ls):
            xs, ys = _series(rows, x, "CE", L=L)
            ax.plot(xs, _pct(ys), marker=marks[i], label=f"L = {L}")
        refs(ax)
        ax.set(
            xlabel=f"threshold {x}",
            ylabel="classification error CE (%)",
            title=f"Adult: CE vs {x} ({var})",
        )
    elif name == "dr":
        for a, fig_id, x in ((ax, "7a", "K"), (axes[0][1], "7b", "C")):
            for i, L in enumerate(ls):
                xs, ys = _series(rows, x, "DR", L=L, figure=fig_id, method="centralized")
                a.plot(xs, ys, marker=marks[i], label=f"L = {L}")
            xs, ys = _series(rows, x, "DR", figure=fig_id, method="K-anonymity")
            if fig_id == "7b":
                a.axhline(ys[0], color="k", ls="--", lw=1, label="traditional K-anonymity")
            else:
                a.plot(xs, ys, "k--", marker="x", label="traditional K-anonymity")
            var = "C = 20%" if x == "K" else "K = 100"
            a.set(
                xlabel=f"threshold {x}",
                ylabel="discernibility ratio DR",
                title=f"Adult: DR vs {x} ({var})",
                ylim=(0, None),
            )
    elif name == "distributed-vs-naive":
        for a, y in ((ax, "CE"), (axes[0][1], "DR")):
            for i, meth in enumerate(("distributed", "naive")):
                xs, ys = _series(rows, "K", y, method=meth)
                a.plot(xs, _pct(ys) if y == "CE" else ys, marker=marks[i], label=meth)
            if y == "CE":
                refs(a)
            a.set(
                xlabel="threshold K",
                title=f"Adult: {y} (L = 4, C = 20%)",
                ylabel="CE (%)" if y == "CE" else "DR",
            )
    else:
        xs = [r["rows"] / 1000 for r in rows]
        bottom = np.zeros(len(rows))
        for part in ("read", "anonymize", "write"):
            v = np.asarray([r[part] for r in rows])
            ax.bar(
                xs, v, bottom=bottom, width=0.6 * (xs[1] - xs[0]) if len(xs) > 1 else 50, label=part
            )
            bottom += v
        ax.plot(xs, bottom, "k-o", label="total")
        ax.set(
            xlabel="records (thousands)",
            ylabel="seconds",
            title="Scalability (L = 4, K = 20, C = 100%)",
        )
    bad = sorted({r["C"] for r in rows if r.get("status") == "infeasible"})
    if bad and name in ("ce-vs-c", "dr"):
        a = ax if name == "ce-vs-c" else axes[0][1]
        a.set_xlim(min(ctx.grid.cs) - 0.01, max(ctx.grid.cs) + 0.01)
        a.text(
            0.02,
            0.5,
            "infeasible (a sensitive value's\nbase rate exceeds C):\nC = "
            + ", ".join(f"{c:g}" for c in bad),
            transform=a.transAxes,
            fontsize=8,
        )
    for row_axes in axes:
        for a in row_axes:
            a.grid(alpha=0.3)
            a.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


RUNNERS: dict[str, tuple[str, Callable[[Context], list[Row]]]] = {
    "ce-vs-k": ("fig6a_ce_vs_k", ce_vs_k),
    "ce-vs-c": ("fig6b_ce_vs_c", ce_vs_c),
    "dr": ("fig7_dr", dr),
    "distributed-vs-naive": ("fig8_distributed_vs_naive", distributed_vs_naive),
    "scalability": ("fig9_scalability", scalability),
}


def run_experiments(
    name: str,
    out: Path,
    spec: Any,
    *,
    quick: bool = False,
    data_path: Path | None = None,
    rows: int | None = None,
    grid: Grid | None = None,
) -> list[Path]:
    names = list(RUNNERS) if name == "all" else [name]
    if any(n not in RUNNERS for n in names):
        raise InputError("unknown experiment", value=name, expected=" | ".join([*RUNNERS, "all"]))
    grid = grid or (QUICK if quick else FULL)
    ctx = load_context(spec, data_path or DEFAULT_DATA, grid, rows)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for n in names:
        stem, fn = RUNNERS[n]
        t0 = time.perf_counter()
        result = fn(ctx)
        write_csv(out / f"{stem}.csv", result)
        plot(n, result, ctx, out / f"{stem}.png")
        written += [out / f"{stem}.csv", out / f"{stem}.png"]
        log.info("experiment %s: %d rows in %.1fs", n, len(result), time.perf_counter() - t0)
    return written
