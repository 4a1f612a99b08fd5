"""What the leader's command line still imports from here (``--seed``'s type); DiffGen's
commands are ``fedanon anonymize`` / ``experiment dp`` / ``evaluate`` through its method
(:mod:`fedanon.dp.method`)."""

from __future__ import annotations

from fedanon.dp.method import seed_value as _seed

__all__ = ["_seed"]
