#!/usr/bin/env python3
"""The privacy ledger's cost: per run (reserve + release, each an fsync'd WAL commit) and
``ledger show`` over 10,000 runs.  Targets: <= 5 ms per run, <= 1 s for show.

    python bench/bench_ledger.py [--runs 10000] [--dir /var/lib/fedanon]

``--dir`` puts the ledger on the disk it would live on (fsync costs differ by disk)."""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from fedanon.ledger.daemon import DaemonLedger
from fedanon.ledger.fingerprint import DataFingerprint
from fedanon.ledger.records import Caller, RunFacts
from fedanon.ledger.show import check_chain, rows, write_json, write_text
from fedanon.security.policy import PartyPolicy

LEADER = Caller("leader", "ab" * 32, "ipv4:10.0.0.5:40000")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--timed", type=int, default=200, help="runs timed one by one")
    ap.add_argument("--dir", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "bench.ledger.sqlite"
        policy = PartyPolicy(
            min_K=2,
            min_L=1,
            max_C=1.0,
            max_epsilon=1.0,
            max_total_epsilon=1e9,
            max_releases=1_000_000,
            max_runs_per_day=1_000_000,
        )
        led = DaemonLedger(path, policy, Path(tmp) / "data.csv")
        data = DataFingerprint("d" * 64, '{"file": "data.csv"}')
        per_run = []
        for i in range(args.runs):
            dp = i % 2 == 0
            facts = RunFacts(
                f"{i:032x}",
                ("a", "b", "c"),
                f"{i % 7:064x}",
                "dp" if dp else "lkc",
                "epsilon=0.1 h=10 score=max" if dp else "L=3 K=10 C=0.5 score=infogain",
                Fraction(1, 10) if dp else None,
                data,
                30_000,
            )
            t0 = time.perf_counter()
            refused = led.admit(LEADER, facts)
            led.ended(facts.run_id, True, "finished", 123_456)
            if i < args.timed or i >= args.runs - args.timed:
                per_run.append(time.perf_counter() - t0)
            assert refused is None
        led.close()
        from fedanon.ledger.store import Store

        store = Store(path, create=False)
        t0 = time.perf_counter()
        n = write_text(io.StringIO(), rows(store), store)
        show_text = time.perf_counter() - t0
        t0 = time.perf_counter()
        write_json(io.StringIO(), rows(store))
        show_json = time.perf_counter() - t0
        t0 = time.perf_counter()
        checked, broken = check_chain(store)
        verify_s = time.perf_counter() - t0
        assert broken is None
        store.close()
        size = path.stat().st_size
    first, last = per_run[: args.timed], per_run[-args.timed :]
    print(
        f"ledger overhead per run (reserve + release), first {args.timed} runs: "
        f"median {statistics.median(first) * 1e3:.2f} ms, p95 "
        f"{sorted(first)[int(0.95 * len(first))] * 1e3:.2f} ms"
    )
    print(
        f"  ... last {args.timed} of {args.runs} runs: median "
        f"{statistics.median(last) * 1e3:.2f} ms, p95 "
        f"{sorted(last)[int(0.95 * len(last))] * 1e3:.2f} ms (target <= 5 ms)"
    )
    print(
        f"ledger show over {args.runs} runs ({n} rows): text {show_text:.2f} s, "
        f"json {show_json:.2f} s (target <= 1 s); verify {checked} rows {verify_s:.2f} s; "
        f"file {size / 1e6:.1f} MB"
    )


if __name__ == "__main__":
    main()
