"""The one attribute model of every spec: roles ``identifier | qid | class | sensitive | other
| provider``,
QID types ``numeric | categorical | set``.

A set-valued quasi-identifier (a patient's diagnosis codes) is ``role = "qid"``,
``type = "set"``, its items joined by ``separator`` and described by an item taxonomy
(``taxonomy``).  The earlier spelling ``role = "set"`` is read as that for one release, with a
warning naming the new spelling.  Which roles and types a method accepts is the method's own
check (the LKC engine reads no set-valued QID; (k, k^m) needs exactly one).
"""

from __future__ import annotations

import logging
from typing import Any

from fedanon.errors import SpecError

log = logging.getLogger(__name__)

ROLES = ("identifier", "qid", "class", "sensitive", "other", "provider")
# never released: identifiers are never read; the provider column (which hospital a record
# came from: m-privacy's coalitions, fedanon.privacy.mprivacy) is read, never released
NOT_RELEASED = ("identifier", "provider")
TYPES = ("numeric", "categorical", "set")
SET = "set"
DEPRECATED_SET_ROLE = "set"  # role = "set": role = "qid" + type = "set" since issue 18
DEFAULT_SEPARATOR = "|"


def role_and_type(raw: dict[str, Any], where: str, source: str) -> tuple[Any, Any]:
    """The ``role`` and ``type`` of an ``[[attribute]]`` table, the deprecated ``role = "set"``
    read as ``role = "qid"``, ``type = "set"`` (with a warning naming the new spelling)."""
    role, type_ = raw.get("role"), raw.get("type")
    if role == DEPRECATED_SET_ROLE:
        if type_ not in (None, SET):
            raise SpecError(
                f'{where}: role = "set" takes no other type',
                file=source,
                value=str(type_),
                expected='role = "qid" with type = "set"',
            )
        log.warning(
            '%s: %s: role = "set" is deprecated and will be refused in the next release; '
            'write role = "qid" with type = "set" (separator and taxonomy as before)',
            source,
            where,
        )
        return "qid", SET
    return role, type_


def unknown_type(where: str, value: object, valid: tuple[str, ...] = TYPES) -> SpecError:
    """A qid without a valid type: the error names the valid ones."""
    return SpecError(f"{where}: a qid needs a type", value=str(value), expected=" | ".join(valid))
