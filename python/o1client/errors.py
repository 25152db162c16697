"""Exceptions: every negative code of libo1client becomes an O1Error.

libo1client returns -errno or an o1d code (common/error.h's O1_E_* range,
negated); the exception keeps that code (``code``), the library's name
for it (``o1_client_strerror``) and the sentence it left in
``o1_last_error()`` or the daemon sent. ``error_for(code, message)`` picks
the most specific class; the classes are what callers catch:

  O1Error
   +- DaemonGoneError (also ConnectionError): no daemon at the socket,
   |   or it went away while we were connected
   +- RefusedError: the daemon refused the connection or the request
   |   +- QuotaError: a per-client or global limit (O1_E_QUOTA)
   |   +- DrainingError: o1d is draining (O1_E_DRAINING)
   |   +- AccessDeniedError (also PermissionError): uid/gid not allowed
   +- BadRequestError: the daemon (or the library) found the request
   |   malformed: bounds, format, tokenizer, too long for the arena
   |   +- ContextLengthError: prompt plus output exceed the context
   |   +- GrammarError: the request's grammar or JSON schema was refused
   |       (the message says why), or allowed no token
   +- NoDeviceOutputError: no device output area for this connection
   +- VersionMismatchError: the daemon speaks another wire protocol
   +- ProtocolError: a peer broke the wire protocol
   +- BusyError: rings or arena full, or a call needing an idle client
   +- O1TimeoutError (also TimeoutError): nothing arrived in time
   +- StaleRowError: a device logits row was overwritten before the
   |   check (the reader fell a whole ring behind)
   +- ClientClosedError: the client was closed
   +- CudaError: libo1client-cuda or the CUDA runtime failed

Arguments of the wrong type or out of range raise TypeError/ValueError
before anything reaches the daemon; those are not O1Errors.
"""

from __future__ import annotations

import errno
from typing import Any, Optional

# common/error.h: enum o1_error (positive; codes are their negation)
_O1_E_BASE = 10000
O1_E_FORMAT = 10001
O1_E_VERSION = 10002
O1_E_UNSUPPORTED = 10003
O1_E_BOUNDS = 10004
O1_E_MISSING = 10005
O1_E_SHAPE = 10006
O1_E_CONFIG = 10007
O1_E_CUDA = 10008
O1_E_QUOTA = 10009
O1_E_CONTEXT = 10010
O1_E_DRAINING = 10011
O1_E_CANCELLED = 10012
O1_E_PROTOCOL = 10013
O1_E_TOKENIZER = 10014
O1_E_NO_DEVOUT = 10015
O1_E_NO_TOKENIZER = 10016
O1_E_GRAMMAR = 10017


class O1Error(Exception):
    """A failure libo1client or the daemon reported.

    Attributes: ``code`` (the negative code), ``reason`` (the library's
    description of the code), ``message`` (the details: o1_last_error()
    or the daemon's message), ``req_id`` (the request, when one failed)
    and ``completion`` (what the request produced before it failed, when
    it was a generation).
    """

    def __init__(self, code: int, message: str = "", *,
                 req_id: Optional[int] = None, reason: str = "") -> None:
        self.code = code
        self.reason = reason or _describe(code)
        self.message = message or self.reason
        self.req_id = req_id
        self.completion: Any = None
        super().__init__(self.message)

    def __str__(self) -> str:
        where = f"request {self.req_id}: " if self.req_id is not None else ""
        if self.reason and self.reason not in self.message:
            return f"{where}{self.message} ({self.reason}, {self.code})"
        return f"{where}{self.message} ({self.code})"


class DaemonGoneError(O1Error, ConnectionError):
    """No daemon at the socket, or it went away mid-session."""


class RefusedError(O1Error):
    """The daemon refused the connection or the request."""


class QuotaError(RefusedError):
    """A limit: requests in flight, clients, request slots, prompt size."""


class DrainingError(RefusedError):
    """The daemon is draining and takes no new work."""


class AccessDeniedError(RefusedError, PermissionError):
    """The socket or the daemon's uid/gid lists do not let us in."""


class BadRequestError(O1Error):
    """The request is malformed in a way only the daemon could tell."""


class ContextLengthError(BadRequestError):
    """Prompt plus generation exceed the model's context."""


class GrammarError(BadRequestError):
    """The request's grammar, JSON schema or response_format was refused
    by the daemon (``message`` has the compiler's words: the place in
    grammar text, or the schema keyword and its JSON pointer), or it
    allowed no token of the model's vocabulary."""


class NoDeviceOutputError(O1Error):
    """This connection has no device output area."""


class VersionMismatchError(O1Error):
    """The daemon speaks another wire protocol version."""


class ProtocolError(O1Error):
    """A peer broke the wire protocol."""


class BusyError(O1Error):
    """Rings or arena full, or a call that needs no request in flight."""


class O1TimeoutError(O1Error, TimeoutError):
    """Nothing arrived within the deadline."""


class StaleRowError(O1Error):
    """A device logits row was overwritten before it was checked."""


class ClientClosedError(O1Error):
    """The client was closed."""


class CudaError(O1Error):
    """libo1client-cuda or the CUDA runtime failed."""


_BY_CODE: dict[int, type[O1Error]] = {
    -errno.ENOENT: DaemonGoneError,
    -errno.ECONNREFUSED: DaemonGoneError,
    -errno.ECONNRESET: DaemonGoneError,
    -errno.EPIPE: DaemonGoneError,
    -errno.ENOTCONN: DaemonGoneError,
    -errno.EACCES: AccessDeniedError,
    -errno.EPERM: AccessDeniedError,
    -errno.EINVAL: BadRequestError,
    -errno.E2BIG: BadRequestError,
    -errno.ENAMETOOLONG: BadRequestError,
    -errno.EAGAIN: BusyError,
    -errno.EBUSY: BusyError,
    -errno.ETIMEDOUT: O1TimeoutError,
    -errno.ESTALE: StaleRowError,
    -errno.EIO: CudaError,
    -O1_E_FORMAT: BadRequestError,
    -O1_E_UNSUPPORTED: BadRequestError,
    -O1_E_BOUNDS: BadRequestError,
    -O1_E_MISSING: BadRequestError,
    -O1_E_SHAPE: BadRequestError,
    -O1_E_TOKENIZER: BadRequestError,
    -O1_E_NO_TOKENIZER: BadRequestError,
    -O1_E_GRAMMAR: GrammarError,
    -O1_E_CONTEXT: ContextLengthError,
    -O1_E_QUOTA: QuotaError,
    -O1_E_DRAINING: DrainingError,
    -O1_E_VERSION: VersionMismatchError,
    -O1_E_PROTOCOL: ProtocolError,
    -O1_E_NO_DEVOUT: NoDeviceOutputError,
    -O1_E_CUDA: CudaError,
}


def _describe(code: int) -> str:
    try:
        from . import _lib
        return _lib.strerror(code)
    except OSError:
        return ""


def error_for(code: int, message: str = "", *,
              req_id: Optional[int] = None,
              cls: Optional[type[O1Error]] = None) -> O1Error:
    """The exception for a negative libo1client or daemon code."""
    kind = cls or _BY_CODE.get(code, O1Error)
    return kind(code, message, req_id=req_id)


def raise_last(code: int, what: str = "") -> None:
    """Raises the error of a failed libo1client call made in this thread.

    Call it right after the call: o1_last_error() is per thread and the
    next failing call replaces it."""
    from . import _lib
    detail = _lib.last_error()
    message = f"{what}: {detail}" if what and detail else (detail or what)
    raise error_for(code, message)
