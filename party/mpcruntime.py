"""An MPyC runtime for one m-privacy run (imported only in the MPC worker: importing MPyC's
runtime reads ``sys.argv``, which the worker has emptied).

Differences from ``mpyc.runtime.setup()``:

* parties, threshold t = (n - 1) // 2 and options come from the run's :class:`~fedanon.party.
  mpc.MpcConfig`, never from a command line;
* connections use the federation's mTLS files (CA, this hospital's certificate and key):
  a worker dialing party j checks that j's certificate names ``names[j]`` (TLS host name
  check); a worker accepting a connection checks that the certificate names the hospital
  whose position the peer claims in its first message, and that it is lower than its own;
  both check the *party* role.  The run binds the connection: the dialer's first message
  carries, after its position, the run's tag (:meth:`fedanon.party.mpc.MpcConfig.tag`: the
  run id and the run's terms), the acceptor compares it with its own and answers with its
  tag, which the dialer compares in turn; only then is the connection the peer's (MPyC's
  ``set_protocol``).  A worker of another run (the same port, a listener not yet closed) is
  refused and logged, and the dialer tries again until its peer's worker of this run
  answers.  Anything else closes the connection;
* :meth:`SafeRuntime.transfer` carries integers only, as 8 bytes (MPyC's own pickles;
  unpickling a peer's bytes would let a peer run code here);
* shares travel as field elements: secure integers with MPyC's ``to_bytes``, secure arrays
  (MPyC's numpy paths, ``mix32_64bit`` off) with :class:`fedanon.party.mpccodec.ArrayCodec`,
  put where ``mpyc.runtime`` looks up ``pickle``: never pickled.
"""

from __future__ import annotations

import asyncio
import hmac
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
TAG = 32  # bytes of the run's tag in the first message of each side


def _peer_identity(transport: Any) -> tuple[str, str] | None:
    sslobj = transport.get_extra_info("ssl_object")
    der = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
    if der is None:
        return None
    ident = identity_of(x509.load_der_x509_certificate(der))
    return ident.name, ident.role


class CheckedExchanger(asyncoro.MessageExchanger):  # type: ignore[misc]
    """MPyC's connection, admitted only for the expected hospital of this run (see the module
    doc).  ``answered`` (dialer): True once the peer's run tag matched, False when the
    connection was refused or lost before."""

    def __init__(self, rt: Any, peer_pid: int | None = None) -> None:
        super().__init__(rt, peer_pid)
        self.admitted = False
        self.head = bytearray()
        self.tls_name: str | None = None
        self.answered: asyncio.Future[bool] = rt._loop.create_future()

    def _refuse(self, why: str) -> None:
        log.warning("MPC peer %s: connection closed", why)
        if self.transport is not None:
            self.transport.close()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        ident = _peer_identity(transport)
        rt = self.runtime
        if ident is None or ident[1] != "party":
            self._refuse("without a party certificate")
            return
        self.tls_name = ident[0]
        if self.peer_pid is not None:  # the dialer: position, run tag, then MPyC's keys
            if ident[0] != rt.names[self.peer_pid]:
                self._refuse("certificate is not the expected hospital")
                return
            first = [rt.pid.to_bytes(2, "little"), rt.tag]
            if not rt.options.no_prss:
                first.extend(rt._prss_keys_to_peer(self.peer_pid))
            transport.writelines(first)

    def data_received(self, data: bytes) -> None:
        if self.admitted:
            super().data_received(data)
            return
        self.head.extend(data)
        rt = self.runtime
        if self.peer_pid is not None:  # the dialer: the acceptor's tag first
            if len(self.head) < TAG:
                return
            if not hmac.compare_digest(bytes(self.head[:TAG]), rt.tag):
                self._refuse(f"{rt.names[self.peer_pid]} belongs to another run")
                self._answer(False)
                return
            self.admitted = True
            rest = bytes(self.head[TAG:])
            rt.set_protocol(self.peer_pid, self)
            self._answer(True)
        else:  # the acceptor: the dialer's position and tag first
            if len(self.head) < 2 + TAG:
                return
            claimed = int.from_bytes(self.head[:2], "little")
            if not (claimed < rt.pid and rt.names[claimed] == self.tls_name):
                self._refuse("claims a position its certificate does not hold")
                return
            self.transport.write(rt.tag)  # the dialer compares it too (and logs a refusal)
            if not hmac.compare_digest(bytes(self.head[2 : 2 + TAG]), rt.tag):
                self._refuse(f"{rt.names[claimed]} belongs to another run")
                return
            self.admitted = True
            rest = bytes(self.head[:2] + self.head[2 + TAG :])  # MPyC's first message
        self.head = bytearray()
        if rest:
            super().data_received(rest)

    def _answer(self, ok: bool) -> None:
        if not self.answered.done():
            self.answered.set_result(ok)

    def connection_lost(self, exc: Exception | None) -> None:
        self._answer(False)
        if not self.admitted:  # never admitted: nothing of MPyC's to undo
            return
        # MPyC re-raises a lost connection's error, and its last unset_protocol sets a
        # result that a shutdown may have set already: either became a traceback in the
        # hospital's log when a peer was killed; the run stops all the same (the leader
        # names the hospital), so one line here says what happened
        try:
            super().connection_lost(exc)
        except (OSError, asyncio.InvalidStateError) as err:
            peer = self.runtime.names[self.peer_pid] if self.peer_pid is not None else "a peer"
            log.warning("MPC connection to %s lost (%s)", peer, type(err).__name__)


class SafeRuntime(Runtime):  # type: ignore[misc]
    def __init__(self, cfg: Any, options: Any) -> None:
        parties = [
            Party(i, "localhost" if i == cfg.pid else h, p)
            for i, (h, p) in enumerate(zip(cfg.hosts, cfg.ports, strict=True))
        ]
        super().__init__(cfg.pid, parties, options)
        self.names = cfg.names
        self.cfg = cfg
        self.tag: bytes = cfg.tag()

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
                pause = 0.1
                try:
                    _, proto = await loop.create_connection(
                        lambda peer=peer: CheckedExchanger(self, peer.pid),
                        peer.host,
                        peer.port,
                        ssl=self._context(ssl.Purpose.SERVER_AUTH),
                        server_hostname=self.names[peer.pid],
                    )
                    left = max(deadline - time.monotonic(), 0.1)
                    if await asyncio.wait_for(proto.answered, left):
                        break
                    pause = 1.0  # refused (another run's worker holds the port): not too often
                except (OSError, ssl.SSLError, TimeoutError) as exc:
                    if time.monotonic() > deadline:
                        raise ConnectionError(
                            f"MPC peer {self.names[peer.pid]} unreachable"
                        ) from exc
                if time.monotonic() > deadline:
                    raise ConnectionError(f"MPC peer {self.names[peer.pid]} refused this run")
                await asyncio.sleep(pause)
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
        got = await self.gather(self._all_to_all(struct.pack("<q", int(obj))))
        return [struct.unpack("<q", bytes(raw))[0] for raw in got]  # type: ignore[return-value]

    @asyncoro.mpc_coro  # type: ignore[untyped-decorator]
    async def exchange(self, data: bytes) -> asyncio.Future:  # type: ignore[type-arg]
        """All-to-all exchange of a few bytes (the check's digest), in the clear over the
        authenticated connections: every party's, in party order."""
        got = await self.gather(self._all_to_all(data))
        return [bytes(raw) for raw in got]  # type: ignore[return-value]

    def _all_to_all(self, data: bytes) -> list[Any]:
        """Send ``data`` to every other party; every party's message (own: ``data``; the
        others': futures), in party order."""
        for peer in self.parties:
            if peer.pid != self.pid:
                self._send_message(peer.pid, data)
        return [
            data if peer.pid == self.pid else self._receive_message(peer.pid)
            for peer in self.parties
        ]


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
