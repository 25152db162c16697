"""ctypes view of libo1client (<o1/client.h>) and libo1client-cuda.

The structures below mirror the C header field for field; the tests
compare their sizes and offsets with a C program built from the header
(tests/python/layout.c), so a field added in C without a change here
fails there and not in a user's process.

Finding the library, in this order:
  1. $O1_LIBO1CLIENT: a path to the shared library;
  2. the build tree beside this package (<repo>/build/client/), when the
     package is imported from a source checkout;
  3. the system loader: libo1client.so.<SOVERSION>.
libo1client-cuda is found the same way ($O1_LIBO1CLIENT_CUDA,
<repo>/build/client/cuda/, libo1client_cuda.so.1) and only when asked for.
"""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import (
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_float,
    c_int,
    c_int64,
    c_size_t,
    c_uint,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Optional

from ._version import CUDA_SOVERSION, SOVERSION

# enum o1_connect_flag
CONNECT_DEVICE_OUT = 1 << 0

# enum o1_submit_flag
FLAG_ADD_BOS = 1 << 0
FLAG_IGNORE_EOS = 1 << 1
FLAG_NO_TEXT = 1 << 2
FLAG_CHAT = 1 << 3
FLAG_CONFIDENCE = 1 << 4
FLAG_DEVICE_LOGITS = 1 << 5
FLAG_CHAT_JSON = 1 << 7  # text is a chat request as JSON (protocol 6)

# enum o1_grammar_type (o1_submit_opts.grammar_type)
GRAMMAR_TYPE_NONE = 0
GRAMMAR_TYPE_TEXT = 1
GRAMMAR_TYPE_JSON_SCHEMA = 2
GRAMMAR_TYPE_JSON_OBJECT = 3
GRAMMAR_TYPE_TOOL_CALL = 4  # bytes: the tools a call may use

E_NO_DEVOUT = -10015
E_GRAMMAR = -10017
REFINE_MAX_ROUNDS = 17

# has_logprobs bits of a TOKEN
TOKEN_HAS_LOGPROB = 1
TOKEN_HAS_ENTROPY = 2
TOKEN_HAS_DEVICE = 4

# enum o1_event_type
EVENT_TOKEN = 1
EVENT_FINAL = 2
EVENT_ERROR = 3
EVENT_PONG = 4
EVENT_LOGPROBS = 5
EVENT_ROUND = 6
EVENT_TOP_TEXT = 7

FINISH_NAMES = ("stop", "length", "eos", "cancelled", "error")
REFINE_STOP_NAMES = (None, "steps", "confident", "repeat", "limit",
                     "cancelled", "error")


class ClientOpts(Structure):
    _fields_ = [
        ("sz", c_size_t),
        ("socket_path", c_char_p),
        ("name", c_char_p),
        ("sq_entries", c_uint32),
        ("cq_entries", c_uint32),
        ("arena_bytes", c_uint32),
        ("spin_us", c_uint32),
        ("flags", c_uint32),
    ]


class ClientLimits(Structure):
    _fields_ = [
        ("sz", c_size_t),
        ("max_prompt_bytes", c_uint32),
        ("max_prompt_tokens", c_uint32),
        ("max_tokens", c_uint32),
        ("max_inflight", c_uint32),
        ("vocab_size", c_uint32),
        ("max_grammar_bytes", c_uint32),
        ("tool_format", c_uint32),
    ]


class Sampling(Structure):
    _fields_ = [
        ("sz", c_size_t),
        ("temperature", c_float),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repeat_penalty", c_float),
        ("presence_penalty", c_float),
        ("frequency_penalty", c_float),
        ("top_k", c_uint32),
        ("repeat_last_n", c_uint32),
        ("n_logprobs", c_uint32),
        ("seed", c_uint64),
    ]


class SubmitOpts(Structure):
    _fields_ = [
        ("sz", c_size_t),
        ("req_id", c_uint64),
        ("text", c_void_p),
        ("text_len", c_size_t),
        ("ids", POINTER(c_uint32)),
        ("n_ids", c_size_t),
        ("sampling", POINTER(Sampling)),
        ("max_tokens", c_uint32),
        ("stop_ids", POINTER(c_uint32)),
        ("n_stop_ids", c_size_t),
        ("stop_strings", POINTER(c_char_p)),
        ("n_stop_strings", c_size_t),
        ("flags", c_uint32),
        ("refine_steps", c_uint32),
        ("grammar_type", c_uint32),
        ("grammar", c_void_p),
        ("grammar_len", c_size_t),
    ]


class Event(Structure):
    _fields_ = [
        ("type", c_int),
        ("req_id", c_uint64),
        ("n_ids", c_uint32),
        ("ids", c_uint32 * 8),
        ("has_logprobs", c_int),
        ("logprobs", c_float * 8),
        ("text_len", c_size_t),
        ("text", c_char * 49),
        ("finish", c_int),
        ("error", c_int),
        ("prompt_tokens", c_uint32),
        ("generated_tokens", c_uint32),
        ("message", c_char * 97),
        ("client_ns", c_uint64),
        ("daemon_ns", c_uint64),
        ("position", c_uint32),
        ("n_top", c_uint32),
        ("top_ids", c_uint32 * 14),
        ("top_logprobs", c_float * 14),
        ("round", c_uint32),
        ("entropy", c_float),
        ("mean_logprob", c_float),
        ("min_logprob", c_float),
        ("mean_entropy", c_float),
        ("conf_tokens", c_uint32),
        ("rounds", c_uint32),
        ("cached_tokens", c_uint32),
        ("refine_stop", c_int),
        ("text_bytes", c_uint32),
        ("latency_ns", c_uint64),
        ("dev_seq", c_uint32),
        ("top_first", c_uint32),
        ("top_off", c_uint8 * 20),
        ("top_len", c_uint8 * 20),
        ("top_cut", c_uint8 * 20),
        ("top_text", c_char * 112),
    ]


class TraceRound(Structure):
    _fields_ = [
        ("round", c_uint32),
        ("prompt_tokens", c_uint32),
        ("cached_tokens", c_uint32),
        ("generated_tokens", c_uint32),
        ("mean_logprob", c_float),
        ("min_logprob", c_float),
        ("mean_entropy", c_float),
        ("latency_ns", c_uint64),
        ("finish", c_int),
        ("stop", c_int),
        ("text", c_void_p),
        ("text_len", c_size_t),
        ("complete", c_int),
    ]


class Trace(Structure):
    _fields_ = [
        ("n_rounds", c_uint32),
        ("rounds", TraceRound * REFINE_MAX_ROUNDS),
        ("stop", c_int),
        ("done", c_int),
    ]


class DeviceOutput(Structure):
    _fields_ = [
        ("sz", c_size_t),
        ("area", c_uint32),
        ("rows", c_uint32),
        ("row_floats", c_uint32),
        ("row_stride_bytes", c_uint32),
        ("stamps_off", c_uint64),
        ("area_bytes", c_uint64),
        ("pci_bus_id", c_char * 16),
        ("mem_handle", c_uint8 * 64),
        ("event_handle", c_uint8 * 64),
    ]


class CudaOutputOpts(Structure):
    _fields_ = [("sz", c_size_t), ("device", c_int)]


# (name, restype, argtypes) of every libo1client symbol used here.
_PROTOS = (
    ("o1_client_connect", c_int, [POINTER(ClientOpts), POINTER(c_void_p)]),
    ("o1_client_close", None, [c_void_p]),
    ("o1_client_reconnect", c_int, [c_void_p, c_int]),
    ("o1_client_submit", c_int, [c_void_p, POINTER(SubmitOpts)]),
    ("o1_client_cancel", c_int, [c_void_p, c_uint64]),
    ("o1_client_poll", c_int, [c_void_p, POINTER(Event)]),
    ("o1_client_wait", c_int, [c_void_p, POINTER(Event), c_int64]),
    ("o1_client_ping", c_int, [c_void_p, POINTER(c_uint64)]),
    ("o1_client_inflight", c_uint, [c_void_p]),
    ("o1_client_device_output", c_int, [c_void_p, POINTER(DeviceOutput)]),
    ("o1_client_limits", c_int, [c_void_p, POINTER(ClientLimits)]),
    ("o1_client_strerror", c_char_p, [c_int]),
    ("o1_last_error", c_char_p, []),
    ("o1_trace_init", None, [POINTER(Trace)]),
    ("o1_trace_add", c_int, [POINTER(Trace), POINTER(Event)]),
    ("o1_trace_free", None, [POINTER(Trace)]),
)

_CUDA_PROTOS = (
    ("o1_cuda_output_open", c_int,
     [c_void_p, POINTER(CudaOutputOpts), POINTER(c_void_p)]),
    ("o1_cuda_output_close", None, [c_void_p]),
    ("o1_cuda_output_row", c_int,
     [c_void_p, POINTER(Event), c_void_p, POINTER(c_void_p)]),
    ("o1_cuda_output_check", c_int, [c_void_p, POINTER(Event), c_void_p]),
    ("o1_cuda_output_rows", c_uint32, [c_void_p]),
    ("o1_cuda_output_row_floats", c_uint32, [c_void_p]),
    ("o1_cuda_last_error", c_char_p, []),
)


def _repo_build_dir() -> Optional[Path]:
    """<repo>/build when this package sits in <repo>/python/o1client."""
    here = Path(__file__).resolve().parent
    root = here.parent.parent
    if (root / "client" / "include" / "o1" / "client.h").is_file():
        return root / "build"
    return None


def _candidates(env: str, rel: str, soname: str) -> list[str]:
    out = []
    if os.environ.get(env):
        return [os.environ[env]]
    build = _repo_build_dir()
    if build is not None and (build / rel / soname).exists():
        out.append(str(build / rel / soname))
    out.append(soname)
    return out


def _open(env: str, rel: str, soname: str) -> ctypes.CDLL:
    errors = []
    for path in _candidates(env, rel, soname):
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise OSError(f"cannot load {soname} (set ${env} to its path): "
                  + "; ".join(errors))


def _bind(lib: ctypes.CDLL, protos) -> ctypes.CDLL:
    for name, res, args in protos:
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_cuda: Optional[ctypes.CDLL] = None


def lib() -> ctypes.CDLL:
    """libo1client, loaded and typed on first use."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib = _bind(_open("O1_LIBO1CLIENT", "client",
                                   f"libo1client.so.{SOVERSION}"), _PROTOS)
    return _lib


def cuda_lib() -> ctypes.CDLL:
    """libo1client-cuda (needs the CUDA runtime), loaded on first use."""
    global _cuda
    if _cuda is None:
        lib()  # its symbols resolve against the same libo1client
        with _lock:
            if _cuda is None:
                _cuda = _bind(
                    _open("O1_LIBO1CLIENT_CUDA", "client/cuda",
                          f"libo1client_cuda.so.{CUDA_SOVERSION}"),
                    _CUDA_PROTOS)
    return _cuda


def library_path() -> str:
    """The file libo1client was loaded from (for diagnostics)."""
    return lib()._name


def last_error() -> str:
    """o1_last_error() of this thread, decoded."""
    raw = lib().o1_last_error()
    return raw.decode("utf-8", "replace") if raw else ""


def strerror(code: int) -> str:
    raw = lib().o1_client_strerror(code)
    return raw.decode("utf-8", "replace") if raw else "unknown error"
