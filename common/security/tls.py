"""Mutual-TLS gRPC channels and server credentials for the federation (synchronous ``grpc``).

Every connection is mutual TLS against the federation CA (see :mod:`fedanon.security.certs`).  A
client names the peer it wants to talk to (``expected_name``); the server certificate must
carry that name as its DNS SAN, whatever the address is (an IP, a docker service name...).
This module only sets up transport security: who may call which method is decided on the
server by the :class:`fedanon.security.auth.AuthInterceptor` given to ``grpc.server`` (the party
daemon, :mod:`fedanon.party.server`, builds it from :func:`fedanon.party.service.method_policies`).

Typical use::

    tls = TlsMaterial.load(ca="certs/ca.pem", cert="certs/alice.pem", key="certs/alice.key")
    server = grpc.server(pool, options=server_options(), interceptors=[AuthInterceptor(table)])
    add_secure_port(server, "0.0.0.0:7443", tls.server_credentials())
    with tls.channel("bob.example:7443", expected_name="bob") as chan:
        stub = party_pb2_grpc.PartyStub(chan)

``--insecure`` (local experiments only) replaces both ends by plaintext
(:func:`insecure_channel`, :func:`add_insecure_port`): callers then carry no identity, and the
party daemon's interceptor runs in insecure mode, which lets anyone call every listed method
(each call still audited); a strict interceptor on a plaintext port refuses every call as
UNAUTHENTICATED.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from fedanon.errors import ConfigError
from fedanon.logsafe import safe
from fedanon.security.certs import Identity, validate_name
from fedanon.security.certverify import verify_issued

log = logging.getLogger(__name__)

PemSource = bytes | str | os.PathLike[str]
ChannelOption = tuple[str, str | int]

MAX_MESSAGE_BYTES = 8 * 1024 * 1024
KEEPALIVE_TIME_MS = 60_000
KEEPALIVE_TIMEOUT_MS = 20_000
# The server tolerates client pings this often (must be below KEEPALIVE_TIME_MS).
MIN_PING_INTERVAL_MS = 30_000

_TARGET_NAME_OVERRIDE = "grpc.ssl_target_name_override"
_BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark


def load_pem(source: PemSource, *, what: str = "PEM file") -> bytes:
    """PEM bytes from ``source``: returned as-is if bytes, else read from that path."""
    if isinstance(source, bytes):
        data = source
        where = None
    else:
        where = str(source)
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read {what}: {exc.strerror}", file=where) from exc
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or b"-\x00-\x00-\x00" in data[:64]:
        raise ConfigError(
            f"{what} is saved as UTF-16 text",
            file=where,
            expected="the PEM file as the coordinator sent it (ASCII; an editor's 'UTF-8' or "
            "'ANSI' encoding), e.g. iconv -f UTF-16 -t ASCII",
        )
    # An editor's UTF-8 byte-order mark before '-----BEGIN': Python's parser skips it, gRPC's
    # does not (the daemon would fail to bind its port, the leader every handshake)
    data = data.replace(_BOM + b"-----BEGIN ", b"-----BEGIN ")
    if b"-----BEGIN " not in data:
        raise ConfigError(f"{what} is not PEM", file=where, expected="a '-----BEGIN ...' block")
    return data


def _merge(
    defaults: Sequence[ChannelOption], extra: Iterable[ChannelOption] | None
) -> list[ChannelOption]:
    merged = dict(defaults)
    for key, value in extra or ():
        if key == _TARGET_NAME_OVERRIDE:
            raise ConfigError(
                f"option {key} is set from expected_name and cannot be overridden",
                value=str(value),
            )
        merged[key] = value
    return list(merged.items())


def channel_options(
    expected_name: str | None, extra: Iterable[ChannelOption] | None = None
) -> list[ChannelOption]:
    """Client channel options: message limits, keepalive, and the expected server name."""
    defaults: list[ChannelOption] = [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.http2.max_pings_without_data", 0),
    ]
    if expected_name is not None:
        defaults.append((_TARGET_NAME_OVERRIDE, validate_name(expected_name)))
    return _merge(defaults, extra)


def server_options(extra: Iterable[ChannelOption] | None = None) -> list[ChannelOption]:
    """Server options matching :func:`channel_options` (limits, keepalive ping policy)."""
    defaults: list[ChannelOption] = [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS * 2),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.http2.min_ping_interval_without_data_ms", MIN_PING_INTERVAL_MS),
        ("grpc.http2.max_ping_strikes", 2),
        ("grpc.keepalive_permit_without_calls", 0),
    ]
    return _merge(defaults, extra)


def server_credentials(ca: PemSource, cert: PemSource, key: PemSource) -> grpc.ServerCredentials:
    """Server credentials that require and verify a client certificate from ``ca`` (mTLS)."""
    return grpc.ssl_server_credentials(
        [(load_pem(key, what="private key"), load_pem(cert, what="certificate"))],
        root_certificates=load_pem(ca, what="CA certificate"),
        require_client_auth=True,
    )


def channel_credentials(ca: PemSource, cert: PemSource, key: PemSource) -> grpc.ChannelCredentials:
    """Client credentials presenting ``cert`` and trusting only ``ca``; :func:`channel` makes
    the channel (``grpc.secure_channel`` with :func:`channel_options` naming the server)."""
    return grpc.ssl_channel_credentials(
        root_certificates=load_pem(ca, what="CA certificate"),
        private_key=load_pem(key, what="private key"),
        certificate_chain=load_pem(cert, what="certificate"),
    )


def channel(
    address: str,
    ca: PemSource,
    cert: PemSource,
    key: PemSource,
    expected_name: str,
    options: Iterable[ChannelOption] | None = None,
) -> grpc.Channel:
    """A mutual-TLS channel to ``address`` whose server must be ``expected_name``.

    The server certificate must chain to ``ca`` and carry ``expected_name`` as DNS SAN
    (checked via ``grpc.ssl_target_name_override``, so ``address`` may be anything routable).
    """
    return grpc.secure_channel(
        address,
        channel_credentials(ca, cert, key),
        options=channel_options(expected_name, options),
    )


def insecure_channel(address: str, options: Iterable[ChannelOption] | None = None) -> grpc.Channel:
    """A plaintext channel, for local experiments only: no encryption, no identities."""
    log.warning(
        "INSECURE channel to %s: no TLS, no authentication. Never use this with real data.",
        address,
    )
    return grpc.insecure_channel(address, options=channel_options(None, options))


def require_loopback(address: str, field: str, source: str) -> None:
    """``--insecure`` is for experiments on one machine: :class:`ConfigError` unless
    ``address`` (HOST:PORT, ``field`` of the config file ``source``) is a loopback address.
    Plaintext on any other interface would let anyone on the network call the daemon as its
    leader (no identities) and read every statistic on the wire."""
    host = address.rpartition(":")[0].strip("[]")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ConfigError(
            f"{field}: --insecure (no TLS, no authentication) is for experiments on one "
            "machine only, and this address is not a loopback address",
            file=source,
            value=address,
            expected="127.0.0.1:PORT, [::1]:PORT or localhost:PORT; or drop --insecure (mutual "
            "TLS with the federation's certificates)",
        )


def add_secure_port(server: grpc.Server, address: str, creds: grpc.ServerCredentials) -> int:
    """Bind ``server`` to ``address`` with ``creds``; returns the port (useful with ``:0``)."""
    try:
        port = server.add_secure_port(address, creds)
    except RuntimeError as exc:
        raise ConfigError(f"cannot listen on {address}: {exc}") from exc
    if port == 0:
        raise ConfigError(f"cannot listen on {address}")
    return port


def add_insecure_port(server: grpc.Server, address: str) -> int:
    """Bind ``server`` to ``address`` in plaintext, for local experiments only.  Callers have
    no identity: what they may call is up to the server's interceptor (see the module text)."""
    log.warning(
        "INSECURE server port %s: no TLS, callers carry no identity (an interceptor in insecure "
        "mode lets anyone call, a strict one refuses every call). Never use this with real data.",
        address,
    )
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise ConfigError(f"cannot listen on {address}: {exc}") from exc
    if port == 0:
        raise ConfigError(f"cannot listen on {address}")
    return port


def _shown(source: PemSource) -> str:
    """The file a PEM was read from, as a message names it (" ca/ca.pem"; "": bytes)."""
    return "" if isinstance(source, bytes) else " " + safe(os.fspath(source), 1000)


@dataclass(frozen=True)
class TlsMaterial:
    """A checked (CA, certificate, key) triple and the identity it proves."""

    ca: bytes
    cert: bytes
    key: bytes
    identity: Identity

    @classmethod
    def load(cls, ca: PemSource, cert: PemSource, key: PemSource) -> TlsMaterial:
        """Read and cross-check the files; :class:`ConfigError` names what is wrong."""
        ca_pem = load_pem(ca, what="CA certificate")
        cert_pem = load_pem(cert, what="certificate")
        key_pem = load_pem(key, what="private key")
        if not isinstance(key, bytes):
            mode = Path(key).stat().st_mode & 0o777
            if mode & 0o077:
                log.warning(
                    "private key %s is accessible by others (mode %o): chmod 600 it (only "
                    "the daemon's user should read it)",
                    key,
                    mode,
                )
        ca_file, cert_file, key_file = (_shown(f) for f in (ca, cert, key))
        identity = verify_issued(ca_pem, cert_pem, key_pem, names=(ca_file, cert_file, key_file))
        return cls(ca=ca_pem, cert=cert_pem, key=key_pem, identity=identity)

    def server_credentials(self) -> grpc.ServerCredentials:
        return server_credentials(self.ca, self.cert, self.key)

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return channel_credentials(self.ca, self.cert, self.key)

    def channel(
        self,
        address: str,
        expected_name: str,
        options: Iterable[ChannelOption] | None = None,
    ) -> grpc.Channel:
        return channel(address, self.ca, self.cert, self.key, expected_name, options)

    def __repr__(self) -> str:  # never print key material
        return f"TlsMaterial(identity={self.identity!r})"
