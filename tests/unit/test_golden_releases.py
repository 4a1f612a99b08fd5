"""Behaviour stays (issue 18 item 7): the examples and benchmark settings release byte for byte
what tests/golden/releases.json recorded (tools/golden.py, which regenerates it with --update).

One test per setting, named after it, so a failure says which setting changed and how (release
digest, sorted digest, row count, report without timings). A federated setting must also equal
its centralized setting where the project promises it (LKC: same rows, cut and steps; DiffGen
with a fixed seed: same bytes)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def _load_golden_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "fedanon_golden_tool", ROOT / "tools" / "golden.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    return module


golden = _load_golden_tool()
GOLDEN = golden.load_golden()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return golden.Workdir(tmp_path_factory.mktemp("golden"))


def _params() -> list[object]:
    marks = {True: [pytest.mark.slow], False: []}
    return [pytest.param(s, id=s.name, marks=marks[s.federated]) for s in golden.SETTINGS]


@pytest.mark.parametrize("setting", _params())
def test_release_is_unchanged(setting: Any, work: Any) -> None:
    got = golden.run(setting, work)
    problems = golden.differences(setting.name, got, GOLDEN.get(setting.name))
    problems += golden.equality_problems(setting, got, GOLDEN)
    assert not problems, "\n".join(problems)


def test_every_setting_is_recorded() -> None:
    assert set(GOLDEN) == {s.name for s in golden.SETTINGS}
    for name, rec in GOLDEN.items():
        assert rec["release"]["rows"] > 0, name
        if golden.BY_NAME[name].equals:
            assert not golden.equality_problems(golden.BY_NAME[name], rec, GOLDEN), name


def test_report_digest_ignores_only_wall_clock(tmp_path: Path) -> None:
    report = {
        "records": 10,
        "anonymize_seconds": 0.5,
        "timings": {"read": 0.1},
        "kkm": {"seconds": {"merging": 1.0}, "merges": 3},
        "federation": {"parties": ["a"]},
    }
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    base = golden.report_digest(path, federated=False)
    fed_base = golden.report_digest(path, federated=True)
    slower = {**report, "anonymize_seconds": 9.0, "timings": {"read": 7.0}}
    path.write_text(json.dumps(slower))
    assert golden.report_digest(path, federated=False) == base
    changed = {**report, "kkm": {"seconds": {"merging": 1.0}, "merges": 4}}
    path.write_text(json.dumps(changed))
    assert golden.report_digest(path, federated=False) != base
    # the federation section counts for a centralized-looking report, not for a federated one
    path.write_text(json.dumps({**report, "federation": {"parties": ["b"]}}))
    assert golden.report_digest(path, federated=False) != base
    assert golden.report_digest(path, federated=True) == fed_base


def test_a_changed_release_names_the_setting(tmp_path: Path) -> None:
    out = tmp_path / "x.csv"
    out.write_bytes(b"a,b\n1,2\n3,4\n")
    rec = {"release": golden.table_record(out), "report_sha256": "r"}
    out.write_bytes(b"a,b\n3,4\n1,2\n")
    reordered = {"release": golden.table_record(out), "report_sha256": "r"}
    assert rec["release"]["sorted_sha256"] == reordered["release"]["sorted_sha256"]
    problems = golden.differences("adult-run", reordered, rec)
    assert problems == [
        f"adult-run: release sha256 {reordered['release']['sha256']} != golden "
        f"{rec['release']['sha256']}"
    ]
    out.write_bytes(b"# NOT PRIVATE\na,b\n1,2\n")
    assert golden.table_record(out)["rows"] == 1
