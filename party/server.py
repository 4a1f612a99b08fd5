"""The party daemon: a gRPC server with mTLS, the health service, graceful SIGTERM.

Start-up refuses (ConfigError, exit 2) a daemon that would misbehave later: no [policy] and
no pinned spec, a certificate that is not a *party* certificate for this name, a data file
that cannot be read, a pinned spec its own policy refuses, a port already in use.

Start-up is cheap: the port is bound and announced (``--port-file``, health SERVING) before
the Party service's modules -- numpy, the engine, the union -- are imported; they load in
the background right after (:class:`_LazyParty`), and an RPC that comes first waits for
them.  The checks above all run before the port is bound.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from fedanon.apispec import Spec
from fedanon.errors import ConfigError, OutputError
from fedanon.io.fsutil import atomic_write
from fedanon.ledger.daemon import DaemonLedger, open_ledger
from fedanon.party.config import PartyConfig
from fedanon.party.peerlimit import SERVER_THREADS, Limits, PeerLimit
from fedanon.security.policy import PolicyRefused
from fedanon.security.tls import TlsMaterial, add_insecure_port, add_secure_port, server_options

if TYPE_CHECKING:
    from fedanon.io.table import EncodedTable
    from fedanon.party.service import PartyService
    from fedanon.security.auth import AuthInterceptor

log = logging.getLogger(__name__)
MAX_WORKERS = SERVER_THREADS  # shared out per caller by fedanon.party.peerlimit
GRACE_S = 5.0
SHUTDOWN_LIMIT_S = 10.0  # graceful stop (GRACE_S) plus closing the runs, at most
SIGNAL_POLL_S = 0.25  # the main thread looks for a signal another thread took this often
# Bind exclusively: with SO_REUSEPORT (grpc's default) a second daemon on the same port
# starts "successfully" and the kernel splits connections between the two.
EXCLUSIVE_BIND = ("grpc.so_reuseport", 0)


def check_data_readable(path: Path, source: str) -> None:
    """The data file exists, is a regular file and can be read (its content is read later)."""
    try:
        if not path.is_file():
            what = "does not exist" if not path.exists() else "is not a regular file"
            raise ConfigError(f"[party] data {what}", file=source, value=str(path))
        with path.open("rb") as fh:
            fh.read(1)
    except OSError as exc:
        raise ConfigError(
            f"[party] data cannot be read: {exc.strerror}", file=source, value=str(path)
        ) from exc


def startup_checks(config: PartyConfig, tls: TlsMaterial) -> None:
    config.require_policy()
    ident = tls.identity
    if ident.role != "party":
        raise ConfigError(
            f"the certificate is a {ident.role} certificate; a daemon needs a party certificate",
            file=str(config.cert),
            expected=f"fedanon certs issue {config.name} --role party",
        )
    if ident.name != config.name:
        raise ConfigError(
            f"[party] name is {config.name!r}, but the certificate {config.cert} is "
            f"{ident.name!r}'s",
            file=config.source,
            value=config.name,
            expected=f'name = "{ident.name}" if this daemon is {ident.name}; else the '
            f"certificate and key issued for {config.name} in [tls]",
        )
    if isinstance(config.data, Path):  # a database source is checked when a run reads it
        check_data_readable(config.data, config.source)
    if config.spec is not None:
        spec = Spec.from_toml(config.spec).view  # the one spec; its method's view
        if config.policy is not None:
            try:
                config.policy.check_spec(spec)
            except PolicyRefused as exc:
                raise ConfigError(
                    f"the pinned spec is refused by this party's own [policy]: {exc}",
                    file=config.source,
                ) from exc


class _Captured:
    """Stands in for the server when the generated code registers the Party service."""

    def __init__(self) -> None:
        self.handlers: list[grpc.GenericRpcHandler[Any, Any]] = []

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self.handlers.extend(handlers)

    def add_registered_method_handlers(self, _name: str, _handlers: Any) -> None:
        pass  # an optimisation of grpc's; the generic handlers serve every method


class _LazyParty:
    """The Party service, its handlers and the authorization interceptor, built on first use
    (the background warm-up right after start, or the first RPC, whichever comes first)."""

    def __init__(
        self,
        config: PartyConfig,
        tls: TlsMaterial,
        insecure: bool,
        ledger: DaemonLedger,
        limit: PeerLimit,
        loaded: Callable[[EncodedTable | None], None] | None = None,
    ) -> None:
        self._args = (config, tls, insecure)
        self.ledger = ledger
        self.limit = limit
        self.loaded_table = loaded  # told the table loaded ahead (None: none was)
        self._lock = threading.Lock()
        self._built: (
            tuple[PartyService, AuthInterceptor, list[grpc.GenericRpcHandler[Any, Any]]] | None
        )
        self._built = None

    def get(self) -> tuple[PartyService, AuthInterceptor, list[grpc.GenericRpcHandler[Any, Any]]]:
        try:
            return self._get()
        except BaseException:
            if self.loaded_table is not None:  # nothing will be loaded ahead: say so once
                told, self.loaded_table = self.loaded_table, None
                told(None)
            raise

    def _get(self) -> tuple[PartyService, AuthInterceptor, list[grpc.GenericRpcHandler[Any, Any]]]:
        with self._lock:
            if self._built is None:
                from fedanon.party.ledgered import LedgerGate
                from fedanon.party.service import PartyService, method_policies
                from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
                from fedanon.security.auth import AuthInterceptor

                config, tls, insecure = self._args
                gate = LedgerGate(self.ledger, config.leader if insecure else None)
                service = PartyService(config, tls, ledger=gate, insecure=insecure)
                table = method_policies(config.leader)
                auth = AuthInterceptor(table, insecure=insecure, watch=gate, limit=self.limit)
                captured = _Captured()
                pb_grpc.add_PartyServicer_to_server(service, captured)  # type: ignore[no-untyped-call]
                service.runs.start()
                told = self.loaded_table
                if not service.preload(told) and told is not None:
                    told(None)  # nothing is loaded ahead: say so at once
                self._built = (service, auth, captured.handlers)
            return self._built

    @property
    def loaded(self) -> bool:
        return self._built is not None


class _LazyHandler(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    def __init__(self, lazy: _LazyParty) -> None:
        self.lazy = lazy

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        for h in self.lazy.get()[2]:
            found = h.service(handler_call_details)
            if found is not None:
                return found
        return None


class _LazyAuth(grpc.ServerInterceptor):  # type: ignore[type-arg]
    """:class:`fedanon.security.auth.AuthInterceptor` with the table of :func:`fedanon.party.service
    .method_policies`, for every service (health included), once loaded."""

    def __init__(self, lazy: _LazyParty) -> None:
        self.lazy = lazy

    def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        return self.lazy.get()[1].intercept_service(continuation, handler_call_details)


class PartyServer:
    """``digest_file``: once the table a pinned spec loads ahead is loaded, its
    :func:`fedanon.io.sametable.loaded_digest` is written there ("-": nothing was loaded
    ahead) -- `fedanon federate`'s same-table check, which starts the daemons itself."""

    def __init__(
        self, config: PartyConfig, *, insecure: bool = False, digest_file: Path | None = None
    ) -> None:
        self.config = config
        self.tls = TlsMaterial.load(config.ca, config.cert, config.key)
        startup_checks(config, self.tls)
        # before the port is bound: no run without it; its start is recorded once serving
        self.ledger = open_ledger(config, start=False)
        # the calls each federation member may have in flight (every call holds a thread)
        self.limit = PeerLimit(
            Limits(config.leader, config.max_leader_calls, config.max_peer_calls)
        )
        loaded = None if digest_file is None else _digest_writer(digest_file)
        self._lazy = _LazyParty(config, self.tls, insecure, self.ledger, self.limit, loaded)
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="party"),
            handlers=[_LazyHandler(self._lazy)],
            interceptors=[_LazyAuth(self._lazy)],
            options=server_options([EXCLUSIVE_BIND]),
            maximum_concurrent_rpcs=MAX_WORKERS * 4,
        )
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        try:
            if insecure:
                self.port = add_insecure_port(self.server, config.listen)
            else:
                creds = self.tls.server_credentials()
                self.port = add_secure_port(self.server, config.listen, creds)
        except ConfigError:
            self.ledger.close()  # no 'daemon started' row for a daemon that never served
            raise ConfigError(
                f"cannot listen on {config.listen}: the port is in use (another daemon?) or "
                "the address is not one of this machine's",
                file=config.source,
            ) from None
        self.stopped = threading.Event()

    @property
    def service(self) -> PartyService:
        """The Party servicer (loaded on first use)."""
        return self._lazy.get()[0]

    def start(self, port_file: Path | None = None) -> None:
        self.ledger.started()
        self.server.start()
        self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        self.health.set("fedanon.v1.Party", health_pb2.HealthCheckResponse.SERVING)
        log.info("party %s serving on port %d", self.config.name, self.port)
        if port_file is not None:
            text = f"{self.port}\n"
            atomic_write(port_file, lambda fh: fh.write(text))
        # the service's modules load now, while the leader connects
        threading.Thread(target=self._lazy.get, name="party-load", daemon=True).start()

    def stop(self, grace: float = GRACE_S) -> None:
        self.health.enter_graceful_shutdown()
        self.server.stop(grace).wait()
        if self._lazy.loaded:
            self.service.runs.close()
        self.ledger.close()
        self.stopped.set()

    def serve_forever(self, port_file: Path | None = None) -> None:
        stopping = threading.Event()

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            log.info("signal %d: shutting down", signum)
            if stopping.is_set():  # a second signal: the clock already runs
                return
            stopping.set()
            threading.Thread(target=self.stop, daemon=True).start()
            # whatever hangs (a handler blocked on a peer, a thread the interpreter would
            # join at exit, the interpreter's exit itself), a daemon told to stop is gone
            # within SHUTDOWN_LIMIT_S
            limit_shutdown(SHUTDOWN_LIMIT_S)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.start(port_file)
        # wake up now and then: the kernel hands a signal to any thread that does not block
        # it, and Python runs the handler in this thread only when it runs bytecode -- a
        # wait without a timeout would sleep through a SIGTERM a gRPC thread took
        while not self.stopped.wait(SIGNAL_POLL_S):
            pass
        sent = self.service.runs.total_stats_bytes() if self._lazy.loaded else 0
        log.info("party %s stopped: %d bytes of statistics sent in total", self.config.name, sent)
        peak = ", ".join(f"{who} {n}" for who, n in sorted(self.limit.peaks().items(), key=str))
        log.info(  # how close the federation came to [party] max_leader_calls / max_peer_calls
            "most calls in flight at once: %s; %d refused over a limit",
            peak or "none",
            self.limit.refused,
        )


def _digest_writer(path: Path) -> Callable[[EncodedTable | None], None]:
    def write(table: EncodedTable | None) -> None:
        from fedanon.io.sametable import loaded_digest

        text = "-\n"
        if table is not None:
            try:
                text = loaded_digest(table) + "\n"
            except Exception as exc:  # the check then reads the file itself
                log.warning("cannot digest the loaded table: %s", type(exc).__name__)
        try:
            atomic_write(path, lambda fh: fh.write(text))
        except (OSError, OutputError) as exc:
            # only `fedanon federate` asks for the file, in its own private directory: it
            # waits for the file while this daemon lives (up to LOAD_WAIT_S), so stop (a full
            # disk, a directory gone) -- federate then names this daemon as exited
            log.error("cannot write the table digest: %s; stopping", type(exc).__name__)
            os.kill(os.getpid(), signal.SIGTERM)

    return write


def limit_shutdown(seconds: float) -> None:
    """End the process within ``seconds`` whatever hangs (call from the main thread).  A
    thread logs and exits (status 1) half a second before; the kernel's clock (SIGALRM, its
    default action: end the process) is the bound: once the interpreter is exiting (its last
    garbage collection, finalizers) no other Python thread runs, the watchdog's included."""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    early = max(seconds - 0.5, 0.0)
    threading.Thread(target=_exit_after, args=(early,), daemon=True).start()


def _exit_after(seconds: float) -> None:
    """End the process ``seconds`` from now if it is still running (a daemon thread: a
    normal exit before that ends it first)."""
    time.sleep(seconds)
    log.error("shutdown took over %g s: exiting now", seconds)
    logging.shutdown()
    os._exit(1)
