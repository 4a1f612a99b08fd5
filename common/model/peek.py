"""What a spec file names, read with tomllib alone (no engine, no numpy): for the checks a
command makes before anything heavy loads or any connection opens.  A spec that cannot be read
or parsed peeks as empty; its own reader reports the problem later."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from fedanon.errors import SpecError


def _doc(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def spec_model(path: Path) -> str:
    """``[privacy] model`` of the spec file ("lkc" when absent or unreadable)."""
    priv = _doc(path).get("privacy")
    model = priv.get("model", "lkc") if isinstance(priv, dict) else "lkc"
    return model if isinstance(model, str) else "lkc"


def privacy_model_of(path: Path) -> str:
    """``[privacy] model`` of a spec file ("lkc" when absent); unlike :func:`spec_model`, a
    spec that cannot be read or parsed is a SpecError naming the file."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise SpecError(f"cannot read spec: {exc.strerror}", file=str(path)) from exc
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(f"not a valid TOML spec ({exc})", file=str(path)) from exc
    priv = doc.get("privacy")
    return str(priv.get("model", "lkc")) if isinstance(priv, dict) else "lkc"


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
