#!/usr/bin/env python3
"""Run mypy on the package as it is installed: ``fedanon`` (common/), ``fedanon.party``
(party/) and ``fedanon.leader`` (leader/).

mypy names a module after its path and cannot follow setuptools' package-dir mapping, so this
links the three folders into ``build/typecheck/fedanon`` (symbolic links, made anew each run)
and checks ``-p fedanon`` there with the settings of ``[tool.mypy]`` in pyproject.toml.
Extra arguments are passed to mypy.
"""

from __future__ import annotations

import subprocess
import sys

from stage import REPO, stage

STAGE = REPO / "build" / "typecheck"


def main() -> int:
    stage(STAGE)
    cmd = [sys.executable, "-m", "mypy", "-p", "fedanon", *sys.argv[1:]]
    return subprocess.call(cmd, cwd=REPO)


if __name__ == "__main__":
    raise SystemExit(main())
