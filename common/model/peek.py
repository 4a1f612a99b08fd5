"""What a spec file names, read with tomllib alone (no engine, no numpy): for the checks a
command makes before anything heavy loads or any connection opens.  The one sniffer of
``[privacy] model`` (a UTF-8 BOM is skipped everywhere: a file's first bytes never decide
which method reads it).  A spec that cannot be read or parsed peeks as empty in the lenient
functions; its own reader reports the problem later."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "lkc"  # [privacy] without model
BOM = "\ufeff"


def read_text(path: Path) -> str:
    """A spec file's text without its BOM (OSError, UnicodeDecodeError as raised)."""
    return path.read_text(encoding="utf-8-sig")


def _doc(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(read_text(path))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _model(doc: dict[str, Any]) -> str:
    priv = doc.get("privacy")
    model = priv.get("model", DEFAULT_MODEL) if isinstance(priv, dict) else DEFAULT_MODEL
    return model if isinstance(model, str) else DEFAULT_MODEL


def text_model(text: str) -> str:
    """``[privacy] model`` of spec text ("lkc" when absent or not TOML)."""
    try:
        return _model(tomllib.loads(text.removeprefix(BOM)))
    except tomllib.TOMLDecodeError:
        return DEFAULT_MODEL


def spec_model(path: Path) -> str:
    """``[privacy] model`` of the spec file ("lkc" when absent or unreadable)."""
    return _model(_doc(path))


def named_files(path: Path) -> list[Path]:
    """The taxonomy files the spec's attributes name, relative to the spec's folder."""
    attrs = _doc(path).get("attribute")
    if not isinstance(attrs, list):
        return []
    return [
        path.parent / a["taxonomy"]
        for a in attrs
        if isinstance(a, dict) and isinstance(a.get("taxonomy"), str)
    ]
