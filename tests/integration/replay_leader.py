"""A hostile leader that replays a run id: hostile_leader.py's (the worst candidate each
round), with every run taking the id in the environment's ``FEDANON_RUN_ID`` (32 hex digits)
instead of a fresh random one.  Usage: FEDANON_RUN_ID=... python replay_leader.py leader run
--config F"""

from __future__ import annotations

import os
import sys

import hostile_leader  # noqa: F401 -- its selector patch

from fedanon.leader import opening


class _Replayed:
    @staticmethod
    def token_bytes(n: int) -> bytes:
        run_id = bytes.fromhex(os.environ["FEDANON_RUN_ID"])
        assert len(run_id) == n
        return run_id


opening.secrets = _Replayed  # type: ignore[assignment]  # the run id of Opening.__init__

if __name__ == "__main__":
    from fedanon.cli.main import main

    sys.argv = ["fedanon", *sys.argv[1:]]
    sys.exit(main())
