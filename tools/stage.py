"""The package as it is installed, linked into one folder for the tools that cannot follow
setuptools' package-dir mapping (mypy: tools/typecheck.py; import-linter: tools/lint_imports.py).

``fedanon`` is common/, ``fedanon.party`` party/ and ``fedanon.leader`` leader/; :func:`stage`
links them into ``build/<name>/fedanon`` (symbolic links, made anew each run; a folder per tool,
so the tools can run at once).
"""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def stage(folder: Path) -> Path:
    """Links the package into ``folder/fedanon`` (``folder`` made anew); that package folder."""
    pkg = folder / "fedanon"
    if folder.exists():
        shutil.rmtree(folder)
    pkg.mkdir(parents=True)
    for entry in sorted((REPO / "common").iterdir()):
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for name in ("party", "leader"):
        (pkg / name).symlink_to(REPO / name)
    return pkg
