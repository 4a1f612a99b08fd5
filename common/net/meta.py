"""What a client needs before any vector moves, without numpy: the failure metadata of a
call and starting a channel's connection (the leader connects first thing, before it loads
its heavier modules; :mod:`fedanon.net.rpc` re-exports all of it)."""

from __future__ import annotations

import time

import grpc

# Failure attribution travels as trailing metadata of a failed call, never inside the text:
MD_PARTY = "fedanon-party"  # the party that failed (a relaying party names its successor)
MD_PHASE = "fedanon-phase"  # the RPC it failed in (Prepare, Relay, ...)
MD_KIND = "fedanon-kind"  # one of KINDS
MD_RULE = "fedanon-rule"  # kind "policy": the policy key that refused the run
# A call refused at the door because the caller is locked out (fedanon.ledger.access): the
# identity or address locked out (what `fedanon party ledger unlock` takes) and the whole
# minutes left.  Set by the party's watch (fedanon.party.ledgered.LedgerGate.locked), read
# by the leader (fedanon.leader.links): a lockout is not a misconfigured [peers] leader.
MD_LOCKED_OUT = "fedanon-locked-out"
MD_LOCKOUT_MINUTES = "fedanon-lockout-minutes"
KINDS = frozenset(
    {
        "policy",
        "input",
        "protocol",
        "auth",
        "key",  # pairwise: the signed sum key of the named party failed verification
        "unknown-run",
        "unreachable",
        "timeout",
        "aborted",
    }
)


def failure_metadata(exc: grpc.RpcError) -> dict[str, str]:
    """The ``fedanon-*`` trailing metadata of a failed call (empty when there is none)."""
    try:
        raw = exc.trailing_metadata() or ()
    except Exception:
        return {}
    out = {}
    for item in raw:
        key, value = getattr(item, "key", None), getattr(item, "value", None)
        if isinstance(key, str) and key.startswith("fedanon-") and isinstance(value, str):
            out[key] = value
    return out


_SETTLED = (
    grpc.ChannelConnectivity.READY,
    grpc.ChannelConnectivity.TRANSIENT_FAILURE,
    grpc.ChannelConnectivity.SHUTDOWN,
)


def connect_soon(channel: grpc.Channel) -> None:
    """Start connecting ``channel`` now (TCP, TLS, HTTP/2 in gRPC's threads), without
    waiting.  The watch ends itself once the channel is ready or failed, so that no polling
    thread outlives the connection attempt (one would race with a later ``close``)."""

    def watch(state: grpc.ChannelConnectivity) -> None:
        if state in _SETTLED:
            channel.unsubscribe(watch)  # callbacks run without the channel's lock

    channel.subscribe(watch, try_to_connect=True)


def close_channel(channel: grpc.Channel, wait: float = 0.3) -> None:
    """Close ``channel`` once gRPC's connectivity polling thread (started by a subscription,
    see :func:`connect_soon`) has stopped: that thread checks the channel up to 0.2 s after
    the last subscriber left and raises "Channel closed!" in the background when the channel
    is closed under it (a run that fails right after connecting).  Waits at most ``wait``
    seconds, and not at all when no polling thread runs (the state gRPC keeps is private:
    without it, the channel is closed at once)."""
    state = getattr(channel, "_connectivity_state", None)
    end = time.monotonic() + wait
    while getattr(state, "polling", False) and time.monotonic() < end:
        time.sleep(0.01)
    channel.close()
