"""The one error hierarchy of fedanon.

User errors (bad spec, bad data, bad taxonomy, a table that cannot be made private) are
:class:`InputError` and map to exit code 2; they carry where the problem is (file, line,
column), the offending value and what would have been valid.  Everything else that is our
fault or the federation's is exit code 1.
"""

from __future__ import annotations

from fedanon.logsafe import safe

VALUE_CHARS = 200  # a quoted value longer than this is cut (its length is said)
FILE_CHARS = 1000  # a file name in a message: escaped, at most this long


class FedanonError(Exception):
    """Base class of every error fedanon raises on purpose."""

    exit_code = 1


class InputError(FedanonError):
    """Bad input from the user: spec, data, taxonomy, config, command line."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: str | None = None,
        value: str | None = None,
        expected: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.value = value
        self.expected = expected
        super().__init__(self.render())

    def render(self) -> str:
        where = []
        if self.file is not None:
            where.append(safe(self.file, FILE_CHARS))
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.column is not None:
            where.append(f"column {self.column!r}")
        text = ", ".join(where)
        out = f"{text}: {self.message}" if text else self.message
        if self.value is not None:
            out += f" (value {quoted(self.value)})"
        if self.expected is not None:
            out += f"; expected {self.expected}"
        return out


def quoted(value: object, limit: int = VALUE_CHARS) -> str:
    """``value`` quoted for a message: control and format characters escaped (``repr``
    escapes what :func:`fedanon.logsafe.safe` does), cut to ``limit`` characters with
    the full length said."""
    text = str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


class SpecError(InputError):
    """The run spec (TOML) is invalid."""


class TaxonomyError(InputError):
    """A taxonomy file is invalid."""


class DataError(InputError):
    """The input table does not match the spec."""


class PrivacyError(InputError):
    """The fully generalized table already violates LKC-privacy: nothing can be released."""


class ConfigError(InputError):
    """A party / leader / federation config is invalid."""


class OutputError(InputError):
    """An output cannot be written (file too large, disk full, read-only or denied location):
    exit 2 naming the file and the reason; nothing of the run is published."""


class InternalError(FedanonError):
    """fedanon's own safety check failed (a bug): nothing is published."""


class ProtocolError(FedanonError):
    """A federation message was out of order, malformed or inconsistent."""


class RunAborted(FedanonError):
    """A federated run was aborted (party unreachable, died, or reported an error)."""


class AuthError(FedanonError):
    """A peer failed authentication or authorization."""


class LedgerError(FedanonError):
    """The privacy ledger (:mod:`fedanon.ledger`) cannot be opened, read or written, or is
    not intact: a daemon takes part in no run without it.  Exit code 2: what to fix is the
    hospital's (the file, its directory, the disk), as for a config error."""

    exit_code = 2


class Terminated(KeyboardInterrupt):
    """A termination signal (SIGTERM) turned into an exception so that clean-up code runs
    exactly as for Ctrl-C; the command exits with 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by signal {signum}")
