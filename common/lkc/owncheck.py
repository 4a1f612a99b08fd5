"""The hospital's own ``[policy] sensitive_values`` occur in its own table (issue 24 attack,
finding 3).

A typo in the policy (``"divorced"`` where the data says ``Divorced``) made ``max_C`` bind a
value no record holds: C bound nothing, silently, and the leader's spec could even set
``allow_absent_sensitive = true`` to get past the union's own "never occurs" check.  At
Prepare, once the table is read, each policy value must be the value of at least one of this
hospital's records, else the run is refused: the leader hears the fixed data sentence (this
is a fact about the data), the hospital's log says which policy value never occurs and, if
one exists, the record value that equals it but for case and surrounding whitespace (never
any other record value).  So a spec's ``allow_absent_sensitive`` never relaxes a policy
value: it only lets the spec's *extra* values be absent from the union.
"""

from __future__ import annotations

import numpy as np

from fedanon.errors import DataError
from fedanon.io.table import EncodedTable
from fedanon.logsafe import safe
from fedanon.model.spec import RunSpec
from fedanon.security.policy import PartyPolicy


def near_match(value: str, record_values: tuple[str, ...]) -> str | None:
    """The record value equal to ``value`` but for case and surrounding whitespace."""
    key = value.strip().casefold()
    return next((v for v in record_values if v.strip().casefold() == key), None)


def check_own_sensitive(policy: PartyPolicy | None, spec: RunSpec, table: EncodedTable) -> None:
    """Raise :class:`DataError` unless every policy sensitive value occurs in ``table``
    (an LKC run whose spec keeps the policy's sensitive column; dropped: nothing to bind)."""
    if policy is None or policy.sensitive_column is None or not policy.sensitive_values:
        return
    sens = spec.sensitive_attr
    if sens is None or sens.name != policy.sensitive_column:
        return  # declared role = "identifier" (the policy check allows nothing else)
    listed = spec.privacy.sensitive_values
    counts = np.bincount(np.asarray(table.sens), minlength=len(listed) + 1)
    for v in policy.sensitive_values:
        if v in listed and counts[listed.index(v) + 1] > 0:
            continue
        column = table.kept.get(sens.name)
        near = near_match(v, column.values) if column is not None else None
        hint = f"; the data has {safe(near, 100)!r}: fix the policy's spelling" if near else ""
        raise DataError(
            f"[policy] sensitive_values lists {safe(v, 100)!r}, which no record of this "
            f"hospital's column {safe(sens.name, 100)!r} holds: max_C would bind nothing"
            f"{hint}",
            column=sens.name,
            expected="each of the policy's sensitive_values held by at least one record",
        )
