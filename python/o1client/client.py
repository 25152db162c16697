"""The synchronous client: Client, and Stream for one request's events.

A Client is one libo1client connection (shared memory rings with the
daemon). It is safe to share between threads, and any number of requests
may be in flight at once: ``generate(..., stream=True)`` returns at once
with a Stream, and each Stream is read independently (events of the
others are queued for them meanwhile). For the lowest latency give each
busy thread its own Client.
"""

from __future__ import annotations

import configparser
import os
import time
from typing import Any, Iterator, Optional

from . import _lib
from ._conn import Conn, Request
from ._params import Submission, check_float, check_int
from .errors import O1Error
from .types import (
    Completion,
    DeviceOutputInfo,
    Event,
    FinalEvent,
    Latency,
)

DEFAULT_SOCKET = "/run/o1d/o1d.sock"


def resolve_socket(socket: Optional[str] = None,
                   config: Optional[str] = None) -> str:
    """The socket path as o1ctl finds it: ``socket``, else $O1D_SOCKET,
    else ipc.socket of the o1d configuration file ``config``, else
    /run/o1d/o1d.sock."""
    if socket:
        return os.fspath(socket)
    env = os.environ.get("O1D_SOCKET")
    if env:
        return env
    if config is not None:
        cp = configparser.ConfigParser(interpolation=None,
                                       comment_prefixes=("#", ";"),
                                       inline_comment_prefixes=(";",))
        with open(config, encoding="utf-8") as f:
            cp.read_file(f)
        path = cp.get("ipc", "socket", fallback="").strip()
        if path:
            return path
    return DEFAULT_SOCKET


def device_output_info(conn: Conn) -> DeviceOutputInfo:
    """o1_client_device_output as a DeviceOutputInfo."""
    d = _lib.DeviceOutput()
    conn.device_output(d)
    return DeviceOutputInfo(d.area, d.rows, d.row_floats, d.row_stride_bytes,
                            d.stamps_off, d.area_bytes,
                            d.pci_bus_id.decode("ascii", "replace"),
                            bytes(d.mem_handle), bytes(d.event_handle))


class Stream:
    """The events of one request, in order, ending with its FinalEvent.

    Iterate it (``for ev in stream``); a FINAL that carries an error
    raises the matching O1Error instead (``exc.final``, ``exc.completion``
    hold what arrived). ``completion()`` reads whatever is left and
    returns the Completion. ``cancel()`` asks the daemon to stop; the
    FINAL (finish_reason "cancelled") still comes. Leaving a ``with``
    block, or ``close()``, cancels a request that is still running and
    drops its remaining events."""

    def __init__(self, conn: Conn, req: Request,
                 deadline: Optional[float]) -> None:
        self._conn = conn
        self._req = req
        self._deadline = deadline
        self._ended = False

    @property
    def id(self) -> int:
        """The request id (what Client.cancel takes)."""
        return self._req.id

    @property
    def final(self) -> Optional[FinalEvent]:
        """The FinalEvent once it was read, else None."""
        return self._req.final if self._ended else None

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        if self._ended:
            raise StopIteration
        ev = self._conn.next_event(self._req, self._deadline)
        if isinstance(ev, FinalEvent):
            self._ended = True
            exc = self._req.failure()
            if exc is not None:
                raise exc
        return ev

    def completion(self) -> Completion:
        """Reads the rest of the stream; the request's Completion."""
        for _ in self:
            pass
        if self._req.final is None:
            raise RuntimeError("the stream was closed before its FINAL")
        return self._req.completion()

    def cancel(self) -> None:
        """Asks the daemon to stop this request."""
        if not self._req.done:
            self._conn.cancel(self._req.id)

    def close(self) -> None:
        """Cancels the request if it still runs and drops its events."""
        if not self._ended and not self._req.done and \
                not self._conn.closed:
            try:
                self._conn.cancel(self._req.id)
            except O1Error:
                pass
        self._ended = True
        self._conn.forget(self._req)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Client:
    """A connection to o1d.

    ``socket``: the daemon's socket; None finds it as o1ctl does
    ($O1D_SOCKET, else ipc.socket of the configuration file ``config``,
    else /run/o1d/o1d.sock). ``name`` shows in the daemon's logs.
    ``device_outputs=True`` asks for a device output area (CUDA backend;
    see device_output() and o1client.cuda). ``spin_us``: how long a wait
    busy-polls before it sleeps (0: the library's 20 us).

    Use it as a context manager, or call close(); otherwise the
    connection closes once the client and all its streams are gone. A
    closed client raises ClientClosedError on every call."""

    def __init__(self, socket: Optional[str] = None,
                 config: Optional[str] = None, *, name: str = "python",
                 device_outputs: bool = False, spin_us: int = 0) -> None:
        if not isinstance(name, str):
            raise TypeError("name must be a str")
        check_int("spin_us", spin_us, 0, 1 << 31)
        flags = _lib.CONNECT_DEVICE_OUT if device_outputs else 0
        self.socket = resolve_socket(socket, config)
        self._conn = Conn(self.socket, name, flags, spin_us)
        self._cuda: Any = None

    # -- lifetime -------------------------------------------------------

    def close(self) -> None:
        """Closes the connection; the daemon cancels what is in flight."""
        conn = getattr(self, "_conn", None)
        if conn is None:
            return
        if self._cuda is not None:
            self._cuda.close()
            self._cuda = None
        conn.close()

    @property
    def closed(self) -> bool:
        return self._conn.closed

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def reconnect(self, timeout: float = 5.0) -> None:
        """After DaemonGoneError: connects again (retrying while nobody
        listens, up to ``timeout`` seconds). Requests in flight are lost:
        their streams raise DaemonGoneError."""
        t = check_float("timeout", timeout, 0, 86400)
        self._conn.reconnect(int(t * 1000))

    # -- generation -----------------------------------------------------

    def generate(self, prompt: Any = None, *, stream: bool = False,
                 timeout: Optional[float] = None, **params: Any) -> Any:
        """Generates from ``prompt``: a str (or bytes) of text, a list of
        token ids, or a list of chat messages ({"role", "content"}); or
        give ``messages=`` or ``token_ids=`` instead.

        Parameters (all optional): max_tokens (256), temperature (0:
        greedy), top_p, top_k, min_p, seed, repeat_penalty,
        repeat_last_n, presence_penalty, frequency_penalty, stop (str or
        list of str), stop_token_ids, logprobs (top alternatives per
        token, 0..20), confidence (per-token logprob and entropy, and a
        summary), refine_steps (self-refinement rounds, chat only),
        add_bos (default: True for plain text), ignore_eos, detokenize;
        structured output, at most one of: grammar (grammar text, see
        o1d's docs/GRAMMAR.md), json_schema (a mapping or JSON text; the
        output is JSON it validates, members in `properties` order) or
        response_format ({"type": "json_object"}, or {"type":
        "json_schema", "json_schema": {"schema": ...}}, as OpenAI's).
        A finished document ends with finish_reason "eos"; "length"
        means max_tokens cut it short. A grammar the daemon refuses
        raises GrammarError with its reason.

        Returns a Completion, or with ``stream=True`` a Stream of events
        (already submitted). ``timeout`` (seconds) bounds the whole
        request; past it O1TimeoutError is raised and, for a Completion,
        the request is cancelled. Daemon failures raise O1Error
        subclasses (QuotaError, DrainingError, BadRequestError,
        DaemonGoneError...)."""
        s = self.submit(prompt, timeout=timeout, **params)
        if stream:
            return s
        try:
            return s.completion()
        except BaseException:
            s.close()
            raise

    def submit(self, prompt: Any = None, *, timeout: Optional[float] = None,
               **params: Any) -> Stream:
        """generate(..., stream=True): submits and returns the Stream."""
        deadline = None
        if timeout is not None:
            deadline = time.monotonic() + check_float("timeout", timeout,
                                                      0, 1e9)
        sub = Submission(prompt, **params)
        req = Request(self._conn.new_id(), sub.refine)
        self._conn.submit(sub, req)
        return Stream(self._conn, req, deadline)

    def cancel(self, req_id: int) -> None:
        """Asks the daemon to stop request ``req_id`` (Stream.id)."""
        self._conn.cancel(check_int("req_id", req_id, 0, (1 << 64) - 1))

    def inflight(self) -> int:
        """Requests submitted and not yet FINAL (libo1client's count)."""
        return self._conn.inflight()

    # -- latency --------------------------------------------------------

    def ping(self) -> int:
        """One PING through the rings; the round trip in nanoseconds.
        Only with no request in flight (BusyError otherwise)."""
        return self._conn.ping_ns()

    def latency(self, count: int = 100) -> Latency:
        """``count`` pings; min, median, 99th percentile and max."""
        n = check_int("count", count, 1, 10_000_000)
        rtts = sorted(self.ping() for _ in range(n))
        return Latency(n, rtts[0], rtts[(n - 1) // 2],
                       rtts[min(n - 1, (n * 99 + 99) // 100 - 1)], rtts[-1])

    # -- device outputs -------------------------------------------------

    def device_output(self) -> DeviceOutputInfo:
        """The device output area of this connection (connect with
        device_outputs=True): geometry and CUDA IPC handles. Raises
        NoDeviceOutputError when the daemon has none for us (CPU
        backend, areas off or all held)."""
        return device_output_info(self._conn)

    def device_logits(self, prompt: Any = None, *, device: int = -1,
                      cuda_stream: Any = 0,
                      timeout: Optional[float] = None, **params: Any):
        """Generates with each token's logits row left on the GPU: an
        iterator of o1client.cuda.DeviceToken (see there). Needs
        device_outputs=True, the CUDA backend and libo1client-cuda."""
        from . import cuda

        if self._cuda is None:
            self._cuda = cuda.DeviceOutput(self._conn, device)
        s = self.submit(prompt, timeout=timeout, device_logits=True,
                        **params)
        return cuda.DeviceLogits(self._cuda, s, cuda_stream)
