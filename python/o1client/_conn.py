"""One libo1client handle shared by threads, and the requests on it.

libo1client's handle is not thread-safe: every call on it must be
serialised. _Conn does that with one lock (``_api``) and routes the
events of all requests in flight to per-request queues, so any number of
requests, from any number of threads, share one connection.

Waiting (leader/followers): a thread that needs an event of its request
and finds its queue empty becomes the *pumper* if nobody is: it holds
``_api`` while it sleeps in o1_client_wait for at most one slice
(SLICE_NS), then hands every event it got (and the ones already queued
in the completion ring, in one batch) to their requests' queues and
wakes the followers, which sleep on ``_gate`` meanwhile. libo1client
offers no file descriptor for its completion doorbell (a futex in the
shared region), so a slice bounds how long another thread's submit or
cancel waits for ``_api``: such a thread announces itself in ``_want``,
and a pumper lets every announced thread through before it sleeps again.

Invariants:
  - ``_ptr`` is used only with ``_api`` held, and is None once closed;
  - a request is in ``_reqs`` before its submission is published (both
    under ``_api``), so the pumper can always route its first event, and
    leaves it with its FINAL or when the connection dies;
  - ``_pumping``, ``_want`` and ``_dead`` change only under ``_gate``;
    at most one thread pumps at a time.
"""

from __future__ import annotations

import codecs
import collections
import ctypes
import errno
import itertools
import json
import threading
import time
from typing import Callable, Optional

from . import _lib, _tools
from .errors import (
    ClientClosedError,
    DaemonGoneError,
    O1Error,
    O1TimeoutError,
    error_for,
    raise_last,
)
from .types import (
    Completion,
    Confidence,
    ErrorEvent,
    Event,
    FinalEvent,
    LogprobsEvent,
    RefineRound,
    TopTextEvent,
    RoundEvent,
    TokenEvent,
    TokenLogprob,
    Usage,
)

SLICE_NS = 10_000_000  # longest sleep in o1_client_wait while pumping
BATCH_MAX = 256  # events taken per pump
_TEXT_OFF = _lib.Event.text.offset
_TOP_TEXT_OFF = _lib.Event.top_text.offset


class WouldBlock(Exception):
    """The lock is held elsewhere and the caller asked not to wait."""


def _finish(code: int) -> str:
    names = _lib.FINISH_NAMES
    return names[code] if 0 <= code < len(names) else f"finish {code}"


def _refine_stop(code: int) -> Optional[str]:
    names = _lib.REFINE_STOP_NAMES
    return names[code] if 0 <= code < len(names) else f"stop {code}"


class Request:
    """One request's state: its queue of events and what its Completion
    will hold. accept() runs in the pumping thread with ``_api`` held."""

    def __init__(self, req_id: int, refine: bool,
                 sink: Optional[Callable[["Request", object], None]] = None
                 ) -> None:
        self.id = req_id
        self.queue: collections.deque = collections.deque()
        self.sink = sink  # set for asyncio requests (see aio.py)
        self.done = False
        self.discard = False
        self.final: Optional[FinalEvent] = None
        self.ids: list[int] = []  # the current round's answer
        self.round_ids: dict[int, list[int]] = {}
        self.text: list[str] = []
        self.tokens: list[tuple[int, Optional[float], Optional[float]]] = []
        self.top: dict[int, list[tuple[int, float]]] = {}
        self.top_text: dict[int, list[bytes]] = {}
        # with tools: (the connection's tool format, the tools' JSON)
        self.tools: Optional[tuple[int, str]] = None
        self.round = 0
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")
        self.trace: Optional[_lib.Trace] = None
        self.rounds: list[RefineRound] = []
        self.message = ""  # an ERROR event's, e.g. a refused grammar's
        if refine:
            self.trace = _lib.Trace()
            _lib.lib().o1_trace_init(ctypes.byref(self.trace))

    def free(self) -> None:
        if self.trace is not None:
            _lib.lib().o1_trace_free(ctypes.byref(self.trace))
            self.trace = None

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass

    def _new_round(self, r: int) -> None:
        self.round = r
        self.ids, self.tokens, self.text, self.top = [], [], [], {}
        self.top_text = {}
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")

    def _token(self, ev: _lib.Event) -> TokenEvent:
        n, has = ev.n_ids, ev.has_logprobs
        if ev.round != self.round:
            self._new_round(ev.round)
        ids = tuple(ev.ids[:n])
        raw = ctypes.string_at(ctypes.addressof(ev) + _TEXT_OFF, ev.text_len)
        text = self._dec.decode(raw)
        lps = tuple(ev.logprobs[:n]) if has & _lib.TOKEN_HAS_LOGPROB \
            else None
        ent = ev.entropy if has & _lib.TOKEN_HAS_ENTROPY else None
        self.ids.extend(ids)
        self.round_ids.setdefault(ev.round, []).extend(ids)
        self.text.append(text)
        for i, t in enumerate(ids):
            self.tokens.append((t, lps[i] if lps else None, ent))
        return TokenEvent(ev.req_id, ids, text, lps, ent, ev.round,
                          ev.dev_seq if has & _lib.TOKEN_HAS_DEVICE
                          else None)

    def _logprobs(self, ev: _lib.Event) -> LogprobsEvent:
        n = ev.n_top
        top = tuple(zip(ev.top_ids[:n], ev.top_logprobs[:n]))
        self.top.setdefault(ev.position, []).extend(top)
        return LogprobsEvent(ev.req_id, ev.position, top)

    def _top_text(self, ev: _lib.Event) -> TopTextEvent:
        base = ctypes.addressof(ev) + _TOP_TEXT_OFF
        texts = tuple(ctypes.string_at(base + ev.top_off[i], ev.top_len[i])
                      for i in range(ev.n_top))
        got = self.top_text.setdefault(ev.position, [])
        if len(got) == ev.top_first:
            got.extend(texts)
        return TopTextEvent(ev.req_id, ev.position, ev.top_first, texts)

    def accept(self, ev: _lib.Event) -> Optional[Event]:
        """The Python event for ev (a struct reused by the caller)."""
        if self.trace is not None:
            _lib.lib().o1_trace_add(ctypes.byref(self.trace),
                                    ctypes.byref(ev))
        t = ev.type
        if t == _lib.EVENT_TOKEN:
            return self._token(ev)
        if t == _lib.EVENT_LOGPROBS:
            return self._logprobs(ev)
        if t == _lib.EVENT_TOP_TEXT:
            return self._top_text(ev)
        if t == _lib.EVENT_ROUND:
            return RoundEvent(ev.req_id, ev.round, _finish(ev.finish),
                              _refine_stop(ev.refine_stop),
                              ev.prompt_tokens, ev.generated_tokens,
                              ev.cached_tokens, ev.mean_logprob,
                              ev.min_logprob, ev.mean_entropy,
                              ev.text_bytes, ev.latency_ns)
        if t == _lib.EVENT_FINAL:
            self.text.append(self._dec.decode(b"", True))
            self.done = True
            self.rounds = self._rounds()
            self.free()
            self.final = FinalEvent(
                ev.req_id, _finish(ev.finish), ev.error, ev.prompt_tokens,
                ev.generated_tokens, ev.cached_tokens, ev.mean_logprob,
                ev.min_logprob, ev.mean_entropy, ev.conf_tokens, ev.rounds,
                _refine_stop(ev.refine_stop))
            return self.final
        if t == _lib.EVENT_ERROR:
            self.message = ev.message.decode("utf-8", "replace")
            return ErrorEvent(ev.req_id, ev.error, self.message)
        return None

    def failure(self) -> Optional[O1Error]:
        """The exception for a FINAL that carries an error, else None."""
        f = self.final
        if f is None or f.finish_reason != "error":
            return None
        exc = error_for(f.error, self.message or _lib.strerror(f.error),
                        req_id=self.id)
        exc.final = f  # type: ignore[attr-defined]
        exc.completion = self.completion()
        return exc

    def _rounds(self) -> list[RefineRound]:
        if self.trace is None:
            return []
        out = []
        for i in range(self.trace.n_rounds):
            r = self.trace.rounds[i]
            raw = ctypes.string_at(r.text, r.text_len) if r.text else b""
            out.append(RefineRound(
                r.round, raw.decode("utf-8", "replace"),
                tuple(self.round_ids.get(r.round, ())), r.prompt_tokens,
                r.cached_tokens, r.generated_tokens, r.mean_logprob,
                r.min_logprob, r.mean_entropy, r.latency_ns,
                _finish(r.finish), _refine_stop(r.stop), bool(r.complete)))
        return out

    def _token_logprobs(self) -> Optional[list[TokenLogprob]]:
        have = any(lp is not None or e is not None
                   for _, lp, e in self.tokens) or self.top
        if not have:
            return None
        return [TokenLogprob(t, lp, e, tuple(self.top.get(i, ())),
                             tuple(self.top_text.get(i, ())))
                for i, (t, lp, e) in enumerate(self.tokens)]

    def completion(self) -> Completion:
        """The Completion of a finished request."""
        f = self.final
        assert f is not None
        conf = Confidence(f.mean_logprob, f.min_logprob, f.mean_entropy,
                          f.conf_tokens) if f.conf_tokens else None
        rounds = self.rounds
        text = "".join(self.text)
        if rounds and rounds[-1].round == self.round:
            text = rounds[-1].text
        finish, calls, content = f.finish_reason, None, None
        if self.tools is not None and finish != "error":
            content, calls = _tools.parse(self.tools[0], text,
                                          json.loads(self.tools[1]))
            if calls:
                finish = "tool_calls"
            else:  # as OpenAI's message.tool_calls: None without calls
                calls = None
        return Completion(self.id, text, list(self.ids), finish,
                          Usage(f.prompt_tokens, f.generated_tokens,
                                f.cached_tokens),
                          self._token_logprobs(), conf, rounds,
                          f.refine_stop, calls, content)


class Conn:
    """A connected handle, its lock and its requests (see the file head)."""

    def __init__(self, socket: str, name: str, flags: int = 0,
                 spin_us: int = 0) -> None:
        lib = _lib.lib()
        self._opts = _lib.ClientOpts(sz=ctypes.sizeof(_lib.ClientOpts),
                                     socket_path=socket.encode(),
                                     name=name.encode(), spin_us=spin_us,
                                     flags=flags)
        ptr = ctypes.c_void_p()
        rc = lib.o1_client_connect(ctypes.byref(self._opts),
                                   ctypes.byref(ptr))
        if rc:
            raise_last(rc)
        self.socket = socket
        self._lib = lib
        self._ptr: Optional[int] = ptr.value
        self._api = threading.Lock()
        self._gate = threading.Condition(threading.Lock())
        self._want = 0
        self._pumping = False
        self._dead: Optional[O1Error] = None
        self._reqs: dict[int, Request] = {}
        self._ev = _lib.Event()
        self._ids = itertools.count(1)
        self.errors: collections.deque = collections.deque(maxlen=64)

    # -- the lock -------------------------------------------------------

    def _enter(self, blocking: bool = True) -> int:
        """Takes ``_api`` (announced in ``_want`` when contended) and
        returns the handle; raises if the connection is closed, and
        WouldBlock when not blocking and another thread holds it."""
        if not self._api.acquire(False):
            if not blocking:
                raise WouldBlock()
            with self._gate:
                self._want += 1
            try:
                self._api.acquire()
            finally:
                with self._gate:
                    self._want -= 1
                    self._gate.notify_all()
        if self._ptr is None:
            self._api.release()
            raise self._dead or ClientClosedError(-errno.EBADF,
                                                  "the client is closed")
        return self._ptr

    def call(self, fn: Callable[[int], int], what: str = "",
             blocking: bool = True) -> int:
        """fn(handle) with the lock held; a negative result raises."""
        ptr = self._enter(blocking)
        try:
            rc = fn(ptr)
            if rc < 0:
                raise_last(rc, what)
            return rc
        finally:
            self._api.release()

    @property
    def closed(self) -> bool:
        return self._ptr is None

    # -- requests -------------------------------------------------------

    def new_id(self) -> int:
        return next(self._ids)

    def submit(self, sub, req: Request, blocking: bool = True) -> None:
        """Registers req and publishes its submission; a request with
        tools learns how the daemon's model writes calls (its welcome's
        tool_format, for reading them back)."""
        sub.opts.req_id = req.id
        ptr = self._enter(blocking)
        try:
            if self._dead is not None:
                raise self._dead
            if getattr(sub, "tools", None) is not None:
                lim = _lib.ClientLimits(sz=ctypes.sizeof(_lib.ClientLimits))
                if self._lib.o1_client_limits(ptr, ctypes.byref(lim)) == 0:
                    req.tools = (lim.tool_format, sub.tools)
            self._reqs[req.id] = req
            rc = self._lib.o1_client_submit(ptr, ctypes.byref(sub.opts))
            if rc < 0:
                del self._reqs[req.id]
                raise_last(rc, "submit")
        finally:
            self._api.release()

    def cancel(self, req_id: int, blocking: bool = True) -> None:
        self.call(lambda p: self._lib.o1_client_cancel(p, req_id), "cancel",
                  blocking)

    def forget(self, req: Request) -> None:
        """Drops what still arrives for req (a stream closed early)."""
        req.discard = True
        req.queue.clear()

    def inflight(self) -> int:
        return self.call(self._lib.o1_client_inflight)

    # -- events ---------------------------------------------------------

    def _route(self, ev: _lib.Event, out: list) -> None:
        req = self._reqs.get(ev.req_id)
        if req is None:
            if ev.type == _lib.EVENT_ERROR:
                self.errors.append(ErrorEvent(
                    ev.req_id, ev.error,
                    ev.message.decode("utf-8", "replace")))
            return
        obj = req.accept(ev)
        if req.done:
            self._reqs.pop(req.id, None)
        if obj is not None and not req.discard:
            out.append((req, obj))

    def _take(self, slice_ns: int) -> list:
        """One pump: waits up to slice_ns for events, returns them routed
        as (request, event) pairs. Raises what the wait raised."""
        ptr = self._enter()
        out: list = []
        try:
            ev, lib = self._ev, self._lib
            rc = lib.o1_client_wait(ptr, ctypes.byref(ev), slice_ns)
            if rc == -errno.ETIMEDOUT:
                return out
            if rc < 0:
                raise_last(rc, "waiting for events")
            self._route(ev, out)
            n = 1
            while n < BATCH_MAX and lib.o1_client_poll(ptr,
                                                       ctypes.byref(ev)) == 1:
                self._route(ev, out)
                n += 1
            return out
        finally:
            self._api.release()

    def _deliver(self, items: list) -> None:
        sinks: dict = {}
        with self._gate:
            for req, obj in items:
                if req.sink is not None:
                    sinks.setdefault(req.sink, []).append((req, obj))
                else:
                    req.queue.append(obj)
            self._gate.notify_all()
        for sink, batch in sinks.items():
            sink(batch)

    def pump(self, slice_ns: int = SLICE_NS) -> None:
        """One round of waiting and routing (the caller is the pumper).
        A dead daemon fails every request in flight."""
        try:
            items = self._take(slice_ns)
        except ClientClosedError:
            raise
        except O1Error as e:  # the daemon went away, or broke its rings
            self.kill(e)
            raise
        if items:
            self._deliver(items)

    def kill(self, exc: O1Error, final: bool = False) -> None:
        """Marks the connection dead: every waiter gets exc (the first
        cause stays, unless final: the client was closed)."""
        with self._gate:
            if self._dead is None or final:
                self._dead = exc
            reqs = list(self._reqs.values())
            self._reqs.clear()
            self._gate.notify_all()
        sinks = {r.sink for r in reqs if r.sink is not None}
        for sink in sinks:
            sink([(r, self._dead) for r in reqs if r.sink is sink])

    def next_event(self, req: Request, deadline: Optional[float]) -> Event:
        """The next event of req, pumping while nobody else does. Raises
        the connection's death, or O1TimeoutError past deadline."""
        while True:
            with self._gate:
                while True:
                    if req.queue:
                        return req.queue.popleft()
                    if self._dead is not None:
                        raise self._dead
                    left = None if deadline is None else \
                        deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise O1TimeoutError(-errno.ETIMEDOUT,
                                             "no event in time",
                                             req_id=req.id)
                    if not self._pumping:
                        break
                    self._gate.wait(left)
                self._pumping = True
                while self._want:  # let announced callers in first
                    self._gate.wait()
            try:
                slice_ns = SLICE_NS if left is None else \
                    max(1, min(SLICE_NS, int(left * 1e9)))
                self.pump(slice_ns)
            finally:
                with self._gate:
                    self._pumping = False
                    self._gate.notify_all()

    # -- the rest of the API ----------------------------------------------

    def ping_ns(self) -> int:
        rtt = ctypes.c_uint64()
        self.call(lambda p: self._lib.o1_client_ping(p, ctypes.byref(rtt)),
                  "ping")
        return rtt.value

    def reconnect(self, timeout_ms: int) -> None:
        """o1_client_reconnect; requests in flight fail with the old
        connection's death (DaemonGoneError)."""
        ptr = self._enter()
        try:
            gone = self._dead or DaemonGoneError(
                -errno.ECONNRESET, "reconnected: the request was lost")
            self.kill(gone)
            rc = self._lib.o1_client_reconnect(ptr, timeout_ms)
            if rc < 0:
                raise_last(rc, "reconnect")
            with self._gate:
                self._dead = None
        finally:
            self._api.release()

    def device_output(self, out: _lib.DeviceOutput) -> None:
        out.sz = ctypes.sizeof(out)
        self.call(lambda p: self._lib.o1_client_device_output(
            p, ctypes.byref(out)), "device output")

    def handle_for(self, fn: Callable[[int], object]) -> object:
        """fn(handle) with the lock held (for libo1client-cuda's open)."""
        ptr = self._enter()
        try:
            return fn(ptr)
        finally:
            self._api.release()

    def __del__(self) -> None:  # nobody holds the client or a stream
        try:
            self.close()
        except Exception:
            pass

    def close(self) -> None:
        """Closes the handle (waits for a pumping thread's slice)."""
        with self._api:
            ptr, self._ptr = self._ptr, None
            if ptr is None:
                return
            self._lib.o1_client_close(ptr)
        self.kill(ClientClosedError(-errno.EBADF, "the client is closed"),
                  final=True)
