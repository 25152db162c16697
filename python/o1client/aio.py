"""asyncio client: AsyncClient and AsyncStream.

libo1client has no file descriptor an event loop could watch: the
completion doorbell is a futex in the shared region, and waiting means
o1_client_wait. So each AsyncClient owns one waiter thread (not one per
request) that sleeps in o1_client_wait while requests are in flight and
hands each batch of events to the loop with one call_soon_threadsafe
(the loop's self-pipe is the doorbell the loop sees). The thread sleeps
on a condition while nothing is in flight.

Nothing blocks the loop: submit and cancel take the handle's lock only
when it is free at once; when the waiter holds it (for at most one wait
slice) they run in the loop's default executor instead. connect, ping and
close always run there (they may wait on the daemon).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from typing import Any, Callable, Optional

from . import _lib
from ._conn import SLICE_NS, Conn, Request, WouldBlock
from ._params import Submission, check_float, check_int
from .client import device_output_info, resolve_socket
from .errors import ClientClosedError, O1Error, O1TimeoutError
from .types import Completion, DeviceOutputInfo, Event, FinalEvent, Latency


class AsyncStream:
    """The events of one request, for ``async for``; the asyncio twin of
    o1client.Stream (a FINAL with an error raises the O1Error)."""

    def __init__(self, client: "AsyncClient", req: Request,
                 deadline: Optional[float]) -> None:
        self._client = client
        self._req = req
        self._deadline = deadline
        self._ended = False

    @property
    def id(self) -> int:
        return self._req.id

    @property
    def final(self) -> Optional[FinalEvent]:
        return self._req.final if self._ended else None

    def __aiter__(self) -> "AsyncStream":
        return self

    async def __anext__(self) -> Event:
        if self._ended:
            raise StopAsyncIteration
        q = self._req.aq  # type: ignore[attr-defined]
        if self._deadline is None:
            ev = await q.get()
        else:
            left = self._deadline - time.monotonic()
            try:
                ev = await asyncio.wait_for(q.get(), max(left, 0))
            except asyncio.TimeoutError:
                raise O1TimeoutError(-110, "no event in time",
                                     req_id=self._req.id) from None
        if isinstance(ev, BaseException):
            self._ended = True
            raise ev
        if isinstance(ev, FinalEvent):
            self._ended = True
            exc = self._req.failure()
            if exc is not None:
                raise exc
        return ev

    async def completion(self) -> Completion:
        """Reads the rest; the request's Completion."""
        async for _ in self:
            pass
        if self._req.final is None:
            raise RuntimeError("the stream was closed before its FINAL")
        return self._req.completion()

    async def cancel(self) -> None:
        """Asks the daemon to stop this request (its FINAL still comes)."""
        if not self._req.done:
            await self._client.cancel(self._req.id)

    async def aclose(self) -> None:
        """Cancels the request if it still runs and drops its events."""
        if not self._ended and not self._req.done and \
                not self._client.closed:
            try:
                await self._client.cancel(self._req.id)
            except O1Error:
                pass
        self._ended = True
        self._client._conn.forget(self._req)

    async def __aenter__(self) -> "AsyncStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class AsyncClient:
    """A connection to o1d for asyncio programs.

    ``async with AsyncClient(socket) as c:`` connects (or ``await
    c.connect()``); arguments as for Client. Many requests may be in
    flight at once, from any number of tasks of the loop that connected
    it."""

    def __init__(self, socket: Optional[str] = None,
                 config: Optional[str] = None, *, name: str = "python",
                 device_outputs: bool = False, spin_us: int = 0) -> None:
        if not isinstance(name, str):
            raise TypeError("name must be a str")
        check_int("spin_us", spin_us, 0, 1 << 31)
        self.socket = resolve_socket(socket, config)
        self._args = (name, _lib.CONNECT_DEVICE_OUT if device_outputs
                      else 0, spin_us)
        self._conn: Optional[Conn] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._cv = threading.Condition()
        self._stopping = False
        self._thread: Optional[threading.Thread] = None

    async def connect(self) -> "AsyncClient":
        """Connects (in the executor) and starts the waiter thread."""
        if self._conn is not None:
            return self
        self._loop = asyncio.get_running_loop()
        self._conn = await self._loop.run_in_executor(
            None, functools.partial(Conn, self.socket, *self._args))
        self._thread = threading.Thread(target=self._wait_loop,
                                        name="o1client-waiter", daemon=True)
        self._thread.start()
        return self

    async def __aenter__(self) -> "AsyncClient":
        return await self.connect()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._conn is None or self._conn.closed

    def _live(self) -> Conn:
        if self._conn is None:
            raise ClientClosedError(-9, "the client is not connected")
        return self._conn

    async def close(self) -> None:
        """Stops the waiter and closes the connection."""
        conn = self._conn
        if conn is None or self._loop is None:
            return
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        await self._loop.run_in_executor(None, conn.close)
        if self._thread is not None:
            await self._loop.run_in_executor(None, self._thread.join)

    # -- the waiter thread ----------------------------------------------

    def _wait_loop(self) -> None:
        conn = self._conn
        assert conn is not None
        while True:
            with self._cv:
                while not conn._reqs and not self._stopping:
                    self._cv.wait()
                if self._stopping:
                    return
            try:
                conn.pump(SLICE_NS)
            except O1Error:
                # pump() failed every request (its sink got the error);
                # wait for new ones (they fail at submit) or the close
                with self._cv:
                    conn._reqs.clear()

    def _sink(self, batch: list) -> None:
        """In the waiter thread: one batch of (request, event) to the
        loop."""
        try:
            self._loop.call_soon_threadsafe(self._on_batch, batch)
        except RuntimeError:  # the loop is closed: nobody listens
            pass

    @staticmethod
    def _on_batch(batch: list) -> None:
        for req, obj in batch:
            req.aq.put_nowait(obj)

    # -- calls that must not block the loop ------------------------------

    async def _nowait(self, fn: Callable[[bool], Any]) -> Any:
        """fn(blocking=False) at once, or fn(True) in the executor when
        the waiter holds the handle."""
        try:
            return fn(False)
        except WouldBlock:
            return await self._loop.run_in_executor(None, fn, True)

    async def submit(self, prompt: Any = None, *,
                     timeout: Optional[float] = None,
                     **params: Any) -> AsyncStream:
        """Submits; the request's AsyncStream (see Client.generate for the
        parameters)."""
        conn = self._live()
        deadline = None
        if timeout is not None:
            deadline = time.monotonic() + check_float("timeout", timeout,
                                                      0, 1e9)
        sub = Submission(prompt, **params)
        req = Request(conn.new_id(), sub.refine, sink=self._sink)
        req.aq = asyncio.Queue()  # type: ignore[attr-defined]
        await self._nowait(lambda b: conn.submit(sub, req, b))
        with self._cv:
            self._cv.notify_all()
        return AsyncStream(self, req, deadline)

    async def generate(self, prompt: Any = None, *, stream: bool = False,
                       timeout: Optional[float] = None,
                       **params: Any) -> Any:
        """As Client.generate: a Completion, or with stream=True an
        AsyncStream."""
        s = await self.submit(prompt, timeout=timeout, **params)
        if stream:
            return s
        try:
            return await s.completion()
        except BaseException:
            await s.aclose()
            raise

    async def cancel(self, req_id: int) -> None:
        """Asks the daemon to stop request ``req_id``."""
        conn = self._live()
        rid = check_int("req_id", req_id, 0, (1 << 64) - 1)
        await self._nowait(lambda b: conn.cancel(rid, b))

    async def ping(self) -> int:
        """Round trip of one PING in nanoseconds (no request in flight)."""
        conn = self._live()
        return await self._loop.run_in_executor(None, conn.ping_ns)

    async def latency(self, count: int = 100) -> Latency:
        """``count`` pings (in the executor): min, median, p99, max."""
        n = check_int("count", count, 1, 10_000_000)
        conn = self._live()
        rtts = sorted(await self._loop.run_in_executor(
            None, lambda: [conn.ping_ns() for _ in range(n)]))
        return Latency(n, rtts[0], rtts[(n - 1) // 2],
                       rtts[min(n - 1, (n * 99 + 99) // 100 - 1)], rtts[-1])

    async def inflight(self) -> int:
        conn = self._live()
        return await self._nowait(
            lambda b: conn.call(conn._lib.o1_client_inflight, "", b))

    async def reconnect(self, timeout: float = 5.0) -> None:
        """As Client.reconnect, in the executor."""
        conn = self._live()
        t = check_float("timeout", timeout, 0, 86400)
        await self._loop.run_in_executor(None, conn.reconnect,
                                         int(t * 1000))

    def device_output(self) -> DeviceOutputInfo:
        """As Client.device_output (no waiting involved)."""
        return device_output_info(self._live())
