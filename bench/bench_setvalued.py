"""Speed and memory of the set-valued column reader (fedanon.io.setvalued) on every format.

    python bench/bench_setvalued.py              # 1,000,000 patients (generate-rt --seed 1)
    python bench/bench_setvalued.py --n 200000

Generates the synthetic RT-dataset of ``fedanon generate-rt`` (Adult demographics, 1-15
ICD-9-CM codes per patient, Zipf-skewed code popularity, chapter comorbidity) once, writes it
as CSV, gzip CSV, Parquet with a ``list<string>`` code column and Parquet with a delimited
text column, then reads the code column of each in a fresh child process (``read_set_column``
with the 14,567 leaves of builtin:icd9cm as the vocabulary) and prints wall time, peak RSS
(VmHWM) of the child, its RSS before reading (interpreter + pyarrow + taxonomy) and the size
of the CSR result.  ``--kkm`` also times kkm's whole read (demographics + codes, read_rt).
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, sys, time
from pathlib import Path
from fedanon.io.setread import read_set_column
from fedanon.kkm.hierarchy import builtin
from fedanon.kkm.spec import KkmAttribute
from fedanon.kkm.io import set_column_spec

def rss(key):
    return int([l for l in open('/proc/self/status') if l.startswith(key)][0].split()[1]) / 1024

path, mode = Path(sys.argv[1]), sys.argv[2]
tree = builtin("icd9cm")
spec = set_column_spec(KkmAttribute("diagnoses", "set", taxonomy="builtin:icd9cm"), tree)
import pyarrow, pyarrow.parquet, pyarrow.csv  # noqa: E401 (counted in the baseline)
base = rss("VmRSS")
t0 = time.perf_counter()
if mode == "kkm":
    from fedanon.kkm.schema import build_kkm_schema
    from fedanon.kkm.spec import load_kkm_spec
    kspec, reader = load_kkm_spec(Path(sys.argv[3]))
    table = read_rt = __import__("fedanon.kkm.io", fromlist=["read_rt"]).read_rt(
        build_kkm_schema(kspec, reader), path)
    indptr, items, repeats = table.indptr, table.codes, table.repeated_codes
else:
    v = read_set_column(path, spec, memory_budget=mode)
    indptr, items, repeats = v.indptr, v.items, v.repeats
dt = time.perf_counter() - t0
print(json.dumps({
    "seconds": dt, "peak_rss_mb": rss("VmHWM"), "baseline_rss_mb": base,
    "records": int(indptr.size - 1), "items": int(items.size), "item_dtype": str(items.dtype),
    "csr_mb": (indptr.nbytes + items.nbytes) / 2**20, "repeats": repeats,
}))
"""


def write_inputs(n: int, work: Path) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fedanon.kkm.generator import DEMOGRAPHICS, SET_COLUMN, generate, to_csv_text

    t0 = time.perf_counter()
    data = generate(n, seed=1)
    text = to_csv_text(data)
    csv = work / "rt.csv"
    csv.write_text(text, encoding="utf-8")
    gz = work / "rt.csv.gz"
    gz.write_bytes(gzip.compress(text.encode(), compresslevel=6))
    del text
    demo = {c: pa.array(data.demographics[c]) for c in DEMOGRAPHICS}
    lists = work / "rt-list.parquet"
    codes = pa.array([list(c) for c in data.codes], pa.list_(pa.string()))
    pq.write_table(pa.table({**demo, SET_COLUMN: codes}), lists)
    delimited = work / "rt-text.parquet"
    cells = pa.array(["|".join(c) for c in data.codes], pa.string())
    pq.write_table(pa.table({**demo, SET_COLUMN: cells}), delimited)
    print(f"generated {n:,} records in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return {"csv": csv, "csv.gz": gz, "parquet list": lists, "parquet text": delimited}


def child(path: Path, mode: str, spec: Path | None = None) -> dict[str, float]:
    args = [sys.executable, "-c", CHILD, str(path), mode, *([str(spec)] if spec else [])]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    out: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--kkm", action="store_true", help="also time kkm's read_rt on the CSV")
    args = p.parse_args()
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        inputs = write_inputs(args.n, work)
        rows = []
        for name, path in inputs.items():
            rows.append((name, path.stat().st_size, child(path, "off")))
        rows.append(("csv, out of core", inputs["csv"].stat().st_size, child(inputs["csv"], "1B")))
        if args.kkm:
            spec = work / "run.toml"
            text = (root / "examples" / "rt" / "run.toml").read_text()
            spec.write_text(text.replace('constraints = "uc-chapter-12.toml"', ""))
            (work / "adult").symlink_to(root / "examples" / "adult")
            (work / "rt").mkdir()
            spec = spec.rename(work / "rt" / "run.toml")
            rows.append(("kkm read_rt (csv)", 0, child(inputs["csv"], "kkm", spec)))
        r0 = rows[0][2]
        print(
            f"{int(r0['records']):,} records, {int(r0['items']):,} codes "
            f"({r0['item_dtype']}), {int(r0['repeats'])} repeats"
        )
        print(f"{'input':<20}{'MB':>8}{'seconds':>9}{'peak RSS':>10}{'baseline':>10}{'CSR MB':>8}")
        for name, size, r in rows:
            print(
                f"{name:<20}{size / 2**20:>8.1f}{r['seconds']:>9.2f}{r['peak_rss_mb']:>10.0f}"
                f"{r['baseline_rss_mb']:>10.0f}{r['csr_mb']:>8.1f}"
            )


if __name__ == "__main__":
    main()
