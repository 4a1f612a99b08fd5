"""The HTML report in a real browser: Debian's ``chromium`` (headless) renders the page of a
federated Adult release to PNG and dumps its DOM.  Checked: it renders (a PNG of the asked
size with real content), no request left the page (chromium's own net log: a control page
that fetches two addresses shows that the check sees page requests; the host resolver maps
every name to nothing, so a missed one could not reach anything either), and the key numbers,
recounted here from the released CSV, are in the DOM.  ``.ci/run`` installs chromium when
missing; without it these tests are skipped."""

from __future__ import annotations

import csv
import gzip
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)
WIDTH, HEIGHT = 1200, 2400


def chromium(page: Path, tmp: Path, *action: str) -> tuple[str, list[dict[str, object]]]:
    """Run headless chromium on ``page`` with ``action``; its stdout and the URL requests
    the page made (from ``--log-net-log``; the browser's own background requests, which carry
    no page as their site, are left out)."""
    assert CHROMIUM is not None
    log = tmp / f"net-{len(list(tmp.glob('net-*')))}.json"
    argv = [
        CHROMIUM,
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={tmp / 'profile'}",
        f"--log-net-log={log}",
        *action,
        page.resolve().as_uri(),
    ]
    if os.geteuid() == 0:
        argv.insert(1, "--no-sandbox")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, page_requests(log)


def page_requests(log: Path) -> list[dict[str, object]]:
    doc = json.loads(log.read_text())
    kinds = {v: k for k, v in doc["constants"]["logEventTypes"].items()}
    out = []
    for ev in doc["events"]:
        params = ev.get("params") or {}
        if kinds.get(ev["type"]) != "URL_REQUEST_START_JOB" or "url" not in params:
            continue
        site = str(params.get("network_isolation_key", ""))
        if params.get("initiator") != "not an origin" or site.startswith("file://"):
            out.append(params)
    return out


@pytest.fixture(scope="module")
def federated(adult_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("browser")
    lines = gzip.decompress((adult_dir / "adult.csv.gz").read_bytes()).decode().splitlines()
    parties = []
    for i, name in enumerate(("north", "south", "east")):
        path = tmp / f"{name}.csv"
        path.write_text("\n".join([lines[0], *lines[1 + i :: 3]]) + "\n")
        parties += ["--party", f"{name}={path}"]
    out = {k: tmp / k for k in ("released.csv", "report.json", "page.html")}
    argv = ["federate", "--spec", str(adult_dir / "run.toml"), *parties, "--quiet"]
    argv += ["--output", str(out["released.csv"]), "--report", str(out["report.json"])]
    code = subprocess.run(
        [sys.executable, "-m", "fedanon.cli", *argv, "--html", str(out["page.html"])],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert code.returncode == 0, code.stderr[-2000:]
    out["dir"] = tmp
    return out


def test_the_net_log_sees_a_page_that_fetches(tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><body><img src="http://example.test/x.png" alt="x">'
        '<link rel="stylesheet" href="https://fonts.example.test/a.css"></body></html>'
    )
    _, requests = chromium(bad, tmp_path, "--dump-dom")
    assert {str(r["url"]) for r in requests} == {
        "http://example.test/x.png",
        "https://fonts.example.test/a.css",
    }


def test_the_page_renders_fetches_nothing_and_shows_the_key_numbers(
    federated: dict[str, Path], tmp_path: Path
) -> None:
    page = federated["page.html"]
    dom, requests = chromium(page, tmp_path, "--dump-dom")
    assert requests == []
    rep = json.loads(federated["report.json"].read_text())
    qids = rep["parameters"]["qids"]
    with federated["released.csv"].open(newline="") as fh:
        sizes = Counter(tuple(r[q] for q in qids) for r in csv.DictReader(fh))
    n, smallest = sum(sizes.values()), min(sizes.values())
    dr = sum(s * s for s in sizes.values()) / n**2
    for ident, value in (
        ("min-group", f"{smallest:,}"),
        ("highest-risk", f"{1 / smallest:.4f}"),
        ("dr", f"{dr:.4f}"),
        ("records", f"{n:,}"),
        ("verdict", "holds"),
    ):
        assert f'id="{ident}"><span class="v' in dom and f">{value}</span>" in dom, ident
    assert "Federated run" in dom and "north, south, east" in dom
    assert dom.count("<svg") >= 5 and dom.count("<figcaption>") == dom.count("<svg")

    shot = tmp_path / "page.png"
    _, requests = chromium(
        page, tmp_path, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}"
    )
    assert requests == []
    from PIL import Image

    with Image.open(shot) as img:
        assert img.size == (WIDTH, HEIGHT)
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 50  # text, plots and cards, not a blank or error page
    dark = sum(c for c, rgb in colours if sum(rgb) < 200)
    assert dark > 0.005 * WIDTH * HEIGHT


def test_a_hospitals_page_shows_its_ledger_in_the_browser(adult_dir: Path, tmp_path: Path) -> None:
    """After a federated run with real daemons and ledgers: ``report --party-config
    --ledger`` renders, fetches nothing, and the DOM carries the bytes of statistics the
    ledger recorded for the run (read by the officer's own ``ledger show --json``)."""
    from report_ledger_run import ledgered_run

    from fedanon.cli.main import main

    with ledgered_run(adult_dir, tmp_path) as run:
        page = tmp_path / "south.html"
        argv = ["report", "--spec", str(run["spec"]), "--released", str(run["released.csv"])]
        argv += ["--run-report", str(run["report.json"]), "--html", str(page)]
        assert main([*argv, "--party-config", str(run["south.toml"]), "--ledger"]) == 0
        show = [sys.executable, "-m", "fedanon.cli", "party", "ledger", "show", "--json"]
        proc = subprocess.run(
            [*show, "--config", str(run["south.toml"])],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
    run_id = json.loads(run["report.json"].read_text())["federation"]["run_id"]
    [released] = [
        r for r in json.loads(proc.stdout) if r["run_id"] == run_id and r["event"] == "released"
    ]
    dom, requests = chromium(page, tmp_path, "--dump-dom")
    assert requests == []
    assert released["bytes"] > 0
    sent = f"<dt>bytes of statistics sent by this hospital</dt><dd>{released['bytes']:,}</dd>"
    assert sent in dom
    assert f"<dd>{run_id}</dd>" in dom and "<td>max_releases</td>" in dom
