"""Benchmark `fedanon anonymize` on Adult and on blown-up Adult (seed 003, Sec. 6.2).

    .venv/bin/python bench/bench_anonymize.py                # Adult + 1M rows
    .venv/bin/python bench/bench_anonymize.py --scale        # + the issue-10 workloads below
    .venv/bin/python bench/bench_anonymize.py --only hard,parquet --repeat 3   # some, best of 3

--scale adds: 10M rows CSV -> CSV and Parquet -> Parquet (bench/specs/adult-9qid.toml: nine
QIDs, L = 4, K = 20, C = 1); 3M rows with and without a unique identifier column; Adult x4
(181k rows, L = 2, K = 2, C = 1, 13 QIDs, discernibility); 1M rows from a local PostgreSQL
server vs the same rows from CSV (skipped when the server binaries are absent).  Each run is a
fresh subprocess, so peak RSS is per run.  Targets (2 cores): 10M CSV <= 40 s and <= 2.5 GB;
10M Parquet <= 20 s; identifier within 10%; Adult x4 <= 6 s and <= 500 MB; PostgreSQL <= 2x CSV.

Measured (2 cores shared with other work; best of --repeat runs, 1-minute load when the best run
started; cpu = user + system seconds of the run's process, interpreter start included):
  10M CSV -> CSV          total 23.9 s (read 7.3, anonymize 11.7, write 5.0), cpu 20.8 s,
                          1.00 GB, load 3.3
  10M Parquet -> Parquet  total 11.3 s (read 0.8, anonymize 9.4, write 1.2), cpu 12.6 s,
                          0.95 GB, load 1.9 (12.2 s at load 2.4)
  Adult x4 hard setting   total 5.60 s (read 0.2, anonymize 5.2, write 0.2), cpu 5.4 s,
                          387 MB, load 1.5 (5.77 s / cpu 6.0 s at load 3.0 before the
                          count_layout / alive_ids caches)
  30M Parquet -> Parquet  total 54 s, 2.41 GB (load ~2.5; not part of --scale)
  --only outofcore (100M rows Parquet -> Parquet, written in chunks, 49 s; load 2.5-3.5):
    out of core, budget 2GB  total 257 s (read 7.7, anonymize 235, write 14.5), cpu 268 s,
                             VmHWM 4.49 GB of which anonymous 1.43 GB, spill files 3.53 GB
    in memory                total 270 s (read 6.8, anonymize 249, write 13.3), cpu 267 s,
                             VmHWM 7.13 GB; the same md5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ADULT = ROOT / "examples" / "adult"
SPEC_9QID = ROOT / "bench" / "specs" / "adult-9qid.toml"
NUMERIC = {
    "age": (17, 91),
    "fnlwgt": (10000, 1500000),
    "education-num": (1, 17),
    "capital-gain": (0, 100000),
    "capital-loss": (0, 4400),
    "hours-per-week": (1, 100),
}


def blow_up(rows: int, out: Path, identifier: bool = False, noise: bool = True) -> None:
    """Adult's records cycled to ``rows``; after the first copy numeric QIDs move by -2..2
    (seed 7).  With ``identifier`` a unique ``patient-id`` column comes first.  CSV or
    Parquet by the file name."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    base = pacsv.read_csv(ADULT / "adult.csv.gz")
    n_base = base.num_rows
    rng = np.random.default_rng(7)
    src = np.arange(rows) % n_base
    cols = {}
    if identifier:
        ids = np.arange(rows, dtype=np.int64) * 7919 + 100_000_007
        cols["patient-id"] = pa.array(np.char.add("P", ids.astype("U12")))
    for name in base.column_names:
        col = base.column(name).combine_chunks()
        if name in NUMERIC:
            lo, hi = NUMERIC[name]
            v = col.to_numpy()[src].astype(np.int64)
            if noise:
                shift = rng.integers(-2, 3, size=rows)
                shift[:n_base] = 0
                v = np.clip(v + shift, lo, hi - 1)
            cols[name] = pa.array(v)
        else:
            enc = col.dictionary_encode()
            idx = pa.array(enc.indices.to_numpy()[src])
            cols[name] = pa.DictionaryArray.from_arrays(idx, enc.dictionary).cast(pa.string())
    table = pa.table(cols)
    if out.suffix == ".parquet":
        pq.write_table(table, out)
        return
    with out.open("wb") as fh:
        fh.write((",".join(table.column_names) + "\n").encode())
        opts = pacsv.WriteOptions(include_header=False, quoting_style="none")
        pacsv.write_csv(table, fh, write_options=opts)


def blow_up_parquet(rows: int, out: Path, chunk: int = 1 << 22) -> None:
    """Adult's records cycled to ``rows`` as Parquet, written ``chunk`` rows at a time (the
    table never sits in memory): numeric QIDs move by -2..2 after the first copy (seed 7 and
    the chunk's index; not the same draws as :func:`blow_up`)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    base = pacsv.read_csv(ADULT / "adult.csv.gz")
    n_base = base.num_rows
    numeric = {
        n: base.column(n).to_numpy().astype(np.int64) for n in base.column_names if n in NUMERIC
    }
    coded = {}
    for name in base.column_names:
        if name not in NUMERIC:
            enc = base.column(name).combine_chunks().dictionary_encode()
            coded[name] = (enc.indices.to_numpy(), enc.dictionary)
    writer = None
    try:
        for i, lo in enumerate(range(0, rows, chunk)):
            src = np.arange(lo, min(rows, lo + chunk)) % n_base
            rng = np.random.default_rng([7, i])
            cols = {}
            for name in base.column_names:
                if name in NUMERIC:
                    v = numeric[name][src]
                    shift = rng.integers(-2, 3, size=src.size)
                    shift[np.arange(lo, lo + src.size) < n_base] = 0
                    cols[name] = pa.array(
                        np.clip(v + shift, NUMERIC[name][0], NUMERIC[name][1] - 1)
                    )
                else:
                    idx, values = coded[name]
                    arr = pa.DictionaryArray.from_arrays(pa.array(idx[src]), values)
                    cols[name] = arr.cast(pa.string())
            table = pa.table(cols)
            if writer is None:
                writer = pq.ParquetWriter(out, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


REPEAT = 1  # runs per measurement (--repeat); the best total is kept


def measure(
    spec: Path,
    data: str,
    out_name: str = "out.csv",
    extra: str = "",
    env: dict[str, str] | None = None,
) -> dict[str, float]:
    """The best of REPEAT runs (least total time), with the 1-minute load average when it
    started: other work on the machine slows a run, it never speeds one up.  ``env``: extra
    environment of the run (FEDANON_MEMORY_BUDGET for the out-of-core path)."""
    runs = [_measure_once(spec, data, out_name, extra, env) for _ in range(REPEAT)]
    return min(runs, key=lambda r: r["total"])


def _measure_once(
    spec: Path, data: str, out_name: str, extra: str, env: dict[str, str] | None = None
) -> dict[str, float]:
    """One `anonymize_file` run in a fresh process: timings, CPU seconds of the process (user +
    system, interpreter start included: on a loaded machine a better guide than wall time to
    the idle figure of a mostly single-threaded run), peak RSS (VmHWM: ru_maxrss would include
    the benchmark's own high-water mark, inherited through fork), the peak of its anonymous
    part (RssAnon, sampled every 0.2 s: VmHWM also counts pages of memory-mapped spill files,
    which the kernel can drop), the peak bytes of spill files, the output's md5, rounds,
    groups."""
    code = (
        "import hashlib,json,resource,sys,threading,time\n"
        "from pathlib import Path\n"
        "from fedanon.io import spill\n"
        "anon=[0]\n"
        "def sample():\n"
        "    while True:\n"
        "        for l in open('/proc/self/status'):\n"
        "            if l.startswith('RssAnon'): anon[0]=max(anon[0],int(l.split()[1]))\n"
        "        time.sleep(0.2)\n"
        "threading.Thread(target=sample,daemon=True).start()\n"
        "from fedanon.apispec import Spec\n"
        "from fedanon.centralized import anonymize_file\n"
        "from fedanon.io.sources import parse_source\n"
        "q=sys.argv[4] or None\n"
        "t=time.perf_counter()\n"
        "rep,tm=anonymize_file(Spec.from_toml(sys.argv[1]),parse_source(sys.argv[2],q),Path(sys.argv[3]),"
        "None,False)\n"
        "total=time.perf_counter()-t\n"
        "ru=resource.getrusage(resource.RUSAGE_SELF)\n"
        "hwm=[l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
        "rss=int(hwm[0].split()[1])/1024 if hwm else "
        "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024\n"
        "md5=hashlib.md5()\n"
        "with open(sys.argv[3],'rb') as fh:\n"
        "    for b in iter(lambda: fh.read(1<<24), b''): md5.update(b)\n"
        "print(json.dumps({'read':tm.read,'anonymize':tm.anonymize,'write':tm.write,"
        "'total':total,'cpu':ru.ru_utime+ru.ru_stime,'peak_rss_mb':rss,"
        "'peak_anon_mb':anon[0]/1024,'spill_disk_mb':spill.disk_bytes()[1]/2**20,"
        "'md5':md5.hexdigest(),"
        "'rounds':len(rep['specializations']),"
        "'groups':rep['groups']}))\n"
    )
    load1 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", code, str(spec), data, str(Path(d) / out_name), extra],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )
        wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"benchmark run failed:\n{proc.stderr}")
    res: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    res["wall"] = wall
    res["load1"] = load1
    return res


def _spec_with(text: str, path: Path, **subs: str) -> Path:
    for key, value in subs.items():
        text = re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
    text = text.replace('taxonomy = "taxonomies/', f'taxonomy = "{ADULT}/taxonomies/')
    path.write_text(text)
    return path


WORKLOADS = ("csv", "parquet", "identifier", "hard", "postgres")
ON_DEMAND = ("outofcore",)  # only with --only


def out_of_core(work: Path, results: dict[str, dict[str, float]], rows: int, budget: str) -> None:
    """``rows`` rows of the Adult blow-up as Parquet (written in chunks), 9 QIDs, Parquet ->
    Parquet: out of core under ``budget``, then in memory ("off") unless the budget is "only"
    -- same release (md5) expected.  Spill files go to TMPDIR (or FEDANON_SPILL_DIR)."""
    data = work / "ooc.parquet"
    t0 = time.perf_counter()
    blow_up_parquet(rows, data)
    print(f"generated {rows:,} rows in {time.perf_counter() - t0:.0f} s, "
          f"{data.stat().st_size / 2**20:.0f} MB", file=sys.stderr)  # fmt: skip
    name = f"{rows:,} rows Parquet -> Parquet, 9 QIDs"
    ooc_budget = "2GB" if budget == "only" else budget
    results[f"{name}, out of core (budget {ooc_budget})"] = measure(
        SPEC_9QID, str(data), "out.parquet", env={"FEDANON_MEMORY_BUDGET": ooc_budget}
    )
    if budget != "only":
        results[f"{name}, in memory"] = measure(
            SPEC_9QID, str(data), "out.parquet", env={"FEDANON_MEMORY_BUDGET": "off"}
        )
    data.unlink()


def scale(work: Path, results: dict[str, dict[str, float]], rows: int, only: set[str]) -> None:
    if "csv" in only:
        big_csv = work / "big.csv"
        blow_up(rows, big_csv)
        name = f"{rows:,} rows CSV -> CSV, 9 QIDs, L=4 K=20 C=1"
        results[name] = measure(SPEC_9QID, str(big_csv))
        big_csv.unlink()
    if "parquet" in only:
        big_pq = work / "big.parquet"
        blow_up(rows, big_pq)
        name = f"{rows:,} rows Parquet -> Parquet"
        results[name] = measure(SPEC_9QID, str(big_pq), "out.parquet")
        big_pq.unlink()
    if "identifier" in only:
        n3 = 3_000_000
        plain, with_id = work / "3m.csv", work / "3m-id.csv"
        blow_up(n3, plain)
        blow_up(n3, with_id, identifier=True)
        spec_id = work / "9qid-id.toml"
        spec_id.write_text(
            SPEC_9QID.read_text().replace('"../../examples', f'"{ROOT}/examples')
            + '\n[[attribute]]\nname = "patient-id"\nrole = "identifier"\n'
        )
        results["3M rows, no identifier"] = measure(SPEC_9QID, str(plain))
        results["3M rows + unique identifier column"] = measure(spec_id, str(with_id))
        plain.unlink()
        with_id.unlink()
    if "hard" in only:
        x4 = work / "adult-x4.csv"
        blow_up(4 * 45_223, x4, noise=False)  # Adult's 45,223 records, four times each
        hard = _spec_with(
            (ADULT / "run-discernibility.toml").read_text(), work / "hard.toml", L="2", K="2", C="1"
        )
        results["Adult x4, L=2 K=2 C=1, 13 QIDs, discernibility"] = measure(hard, str(x4))
    if "postgres" in only:
        postgres(work, results)


def postgres(work: Path, results: dict[str, dict[str, float]]) -> None:
    """1M rows from a throw-away local PostgreSQL server vs the same rows from CSV."""
    sys.path.insert(0, str(ROOT / "tests"))
    from pg_server import PASSWORD, missing_reason, pg_server

    reason = missing_reason()
    if reason is not None:
        print(f"PostgreSQL benchmark skipped: {reason}", file=sys.stderr)
        return
    one = work / "1m.csv"
    blow_up(1_000_000, one)
    header = one.open().readline().strip().split(",")
    ddl = ", ".join(
        f'"{h}" {"integer" if h in NUMERIC else "text"}' for h in header
    )  # typed like a hospital's table
    with pg_server() as srv:
        import psycopg

        with psycopg.connect(
            host=str(srv.socket_dir), port=srv.port, user="postgres", dbname="ehr"
        ) as conn:
            conn.execute(f"CREATE TABLE encounters ({ddl})")
            conn.execute("ALTER TABLE encounters OWNER TO fedanon")
            with (
                conn.cursor() as cur,
                cur.copy("COPY encounters FROM STDIN WITH (FORMAT csv, HEADER)") as copy,
                one.open("rb") as fh,
            ):
                while block := fh.read(1 << 20):
                    copy.write(block)
            conn.execute("ANALYZE encounters")
        os.environ["PGPASSWORD"] = PASSWORD
        results["1M rows from CSV"] = measure(SPEC_9QID, str(one))
        results["1M rows from PostgreSQL (local server, query)"] = measure(
            SPEC_9QID, srv.url, extra="SELECT * FROM encounters"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--scale", action="store_true", help="also the issue-10 workloads")
    ap.add_argument("--scale-rows", type=int, default=10_000_000)
    ap.add_argument(
        "--only",
        default="",
        help=f"comma-separated issue-10 workloads only ({','.join(WORKLOADS + ON_DEMAND)}); "
        "implies --scale and skips the Adult and 1M-row runs; outofcore only when named",
    )
    ap.add_argument("--ooc-rows", type=int, default=100_000_000, help="rows of --only outofcore")
    ap.add_argument(
        "--ooc-budget",
        default="2GB",
        help='memory budget of the out-of-core run ("only": 2GB and no in-memory run)',
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement, best kept")
    args = ap.parse_args()
    global REPEAT
    REPEAT = max(1, args.repeat)
    only = {w for w in args.only.split(",") if w}
    if only - set(WORKLOADS + ON_DEMAND):
        ap.error(f"--only: unknown workload(s) {sorted(only - set(WORKLOADS + ON_DEMAND))}")
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        if not only:
            spec_c1 = _spec_with((ADULT / "run.toml").read_text(), work / "run-c1.toml", C="1.0")
            for name in ("run.toml", "run-discernibility.toml"):
                results[f"adult {name} (L=4,K=20,C=0.2)"] = measure(
                    ADULT / name, str(ADULT / "adult.csv.gz")
                )
            big = work / "big.csv"
            blow_up(args.rows, big)
            name = f"blow-up {args.rows:,} rows (L=4,K=20,C=1, 13 QIDs)"
            results[name] = measure(spec_c1, str(big))
            big.unlink()
        if args.scale or only:
            scale(work, results, args.scale_rows, only or set(WORKLOADS))
        if "outofcore" in only:
            out_of_core(work, results, args.ooc_rows, args.ooc_budget)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    for k, v in results.items():
        print(
            f"{k}: "
            + ", ".join(
                f"{a}={b:.2f}" if isinstance(b, float) else f"{a}={b}" for a, b in v.items()
            )
        )


if __name__ == "__main__":
    main()
