"""Benchmark the IBLT secure union (common/union) as the ring would run it, without gRPC.

Run on demand:  .venv/bin/python bench/bench_iblt.py [--rows 1000000] [--parties 3]
                .venv/bin/python bench/bench_iblt.py --failures   (failure rate vs cell factor)
                .venv/bin/python bench/bench_iblt.py --simulate --trials 2000  (planned sizing)

Workloads: Adult (all 15 columns released as strings, group id = education-num, 16 groups)
and a blown-up Adult (bench_anonymize.blow_up).  Records are dealt round-robin to the
parties.  The union runs like the protocol: each party's histogram of record lengths is
summed, the leader plans the layout and draws a key; then every party, in its own process,
reads its share (fedanon.io.table.read_columns: dictionary-coded columns), encodes and
sketches it and adds the sketch to the masked vector it receives from its predecessor; the
leader, in its own process, unmasks, peels, decodes and expands the records and checks
them against the input multiset.  Peak RSS (getrusage) is per process.

Targets (2 cores): the whole union of 1M records well under 3 s of CPU; the union vector
<= 5x the released CSV's bytes (the leader sends a mask seed and receives one vector).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fedanon import union  # noqa: E402
from fedanon.io.table import Column, read_columns  # noqa: E402
from fedanon.security.securesum import add_share, draw_mask, unmask  # noqa: E402

GROUP_COLUMN = "education-num"


def rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def share(path: Path, party: int, parties: int) -> tuple[list[str], np.ndarray, list[Column]]:
    """Party ``party``'s rows (every parties-th row) as dictionary-coded columns."""
    header, cols = read_columns(path)
    g = cols[GROUP_COLUMN]
    gid = np.asarray([int(v) for v in g.values], dtype=np.int64)[g.codes[party::parties]]
    return header, gid, [Column(cols[h].values, cols[h].codes[party::parties]) for h in header]


def load_layout(path: Path) -> tuple[union.Layout, bytes]:
    d = json.loads(path.read_text())
    tables = tuple(union.Table(**t) for t in d["tables"])
    return union.Layout(d["n_fields"], tables), bytes.fromhex(d["key"])


def role_party(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    _, gid, cols = share(args.data, args.party, args.parties)
    load = time.perf_counter() - t0
    rss_loaded = rss_mb()
    layout, key = load_layout(args.plan)
    cpu0, t0 = time.process_time(), time.perf_counter()
    records = union.encode_records(gid, cols)
    t_enc = time.perf_counter() - t0
    t0 = time.perf_counter()
    vector = union.sketch(records, layout, key)
    t_sketch = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    received = np.load(args.inp)  # what the predecessor sent (file I/O: not timed)
    cpu_add, t0 = time.process_time(), time.perf_counter()
    masked = add_share(received, vector.view(np.int64))
    t_add = time.perf_counter() - t0
    cpu += time.process_time() - cpu_add
    np.save(args.out, masked)
    return {"load_s": round(load, 3), "encode_s": round(t_enc, 3),
            "sketch_s": round(t_sketch, 3), "add_s": round(t_add, 3), "cpu_s": round(cpu, 3),
            "rss_after_load_MB": rss_loaded, "peak_rss_MB": rss_mb()}  # fmt: skip


def role_leader(args: argparse.Namespace) -> dict[str, Any]:
    layout, key = load_layout(args.plan)
    total, mask = np.load(args.inp), np.load(args.mask)
    rss_loaded = rss_mb()
    cpu0, t0 = time.process_time(), time.perf_counter()
    summed = unmask(total, mask)
    del total, mask
    result = union.peel(layout, key, summed, in_place=True)
    t_peel = time.perf_counter() - t0
    del summed
    t0 = time.perf_counter()
    gids, cols = result.expand()
    t_expand = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    peak = rss_mb()
    header, data = read_columns(args.data)
    g = data[GROUP_COLUMN]
    want = Counter(zip(np.asarray(g.values)[g.codes].astype(int).tolist(),
                       *(data[h].strings() for h in header), strict=True))  # fmt: skip
    if Counter(zip(gids.tolist(), *cols, strict=True)) != want:
        raise SystemExit("the union is not the input multiset")
    return {"distinct": result.n_distinct, "peel_decode_s": round(t_peel, 3),
            "expand_s": round(t_expand, 3), "cpu_s": round(cpu, 3),
            "rss_after_load_MB": rss_loaded, "peak_rss_MB": peak}  # fmt: skip


def csv_bytes(path: Path) -> int:
    header, cols = read_columns(path)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(zip(*(cols[h].strings() for h in header), strict=True))
    return len(buf.getvalue().encode("utf-8"))


def sub(role: str, tmp: Path, args: argparse.Namespace, **kw: Any) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--role", role, "--parties", str(args.parties)]
    for k, v in kw.items():
        cmd += [f"--{k}", str(v)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tmp).stdout
    return dict(json.loads(out))


def workload(name: str, data: Path, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        t0 = time.process_time()
        hist = np.zeros(union.CLASS_BOUNDS.size, dtype=np.int64)
        n_fields = 0
        for p in range(args.parties):  # the histogram round (same encoding as the parties)
            _, gid, cols = share(data, p, args.parties)
            hist += union.encode_records(gid, cols).histogram()
            n_fields = len(cols)
        layout = union.plan(hist, n_fields)
        key = union.new_key()
        t_plan = time.process_time() - t0
        plan = tmp / "plan.json"
        plan.write_text(json.dumps({"n_fields": layout.n_fields, "key": key.hex(),
                                    "tables": [asdict(t) for t in layout.tables]}))  # fmt: skip
        np.save(tmp / "mask.npy", draw_mask(layout.size))
        parties = []
        prev = tmp / "mask.npy"
        for p in range(args.parties):
            out = tmp / f"v{p}.npy"
            parties.append(
                sub("party", tmp, args, data=data, party=p, plan=plan, inp=prev, out=out)
            )
            prev = out
        leader = sub("leader", tmp, args, data=data, plan=plan, inp=prev, mask=tmp / "mask.npy")
    size = csv_bytes(data)
    n = layout.n_records
    return {
        "workload": name,
        "records": n,
        "distinct": leader["distinct"],
        "parties": args.parties,
        "tables": len(layout.tables),
        "cells_per_record": round(sum(3 * t.cells for t in layout.tables) / n, 3),
        "vector_MB": round(layout.nbytes / 1e6, 2),
        "csv_MB": round(size / 1e6, 2),
        "vector_over_csv": round(layout.nbytes / size, 2),
        "histogram_round_cpu_s(all parties, incl. reading)": round(t_plan, 3),
        "party_encode_s": [p["encode_s"] for p in parties],
        "party_sketch_s": [p["sketch_s"] for p in parties],
        "party_add_s": [p["add_s"] for p in parties],
        "party_peak_rss_MB": [p["peak_rss_MB"] for p in parties],
        "party_rss_after_load_MB": [p["rss_after_load_MB"] for p in parties],
        "party_cpu_s": [p["cpu_s"] for p in parties],
        "leader_peel_decode_s": leader["peel_decode_s"],
        "leader_cpu_s": leader["cpu_s"],
        "leader_expand_s": leader["expand_s"],
        "leader_peak_rss_MB": leader["peak_rss_MB"],
        "leader_rss_after_load_MB": leader["rss_after_load_MB"],
        "union_cpu_s(parties + leader)": round(
            sum(p["cpu_s"] for p in parties) + leader["cpu_s"], 3
        ),
    }


def failure_rates(trials: int) -> list[dict[str, Any]]:
    """Peeling failures of distinct random records (one 8-character field, one table) per
    table size: with a bare cell factor (3 m = factor * N) and with the planned layout
    (:func:`fedanon.union.layout.cells_for`, which adds slack for small N)."""
    out = []
    rng = np.random.default_rng(5)
    for n, factors in ((30, (1.23, 2.0)), (1000, (1.23, 1.5)),
                       (45000, (1.15, 1.2, 1.23, 1.25, 1.3))):  # fmt: skip
        values = [f"{v:08x}" for v in rng.choice(1 << 31, size=n, replace=False)]
        records = union.encode_records(np.zeros(n, np.int64), [values])
        planned = union.plan(records.histogram(), 1)
        layouts = [(f"bare {f}", _bare(planned, f)) for f in factors] + [("planned", planned)]
        for name, layout in layouts:
            fails = 0
            for _ in range(trials):
                key = union.new_key()
                try:
                    union.peel(layout, key, union.sketch(records, layout, key), in_place=True)
                except union.PeelingFailed:
                    fails += 1
            cells = sum(3 * t.cells for t in layout.tables)
            out.append({"records": n, "sizing": name, "cells_per_record": round(cells / n, 3),
                        "trials": trials, "failures": fails})  # fmt: skip
    return out


def simulate(trials: int) -> list[dict[str, Any]]:
    """Failure rate of the planned sizing for many table sizes, by simulating only the
    peeling of the random 3-partite hypergraph (what decides success for distinct
    records; much faster than sketching, so many more trials)."""
    from fedanon.union.layout import cells_for

    rng = np.random.default_rng(7)
    out = []
    for n in (2, 10, 100, 1000, 3000, 10_000, 30_000, 100_000):
        m = cells_for(n, union.DEFAULT_FACTOR)
        runs = max(20, trials * 1000 // max(n, 1000))
        fails = 0
        for _ in range(runs):
            edges = rng.integers(0, m, size=(3, n)) + np.arange(3)[:, None] * m
            alive = np.ones(n, dtype=bool)
            while alive.any():
                count = np.bincount(edges[:, alive].ravel(), minlength=3 * m)
                pure = (count[edges] == 1).any(axis=0) & alive
                if not pure.any():
                    break
                alive &= ~pure
            fails += bool(alive.any())
        out.append({"records": n, "cells_per_record": round(3 * m / n, 3), "trials": runs,
                    "failure_rate": fails / runs})  # fmt: skip
    return out


def _bare(layout: union.Layout, factor: float) -> union.Layout:
    tables = tuple(
        union.Table(
            t.size_class, t.records, t.lane_bytes, t.width, -(-int(factor * t.records) // 3)
        )
        for t in layout.tables
    )
    return union.Layout(layout.n_fields, tables)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--parties", type=int, default=3)
    ap.add_argument("--failures", action="store_true", help="failure rate vs cell factor")
    ap.add_argument("--simulate", action="store_true", help="simulated failure rate by size")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--skip-adult", action="store_true")
    for hidden in ("role", "data", "party", "plan", "inp", "out", "mask"):
        ap.add_argument(f"--{hidden}", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role is not None:
        args.data, args.plan, args.inp = Path(args.data), Path(args.plan), Path(args.inp)
        if args.role == "party":
            args.party, args.out = int(args.party), Path(args.out)
            print(json.dumps(role_party(args)))
        else:
            args.mask = Path(args.mask)
            print(json.dumps(role_leader(args)))
        return
    if args.failures or args.simulate:
        for row in failure_rates(args.trials) if args.failures else simulate(args.trials):
            print(json.dumps(row))
        return
    from bench_anonymize import ADULT, blow_up

    if not args.skip_adult:
        print(json.dumps(workload("adult", ADULT / "adult.csv.gz", args)))
    if args.rows:
        with tempfile.TemporaryDirectory() as tmp:
            big = Path(tmp) / "big.csv"
            blow_up(args.rows, big)
            print(json.dumps(workload(f"{args.rows} rows", big, args)))


if __name__ == "__main__":
    main()
