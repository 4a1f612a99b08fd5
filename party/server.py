"""The party daemon: a gRPC server with mTLS, the health service, graceful SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import threading
from concurrent import futures
from pathlib import Path
from types import FrameType

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from common.errors import ConfigError
from common.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from common.tls import TlsMaterial, add_insecure_port, add_secure_port, server_options
from party.config import PartyConfig
from party.service import PartyService

log = logging.getLogger(__name__)
MAX_WORKERS = 32
GRACE_S = 5.0


class PartyServer:
    def __init__(self, config: PartyConfig, *, insecure: bool = False) -> None:
        self.config = config
        self.tls = TlsMaterial.load(config.ca, config.cert, config.key)
        if self.tls.identity.name != config.name:
            raise ConfigError(
                f"certificate is for {self.tls.identity.name!r}, config names {config.name!r}",
                file=config.source,
            )
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="party"),
            options=server_options(),
            maximum_concurrent_rpcs=MAX_WORKERS * 4,
        )
        self.service = PartyService(config, self.tls, insecure=insecure)
        pb_grpc.add_PartyServicer_to_server(self.service, self.server)  # type: ignore[no-untyped-call]
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        if insecure:
            self.port = add_insecure_port(self.server, config.listen)
        else:
            self.port = add_secure_port(self.server, config.listen, self.tls.server_credentials())
        self.stopped = threading.Event()

    def start(self, port_file: Path | None = None) -> None:
        self.server.start()
        self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        self.health.set("fedanon.v1.Party", health_pb2.HealthCheckResponse.SERVING)
        log.info("party %s serving on port %d", self.config.name, self.port)
        if port_file is not None:
            _write_atomic(port_file, f"{self.port}\n")

    def stop(self, grace: float = GRACE_S) -> None:
        self.health.enter_graceful_shutdown()
        self.server.stop(grace).wait()
        self.stopped.set()

    def serve_forever(self, port_file: Path | None = None) -> None:
        def on_signal(signum: int, _frame: FrameType | None) -> None:
            log.info("signal %d: shutting down", signum)
            threading.Thread(target=self.stop, daemon=True).start()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.start(port_file)
        self.stopped.wait()
        log.info("party %s stopped", self.config.name)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
