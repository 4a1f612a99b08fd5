"""Small validators shared by the TOML readers (party.toml, federation.toml, the run spec).

Errors are :class:`ConfigError` unless a reader passes its own ``error`` class (the spec
reader raises :class:`SpecError`)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from fedanon.errors import ConfigError, InputError

ErrorType = type[InputError]


def section(
    doc: dict[str, Any], key: str, source: str, error: ErrorType = ConfigError
) -> dict[str, Any]:
    """The ``[key]`` table of a document; a clear error when it is missing."""
    val = doc.get(key)
    if not isinstance(val, dict):
        raise error(f"missing [{key}] table", file=source)
    return val


def require_host_port(
    table: dict[str, Any],
    key: str,
    where: str,
    source: str,
    *,
    ephemeral: bool = False,
    example: str = "hospital-a.example.org:7443",
) -> str:
    """``key`` of ``[where]`` as a non-empty HOST:PORT: a port in 1..65535, or 0 as well when
    ``ephemeral`` (the system picks one).  A malformed address is a config error here, not a
    failed connection or bind later."""
    val = require_str(table, key, where, source)
    host, sep, port = val.rpartition(":")
    low = 0 if ephemeral else 1
    if not sep or not host or not port.isdigit() or not low <= int(port) <= 65535:
        raise ConfigError(
            f"[{where}] {key} must be HOST:PORT" + ("" if ephemeral else " with a fixed port"),
            file=source,
            value=val,
            expected=f'a host and a port in {low}..65535, e.g. {key} = "{example}"',
        )
    return val


def require_str(table: dict[str, Any], key: str, where: str, source: str) -> str:
    """A non-empty string value."""
    val = table.get(key)
    if not isinstance(val, str) or not val:
        if key in table:  # there, but of another type or empty: name what was written
            raise ConfigError(
                f"[{where}] {key} must be a non-empty string",
                file=source,
                value=repr(val),
                expected=f'{key} = "..." (quoted)',
            )
        raise ConfigError(f'[{where}] needs {key} = "..."', file=source)
    return val


def check_keys(
    table: dict[str, Any],
    allowed: set[str],
    where: str,
    source: str,
    error: ErrorType = ConfigError,
) -> None:
    """Unknown keys are errors: a typo must not silently fall back to a default."""
    extra = sorted(set(table) - allowed)
    if extra:
        raise error(
            f"[{where}]: unknown key",
            file=source,
            value=extra[0],
            expected=", ".join(sorted(allowed)),
        )


def read_config(path: Path, what: str = "config", error: ErrorType = ConfigError) -> str:
    """The text of a config file (``what``: how messages name it); a clear error when it
    cannot be read."""
    try:
        return path.read_text(encoding="utf-8-sig")  # a byte order mark is not TOML
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror}", file=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise error(f"the {what} is not UTF-8 text", file=str(path)) from exc


def tls_paths(tls: dict[str, Any], root: Path, source: str) -> tuple[Path, Path, Path]:
    """``[tls]`` ca, cert and key, relative to the config's folder."""
    check_keys(tls, {"ca", "cert", "key"}, "tls", source)
    ca, cert, key = (root / require_str(tls, k, "tls", source) for k in ("ca", "cert", "key"))
    return ca, cert, key


def parse_toml(text: str, source: str, error: ErrorType = ConfigError) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"not valid TOML: {exc}", file=source) from exc
