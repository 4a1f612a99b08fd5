"""An MPyC runtime for one m-privacy run (imported only in the MPC worker: importing MPyC's
runtime reads ``sys.argv``, which the worker has emptied).

Differences from ``mpyc.runtime.setup()``:

* parties, threshold t = (n - 1) // 2 and options come from the run's :class:`~fedanon.party.
  mpc.MpcConfig`, never from a command line;
* connections use the federation's mTLS files (CA, this hospital's certificate and key):
  a worker dialing party j checks that j's certificate names ``names[j]`` (TLS host name
  check); a worker accepting a connection checks that the certificate names the hospital
  whose position the peer claims in its first message, and that it is lower than its own;
  both check the *party* role.  Anything else closes the connection;
* :meth:`SafeRuntime.transfer` carries integers only, as 8 bytes (MPyC's own pickles;
  unpickling a peer's bytes would let a peer run code here);
* shares travel as field elements: secure integers with MPyC's ``to_bytes``, secure arrays
  (MPyC's numpy paths, ``mix32_64bit`` off) with :class:`fedanon.party.mpccodec.ArrayCodec`,
  put where ``mpyc.runtime`` looks up ``pickle``: never pickled.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
import time
from typing import Any

from cryptography import x509
from mpyc import asyncoro, sectypes
from mpyc.runtime import Party, Runtime, mpc

from fedanon.party.mpccodec import ArrayCodec
from fedanon.security.certs import identity_of

log = logging.getLogger(__name__)


def _peer_identity(transport: Any) -> tuple[str, str] | None:
    sslobj = transport.get_extra_info("ssl_object")
    der = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
    if der is None:
        return None
    ident = identity_of(x509.load_der_x509_certificate(der))
    return ident.name, ident.role


class CheckedExchanger(asyncoro.MessageExchanger):  # type: ignore[misc]
    """MPyC's connection, admitted only for the expected hospital (see the module doc)."""

    def connection_made(self, transport: Any) -> None:
        ident = _peer_identity(transport)
        rt = self.runtime
        if ident is None or ident[1] != "party":
            log.warning("MPC peer without a party certificate: connection closed")
            transport.close()
            return
        self.tls_name = ident[0]
        if self.peer_pid is not None and ident[0] != rt.names[self.peer_pid]:
            log.warning("MPC peer certificate is not the expected hospital: closed")
            transport.close()
            return
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.peer_pid is None and len(self.bytes) + len(data) >= 2:
            claimed = int.from_bytes((bytes(self.bytes) + data)[:2], "little")
            rt = self.runtime
            if not (claimed < rt.pid and rt.names[claimed] == getattr(self, "tls_name", None)):
                log.warning("MPC peer claims a position its certificate does not hold: closed")
                self.transport.close()
                return
        super().data_received(data)


class SafeRuntime(Runtime):  # type: ignore[misc]
    def __init__(self, cfg: Any, options: Any) -> None:
        parties = [
            Party(i, "localhost" if i == cfg.pid else h, p)
            for i, (h, p) in enumerate(zip(cfg.hosts, cfg.ports, strict=True))
        ]
        super().__init__(cfg.pid, parties, options)
        self.names = cfg.names
        self.cfg = cfg

    def _context(self, purpose: ssl.Purpose) -> ssl.SSLContext:
        ctx = ssl.create_default_context(purpose, cafile=self.cfg.ca)
        ctx.load_cert_chain(self.cfg.cert, keyfile=self.cfg.key)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    async def start(self) -> None:
        """MPyC's ``start`` with the federation's TLS and identity checks."""
        loop = self._loop
        for peer in self.parties:
            peer.protocol = asyncio.Future(loop=loop) if peer.pid == self.pid else None
        server = None
        if self.pid:
            server = await loop.create_server(
                lambda: CheckedExchanger(self),
                host=self.cfg.hosts[self.pid],  # this hospital's [mpc] listen host
                port=self.parties[self.pid].port,
                ssl=self._context(ssl.Purpose.CLIENT_AUTH),
            )
        deadline = time.monotonic() + 60
        for peer in self.parties[self.pid + 1 :]:
            while True:
                try:
                    await loop.create_connection(
                        lambda peer=peer: CheckedExchanger(self, peer.pid),
                        peer.host,
                        peer.port,
                        ssl=self._context(ssl.Purpose.SERVER_AUTH),
                        server_hostname=self.names[peer.pid],
                    )
                    break
                except (OSError, ssl.SSLError) as exc:
                    if time.monotonic() > deadline:
                        raise ConnectionError(
                            f"MPC peer {self.names[peer.pid]} unreachable"
                        ) from exc
                    await asyncio.sleep(0.1)
        await asyncio.wait_for(self.parties[self.pid].protocol, 60)
        if server is not None:
            server.close()
        self.start_time = time.time()

    @asyncoro.mpc_coro  # type: ignore[untyped-decorator]
    async def transfer(self, obj: Any, senders: Any = None, receivers: Any = None,
                       sender_receivers: Any = None) -> asyncio.Future:  # type: ignore[type-arg]  # fmt: skip
        """All-to-all exchange of one integer (the shutdown barrier), 8 bytes each."""
        if senders is not None or receivers is not None or sender_receivers is not None:
            raise NotImplementedError("only the all-to-all integer transfer is supported")
        data = struct.pack("<q", int(obj))
        for peer in self.parties:
            if peer.pid != self.pid:
                self._send_message(peer.pid, data)
        got = [
            data if peer.pid == self.pid else self._receive_message(peer.pid)
            for peer in self.parties
        ]
        got = await self.gather(got)
        return [struct.unpack("<q", bytes(raw))[0] for raw in got]  # type: ignore[return-value]


def make_runtime(cfg: Any) -> SafeRuntime:
    options = mpc.options
    options.threshold = (len(cfg.names) - 1) // 2
    options.mix32_64bit = False
    options.no_log = True
    options.no_async = False
    options.ssl = True
    rt = SafeRuntime(cfg, options)
    sectypes.runtime = rt
    asyncoro.runtime = rt
    import mpyc.mpctools
    import mpyc.runtime

    mpyc.mpctools.runtime = rt
    mpyc.runtime.pickle = ArrayCodec  # its array shares: integers, never pickled
    return rt
