"""pyproject.toml lists the packages explicitly (the repository's folders map into the `fedanon`
namespace, so setuptools cannot discover them): every code folder must be listed under its
`fedanon` name, every data folder must be listed with package data that matches all its files,
and nothing else may be listed."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIP = {"__pycache__"}


def _config() -> dict[str, object]:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert isinstance(setuptools, dict)
    return setuptools


def _mapping() -> dict[str, Path]:
    """Top-level folder of each mapped name (the `package-dir` table)."""
    dirs = _config()["package-dir"]
    assert isinstance(dirs, dict)
    return {name: REPO / folder for name, folder in dirs.items()}


def _folders(name: str, root: Path) -> dict[str, Path]:
    """`name` and every folder below `root` (a folder of the same mapping), by dotted name,
    stopping at folders that another mapping entry places elsewhere."""
    out = {name: root}
    for sub in sorted(p for p in root.rglob("*") if p.is_dir()):
        parts = sub.relative_to(root).parts
        if SKIP.intersection(parts):
            continue
        out[".".join((name, *parts))] = sub
    return out


def _all_folders() -> dict[str, Path]:
    mapping = _mapping()
    out: dict[str, Path] = {}
    for name, root in mapping.items():
        out.update(_folders(name, root))
    # a name that is mapped elsewhere belongs to its own mapping, not to its parent folder
    for name, root in mapping.items():
        out[name] = root
    return out


def test_the_three_folders_and_the_examples_map_into_fedanon() -> None:
    assert {k: v.relative_to(REPO).as_posix() for k, v in _mapping().items()} == {
        "fedanon": "common",
        "fedanon.party": "party",
        "fedanon.leader": "leader",
        "fedanon.examples": "examples",
    }


def test_every_code_folder_and_data_folder_is_listed_and_nothing_else() -> None:
    listed = _config()["packages"]
    assert isinstance(listed, list)
    assert len(set(listed)) == len(listed), "a package is listed twice"
    folders = _all_folders()
    code = {n for n, p in folders.items() if (p / "__init__.py").is_file()}
    data = {n for n, p in folders.items() if n not in code}
    # every folder with an __init__.py is a package: listed, under its fedanon name
    assert sorted(code - set(listed)) == []
    # a listed name is a folder of the checkout (no stale entries)
    assert sorted(set(listed) - set(folders)) == []
    # a folder without __init__.py holds data only; unlisted, its files would be left out
    for name in sorted(data):
        assert name in listed, f"data folder {folders[name]} is not listed"
        assert not list(folders[name].glob("*.py")), f"{folders[name]} has code but no __init__"


def test_package_data_ships_every_file_of_the_data_folders() -> None:
    package_data = _config()["package-data"]
    assert isinstance(package_data, dict)
    folders = _all_folders()
    assert set(package_data) <= set(folders)
    for name, path in folders.items():
        if (path / "__init__.py").is_file():
            continue
        patterns = package_data.get(name, [])
        files = [f.name for f in path.iterdir() if f.is_file()]
        assert files, f"{path} is empty"
        missed = [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in patterns)]
        assert missed == [], f"{path}: not in the wheel: {missed}"
    assert "py.typed" in package_data["fedanon"]


def test_the_adult_example_is_a_data_folder_of_the_wheel() -> None:
    """The experiment commands default to these files (fedanon.bundled.EXAMPLES)."""
    from fedanon.bundled import EXAMPLES
    from fedanon.evaluation.experiments import DEFAULT_DATA, DEFAULT_SPEC

    assert _mapping()["fedanon.examples"] == EXAMPLES
    assert DEFAULT_SPEC.is_file() and DEFAULT_DATA.is_file()
    assert DEFAULT_SPEC.parent == EXAMPLES / "adult"
