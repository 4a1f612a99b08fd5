"""Before a run: can the leader reach every party?  Fail within seconds, saying why.

gRPC alone only reports ``UNAVAILABLE`` (and, with ``wait_for_ready``, only when the deadline
expires).  So the leader waits a few seconds for each channel to become READY; when one does
not, a plain TLS handshake to the same address with the leader's own certificate and the
federation CA says what is wrong: connection refused, not a TLS server (wrong port), unknown
CA, certificate expired, TLS name mismatch, or the party rejecting the leader's certificate.
"""

from __future__ import annotations

import queue
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

READY = grpc.ChannelConnectivity.READY
_SETTLED = (READY, grpc.ChannelConnectivity.SHUTDOWN)
_FINAL = (*_SETTLED, grpc.ChannelConnectivity.TRANSIENT_FAILURE)
# OpenSSL X509_V_ERR_* codes of ssl.SSLCertVerificationError.verify_code
_VERIFY = {
    9: "the party's certificate is not valid yet",
    10: "the party's certificate has expired",
    62: "TLS name mismatch: the certificate at that address is not for {name}",
    2: "unknown CA: the party's certificate is not from the federation CA",
    18: "unknown CA: the party's certificate is self-signed",
    19: "unknown CA: the party's certificate is not from the federation CA",
    20: "unknown CA: the party's certificate is not from the federation CA",
    21: "unknown CA: the party's certificate is not from the federation CA",
}


@dataclass(frozen=True)
class LeaderTls:
    """The leader's own files, for the diagnostic handshake."""

    ca: Path
    cert: Path
    key: Path


def wait_ready(
    channel: grpc.Channel, timeout: float, *, through_failures: bool = False
) -> grpc.ChannelConnectivity | None:
    """Connect ``channel``; return READY, TRANSIENT_FAILURE (or SHUTDOWN) as soon as seen,
    else the last state seen when ``timeout`` expires.  ``through_failures``: a
    TRANSIENT_FAILURE is not an answer -- wait for gRPC's next attempt (its reconnect backoff,
    about a second) until READY, SHUTDOWN or ``timeout`` (the channel reports its current
    state first, so without this a channel that failed once returns at once)."""
    final = _SETTLED if through_failures else _FINAL
    states: queue.Queue[grpc.ChannelConnectivity] = queue.Queue()
    callback: Callable[[grpc.ChannelConnectivity], None] = states.put
    # ask to connect only an idle channel: one already connecting (connect_soon) is left
    # alone, since a connect request pending in gRPC's polling thread races with close()
    channel.subscribe(callback, try_to_connect=False)
    last = None
    end = time.monotonic() + timeout
    try:
        while (left := end - time.monotonic()) > 0:
            try:
                last = states.get(timeout=left)
            except queue.Empty:
                break
            if last == grpc.ChannelConnectivity.IDLE:
                channel.subscribe(_ignore, try_to_connect=True)
                channel.unsubscribe(_ignore)
            if last in final:
                break
    finally:
        channel.unsubscribe(callback)
    return last


def _ignore(_state: grpc.ChannelConnectivity) -> None:
    pass


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def diagnose(address: str, name: str, tls: LeaderTls, timeout: float) -> str | None:
    """Why a TLS connection to the party ``name`` at ``address`` fails; None if it works."""
    try:
        host, port = split_address(address)
    except ValueError:
        return f"{address!r} is not HOST:PORT"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile=str(tls.ca))
    ctx.load_cert_chain(str(tls.cert), str(tls.key))
    ctx.set_alpn_protocols(["h2"])
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            ctx.wrap_socket(raw, server_hostname=name) as conn,
        ):
            conn.settimeout(min(timeout, 1.0))
            try:  # TLS 1.3: a server rejecting our certificate says so after the handshake
                conn.recv(1)
            except TimeoutError:
                pass
            except ssl.SSLError as exc:
                return f"the party rejected the leader's certificate ({exc.reason or exc})"
    except ConnectionRefusedError:
        return "connection refused (nothing listens on that port)"
    except socket.gaierror:
        return f"cannot resolve host {host!r}"
    except TimeoutError:
        return f"no answer within {timeout:g}s (firewall, or wrong host?)"
    except ssl.SSLCertVerificationError as exc:
        text = _VERIFY.get(exc.verify_code)
        if text is not None:
            return text.format(name=name)
        return f"the party's certificate is not trusted: {exc.verify_message}"
    except ssl.SSLError as exc:
        if exc.reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"):
            return "not a TLS server (wrong port, or a daemon started with --insecure)"
        return f"TLS handshake failed ({exc.reason or exc})"
    except OSError as exc:
        return f"cannot connect: {exc.strerror or exc}"
    return None


def check_reachable(
    channel: grpc.Channel,
    address: str,
    name: str,
    tls: LeaderTls | None,
    timeout: float,
) -> str | None:
    """None if ``channel`` becomes READY within ``timeout``; else what is wrong."""
    end = time.monotonic() + timeout
    state = wait_ready(channel, timeout)
    if state == grpc.ChannelConnectivity.READY:
        return None
    why = None if tls is None else diagnose(address, name, tls, max(end - time.monotonic(), 1.0))
    if why is not None:
        return why
    if state == grpc.ChannelConnectivity.TRANSIENT_FAILURE:  # maybe a passing problem
        # e.g. a daemon that began listening between gRPC's attempt and the handshake above:
        # wait for gRPC's next attempt, within the connect timeout
        left = end - time.monotonic()
        if left > 0 and wait_ready(channel, left, through_failures=True) == READY:
            return None
        if tls is None:
            return "the connection fails"
        return "the connection fails (the TLS handshake itself works: a gRPC-level problem?)"
    return f"no connection within {timeout:g}s"
