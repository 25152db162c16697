"""o1client: Python client of o1d, over libo1client (shared-memory rings).

    from o1client import Client
    with Client() as c:                      # socket found as o1ctl does
        print(c.generate("Hello", max_tokens=16).text)
        for ev in c.generate("Hello", stream=True):
            ...
        print(c.ping(), "ns")

AsyncClient is the asyncio form; o1client.cuda reads device logits.
Only the standard library is needed; libo1client.so.<SOVERSION> is found
through $O1_LIBO1CLIENT, a source checkout's build/ or the system loader.
"""

from ._version import SOVERSION, __version__
from .aio import AsyncClient, AsyncStream
from .client import DEFAULT_SOCKET, Client, Stream, resolve_socket
from .errors import (
    AccessDeniedError,
    BadRequestError,
    BusyError,
    ClientClosedError,
    ContextLengthError,
    CudaError,
    DaemonGoneError,
    DrainingError,
    GrammarError,
    NoDeviceOutputError,
    O1Error,
    O1TimeoutError,
    ProtocolError,
    QuotaError,
    RefusedError,
    StaleRowError,
    VersionMismatchError,
)
from .types import (
    Completion,
    Confidence,
    DeviceOutputInfo,
    ErrorEvent,
    Event,
    FinalEvent,
    Latency,
    LogprobsEvent,
    RefineRound,
    RoundEvent,
    TokenEvent,
    TokenLogprob,
    TopTextEvent,
    Usage,
)
from ._tools import ToolCall

__all__ = [
    "SOVERSION", "__version__", "Client", "Stream", "AsyncClient",
    "AsyncStream", "DEFAULT_SOCKET", "resolve_socket",
    "O1Error", "DaemonGoneError", "RefusedError", "QuotaError",
    "DrainingError", "AccessDeniedError", "BadRequestError",
    "ContextLengthError", "GrammarError", "NoDeviceOutputError",
    "VersionMismatchError",
    "ProtocolError", "BusyError", "O1TimeoutError", "StaleRowError",
    "ClientClosedError", "CudaError",
    "Completion", "Confidence", "DeviceOutputInfo", "ErrorEvent", "Event",
    "FinalEvent", "Latency", "LogprobsEvent", "RefineRound", "RoundEvent",
    "TokenEvent", "TokenLogprob", "ToolCall", "TopTextEvent", "Usage",
]


def library_path() -> str:
    """The libo1client file this package loaded."""
    from ._lib import library_path as _path
    return _path()
