"""A delaying TCP proxy on loopback: every byte arrives ``delay`` seconds after it was sent.

Used by the WAN benchmark and the delayed-link tests to put a one-way delay on every link of a
federation without root or netem: each party daemon gets a proxy in front of it, and the
addresses handed to the leader (and, through Prepare, to the ring) are the proxies'.  A round
trip through a proxy therefore costs ``2 * delay``.  Latency only: bandwidth is not shaped
(a run moves tens of kilobytes).  TLS passes through untouched (the proxy never sees plain text).

    with DelayProxy(("127.0.0.1", party_port), delay=0.020) as proxy:
        address = f"127.0.0.1:{proxy.port}"

The proxy listens only on 127.0.0.1.  Stopping it closes every connection, which a test can
use to cut a link.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from types import TracebackType

CHUNK = 1 << 16


class DelayProxy:
    """One listening port forwarding to ``target`` with a fixed one-way ``delay`` (seconds)."""

    def __init__(self, target: tuple[str, int], delay: float) -> None:
        if delay < 0:
            raise ValueError("delay must be >= 0")
        self.target = target
        self.delay = delay
        self.port = 0
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True, name="wanproxy")
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # lifecycle ----------------------------------------------------------------------------
    def start(self) -> DelayProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("proxy did not start")
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        with contextlib.suppress(Exception):
            fut.result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def __enter__(self) -> DelayProxy:
        return self.start()

    def __exit__(
        self,
        _t: type[BaseException] | None,
        _e: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.stop()

    # event loop ---------------------------------------------------------------------------
    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._listen())
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            sreader, swriter = await asyncio.open_connection(*self.target)
        except OSError:
            cwriter.close()
            return
        for r, w in ((creader, swriter), (sreader, cwriter)):
            task = asyncio.ensure_future(self._pump(r, w))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy one direction; each chunk is written ``delay`` after it was read, in order."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(deliver())
        try:
            while True:
                data = await reader.read(CHUNK)
                queue.put_nowait((time.monotonic() + self.delay, data))
                if not data:
                    break
            await sender
        except (OSError, asyncio.CancelledError):
            sender.cancel()
        finally:
            writer.close()
