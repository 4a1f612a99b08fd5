#!/usr/bin/env python3
"""Check the import layers (``[tool.importlinter]`` in pyproject.toml) on the package as it is
installed: ``fedanon`` (common/), ``fedanon.party`` (party/) and ``fedanon.leader`` (leader/).

import-linter (grimp) finds a package's modules under the folder of its ``__init__``, so with
setuptools' package-dir mapping it would see common/ only.  As tools/typecheck.py does for
mypy, this links the folders into ``build/importlint/fedanon`` (symbolic links, made anew each
run; its own folder, so both tools can run at once) and runs ``lint-imports`` with that folder
first on the path.  Extra arguments are passed to lint-imports.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from stage import REPO, stage

STAGE = REPO / "build" / "importlint"


def main() -> int:
    stage(STAGE)
    for sub in ("party", "leader"):  # optional layers in pyproject: they must exist here
        if not (STAGE / "fedanon" / sub / "__init__.py").exists():
            print(f"lint_imports: fedanon.{sub} is not staged in {STAGE}", file=sys.stderr)
            return 2
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(STAGE), os.environ.get("PYTHONPATH")])),
    }
    lint = Path(sys.executable).parent / "lint-imports"
    cmd = [str(lint), "--no-cache", *sys.argv[1:]]
    return subprocess.call(cmd, cwd=REPO, env=env)


if __name__ == "__main__":
    sys.exit(main())
