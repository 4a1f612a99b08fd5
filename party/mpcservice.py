"""The ``CoalitionCheck`` RPC of the Party servicer (m-privacy): convert and delegate to
:mod:`fedanon.party.mpcrun`.  Mixed into :class:`fedanon.party.service.PartyService`, whose
``runs`` and ``_guard`` it uses."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import grpc

from fedanon.errors import ProtocolError
from fedanon.net import rpc
from fedanon.net.convert import coalition_from_pb
from fedanon.pb.fedanon.v1 import party_pb2 as pb

if TYPE_CHECKING:
    from fedanon.party.runs import RunRegistry

T = TypeVar("T")


class MpcRpcs:
    runs: RunRegistry

    def _guard(self, context: grpc.ServicerContext, phase: str, fn: Callable[[], T]) -> T:
        raise NotImplementedError  # PartyService's

    def CoalitionCheck(
        self, request: pb.CoalitionCheckRequest, context: grpc.ServicerContext
    ) -> pb.CoalitionCheckReply:
        def work() -> pb.CoalitionCheckReply:
            query = coalition_from_pb(request)
            left = context.time_remaining()
            deadline = time.monotonic() + (rpc.DEFAULT_TIMEOUT_S if left is None else left)
            with self.runs.use(bytes(request.run_id)) as run:
                if run.mpc is None:
                    raise ProtocolError("a coalition check in a run without m-privacy")
                return pb.CoalitionCheckReply(passes=run.mpc.check(run, query, deadline))

        return self._guard(context, "CoalitionCheck", work)
