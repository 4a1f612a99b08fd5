"""Golden releases: SHA-256 digests of what the examples and benchmark settings release.

    .venv/bin/python tools/golden.py            # recompute, compare with tests/golden/releases.json
    .venv/bin/python tools/golden.py --update   # recompute and rewrite the JSON
    .venv/bin/python tools/golden.py --only adult-run,fed-adult-run

Every setting is run as a user runs it (``python -m fedanon.cli ...`` in a fresh process, in a
temporary directory). For each one the JSON keeps the released table's digest and data-row count
and the digest of its JSON report with the wall-clock fields removed (``timings``, ``seconds``,
``*_seconds``). A federated LKC release comes out in the secure union's order (which hides who
contributed which record; deterministic, but not the centralized order), so it is compared with
the centralized release by its *sorted* digest: the header, then the data rows sorted. Where the
project promises that a federated run releases what the centralized run releases on the union of
the tables (LKC: the same rows, cut and steps; DiffGen with a fixed seed: the same bytes),
``equals`` names the centralized setting, and the release and the report (without its
``federation`` section) must match it. tests/unit/test_golden_releases.py runs the same
settings and compares.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
BENCH_SPECS = ROOT / "bench" / "specs"
GOLDEN = ROOT / "tests" / "golden" / "releases.json"
ADULT = EXAMPLES / "adult" / "adult.csv.gz"
PARTIES = 3
RT_ARGS = ("--n", "10000", "--seed", "1")  # examples/rt/README.md's data set
DP_SEED = "7"  # tests only: a fixed seed makes the DP release NOT PRIVATE
TIMING_KEYS = frozenset({"timings", "seconds"})


@dataclass(frozen=True)
class Setting:
    """One run whose release is recorded. ``inputs``: ``adult``, ``table1``, ``rt`` (generated)
    or ``adult-split`` (Adult dealt round-robin to ``PARTIES`` hospitals)."""

    name: str
    command: str  # anonymize | federate | generate-rt
    spec: str = ""  # relative to the repository root
    inputs: str = "adult"
    extra: tuple[str, ...] = ()
    equals: str = ""  # the centralized setting a federated run must equal
    same_order: bool = False  # the promise covers the row order too (else: the sorted rows)
    federated: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "federated", self.command == "federate")


SETTINGS: tuple[Setting, ...] = (
    Setting("table1-run", "anonymize", "examples/table1/run.toml", "table1"),
    Setting("adult-run", "anonymize", "examples/adult/run.toml"),
    Setting("adult-run-kanon", "anonymize", "examples/adult/run-kanon.toml"),
    Setting("adult-run-discernibility", "anonymize", "examples/adult/run-discernibility.toml"),
    Setting("bench-adult-9qid", "anonymize", "bench/specs/adult-9qid.toml"),
    Setting("bench-adult-free", "anonymize", "bench/specs/adult-free.toml"),
    Setting("bench-adult-kanon-full", "anonymize", "bench/specs/adult-kanon-full.toml"),
    Setting("bench-adult-kanon-l1", "anonymize", "bench/specs/adult-kanon-l1.toml"),
    Setting("adult-dp-seed7", "anonymize", "examples/adult/dp.toml", extra=("--seed", DP_SEED)),
    Setting("rt-generate", "generate-rt", inputs="rt"),
    Setting("rt-kkm", "anonymize", "examples/rt/run.toml", "rt"),
    Setting("fed-adult-run", "federate", "examples/adult/run.toml", "adult-split", (), "adult-run"),
    Setting(
        "fed-bench-adult-free",
        "federate",
        "bench/specs/adult-free.toml",
        "adult-split",
        (),
        "bench-adult-free",
    ),
    Setting(
        "fed-adult-dp-seed7",
        "federate",
        "examples/adult/dp.toml",
        "adult-split",
        ("--seed", DP_SEED),
        "adult-dp-seed7",
        same_order=True,
    ),
)
BY_NAME = {s.name: s for s in SETTINGS}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def strip_timings(value: Any, *, drop: frozenset[str] = frozenset()) -> Any:
    """The report without its wall-clock fields (and without the keys in ``drop``, top level)."""
    if isinstance(value, dict):
        return {
            k: strip_timings(v)
            for k, v in value.items()
            if k not in TIMING_KEYS and not k.endswith("_seconds") and k not in drop
        }
    if isinstance(value, list):
        return [strip_timings(v) for v in value]
    return value


def report_digest(path: Path, *, federated: bool) -> str:
    report = json.loads(path.read_text(encoding="utf-8"))
    kept = strip_timings(report, drop=frozenset({"federation"}) if federated else frozenset())
    return sha256(json.dumps(kept, sort_keys=True, ensure_ascii=False).encode())


def table_record(path: Path) -> dict[str, Any]:
    """Digest, sorted digest and data-row count of a released CSV (``#`` comment lines such as a
    seeded DP release's NOT PRIVATE line count as header)."""
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    head = [ln for ln in lines if ln.startswith(b"#")]
    rest = [ln for ln in lines if not ln.startswith(b"#")]
    header, rows = rest[:1], rest[1:]
    return {
        "sha256": sha256(data),
        "sorted_sha256": sha256(b"".join(head + header + sorted(rows))),
        "rows": len(rows),
    }


class Workdir:
    """Inputs made once per directory: the generated RT data and the Adult split."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def rt(self) -> Path:
        out = self.root / "rt.csv"
        if not out.exists():
            fedanon("generate-rt", *RT_ARGS, "--out", str(out), cwd=self.root)
        return out

    def adult_split(self) -> list[Path]:
        paths = [self.root / f"hospital-{i}.csv" for i in range(PARTIES)]
        if not all(p.exists() for p in paths):
            with gzip.open(ADULT, "rb") as fh:
                lines = fh.read().splitlines(keepends=True)
            header, rows = lines[0], lines[1:]
            for i, p in enumerate(paths):
                p.write_bytes(header + b"".join(rows[i::PARTIES]))
        return paths


def fedanon(*args: str, cwd: Path) -> None:
    env = {**os.environ, "TMPDIR": str(cwd)}
    proc = subprocess.run(
        [sys.executable, "-m", "fedanon.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"fedanon {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        )


def run(setting: Setting, work: Workdir) -> dict[str, Any]:
    """Run one setting in ``work`` and return its record."""
    if setting.command == "generate-rt":
        rec = table_record(work.rt())
        return {"release": rec}
    out = work.root / f"{setting.name}.csv"
    report = work.root / f"{setting.name}.json"
    spec = str(ROOT / setting.spec)
    args = ["--spec", spec, "--output", str(out), "--report", str(report), "--quiet"]
    if setting.federated:
        for i, p in enumerate(work.adult_split()):
            args += ["--party", f"hospital-{i}={p}"]
    else:
        src = {"adult": ADULT, "table1": EXAMPLES / "table1" / "table1.csv"}.get(setting.inputs)
        args += ["--input", str(src if src is not None else work.rt())]
    fedanon(setting.command, *args, *setting.extra, cwd=work.root)
    rec = table_record(out)
    return {"release": rec, "report_sha256": report_digest(report, federated=setting.federated)}


def compute(names: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    chosen = [BY_NAME[n] for n in names] if names else list(SETTINGS)
    with tempfile.TemporaryDirectory(prefix="fedanon-golden-") as tmp:
        work = Workdir(Path(tmp))
        return {s.name: run(s, work) for s in chosen}


def equality_problems(
    setting: Setting, got: dict[str, Any], golden: dict[str, dict[str, Any]]
) -> list[str]:
    """Where a federated record differs from its centralized setting's golden record."""
    if not setting.equals:
        return []
    ref = golden[setting.equals]
    out = []
    keys = ("sha256", "sorted_sha256", "rows") if setting.same_order else ("sorted_sha256", "rows")
    for key in keys:
        if got["release"][key] != ref["release"][key]:
            out.append(f"{setting.name}: release {key} differs from {setting.equals}'s")
    if got["report_sha256"] != ref["report_sha256"]:
        out.append(f"{setting.name}: report differs from {setting.equals}'s (timings removed)")
    return out


def differences(name: str, got: dict[str, Any], want: dict[str, Any] | None) -> list[str]:
    if want is None:
        return [f"{name}: not in {GOLDEN.relative_to(ROOT)} (run tools/golden.py --update)"]
    out = []
    for key in sorted(set(got["release"]) | set(want["release"])):
        a, b = got["release"].get(key), want["release"].get(key)
        if a != b:
            out.append(f"{name}: release {key} {a} != golden {b}")
    if got.get("report_sha256") != want.get("report_sha256"):
        out.append(
            f"{name}: report (timings removed) {got.get('report_sha256')} != golden "
            f"{want.get('report_sha256')}"
        )
    return out


def load_golden() -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = json.loads(GOLDEN.read_text(encoding="utf-8"))["settings"]
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--update", action="store_true", help=f"rewrite {GOLDEN.relative_to(ROOT)}")
    ap.add_argument("--only", default="", help="comma-separated setting names")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        ap.error(f"unknown setting(s) {unknown}; known: {', '.join(BY_NAME)}")
    got = compute(names)
    golden = load_golden() if GOLDEN.exists() else {}
    if args.update:
        merged = {**golden, **got}
        problems = [
            p for s in SETTINGS if s.name in got for p in equality_problems(s, got[s.name], merged)
        ]
        if problems:
            print("\n".join(problems), file=sys.stderr)
            return 1
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "about": "written by tools/golden.py --update; checked by "
            "tests/unit/test_golden_releases.py",
            "settings": {s.name: merged[s.name] for s in SETTINGS if s.name in merged},
        }
        GOLDEN.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {len(got)} setting(s) to {GOLDEN.relative_to(ROOT)}")
        return 0
    problems = [p for n, rec in got.items() for p in differences(n, rec, golden.get(n))]
    problems += [p for n in got for p in equality_problems(BY_NAME[n], got[n], golden)]
    print("\n".join(problems) if problems else f"{len(got)} setting(s) unchanged")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
