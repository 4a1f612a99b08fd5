"""Taxonomies bundled with fedanon, named ``builtin:NAME`` in a spec (``builtin:icd9cm``: the
ICD-9-CM diagnosis codes, ``common/kkm/data/README.md``), for every method that reads one."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from fedanon.errors import SpecError
from fedanon.model.taxonomy import Taxonomy, parse_taxonomy

BUILTIN_PREFIX = "builtin:"
BUILTINS = ("icd9cm",)
DATA = Path(__file__).resolve().parent.parent / "kkm" / "data"


@lru_cache(maxsize=4)
def builtin_taxonomy(name: str) -> Taxonomy:
    """A bundled taxonomy, parsed once per process."""
    if name not in BUILTINS:
        raise SpecError("unknown built-in taxonomy", value=name, expected=" | ".join(BUILTINS))
    text = gzip.decompress((DATA / f"{name}.txt.gz").read_bytes()).decode("utf-8")
    return parse_native_linear(text, f"{BUILTIN_PREFIX}{name}")


def load_taxonomy(ref: str, reader: Callable[[str], str]) -> Taxonomy:
    """``builtin:NAME`` or a taxonomy file (native or ARX) read by ``reader``."""
    if ref.startswith(BUILTIN_PREFIX):
        return builtin_taxonomy(ref[len(BUILTIN_PREFIX) :])
    return parse_taxonomy(reader(ref), ref)


def parse_native_linear(text: str, source: str) -> Taxonomy:
    """The native format (as ``fedanon.model.taxonomy.parse_native``) for a bundled, known-good
    file, in linear time (17,727 ICD-9-CM nodes)."""
    labels: list[str] = []
    parent: list[int] = []
    stack: list[tuple[int, int]] = []
    for raw in text.splitlines():
        body = raw.split("#", 1)[0].rstrip()
        if not body.strip():
            continue
        indent = len(body) - len(body.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent.append(stack[-1][1] if stack else -1)
        labels.append(body.strip())
        stack.append((indent, len(labels) - 1))
    return Taxonomy(tuple(labels), tuple(parent), source)
