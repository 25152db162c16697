"""Device logits: each generated token's logits row, on the GPU, with no
copy through host memory (libo1client-cuda over CUDA IPC).

    with Client(sock, device_outputs=True) as c:
        for tok in c.device_logits(ids, max_tokens=8):
            row = torch.as_tensor(tok, device="cuda")   # zero copy
            score = row.log_softmax(-1)[target].item()
            tok.check()          # raises StaleRowError if it was lapped

Each DeviceToken exposes ``__cuda_array_interface__`` (version 3: a
float32 vector of the vocabulary's size, the daemon's memory: read it,
never write it), so torch.as_tensor,
cupy.asarray and numba take it without a copy; ``to_torch()`` and
``to_cupy()`` do that when those packages are importable, and
``to_host()`` copies the row with the CUDA runtime (standard library
only). The area is a ring the daemon does not wait on: a row is
overwritten ``rows`` tokens later, so read it soon and call ``check()``
after the reads were enqueued (it reads the row's stamp behind them in
stream order, as o1_cuda_output_check does).

Streams: o1_cuda_output_row makes ``cuda_stream`` (a cudaStream_t as an
int, or an object with ``cuda_stream``/``ptr``, such as a torch or cupy
stream; 0 is the legacy default stream) wait for the daemon's writes;
the array interface names that stream so a consumer on another stream
synchronises with it.
"""

from __future__ import annotations

import array
import ctypes
import threading
from typing import Any, Iterator, Optional

from . import _lib
from .errors import CudaError, error_for
from .types import FinalEvent, TokenEvent


def _stream_handle(s: Any) -> int:
    if s is None:
        return 0
    if isinstance(s, int) and not isinstance(s, bool):
        return s
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(s, attr, None)
        if isinstance(v, int):
            return v
    raise TypeError("cuda_stream must be an int (cudaStream_t) or a "
                    "torch/cupy stream")


def _cuda_error(code: int) -> Exception:
    raw = _lib.cuda_lib().o1_cuda_last_error()
    return error_for(code, raw.decode("utf-8", "replace") if raw else "")


class _Runtime:
    """The few CUDA runtime calls to_host() needs, from the libcudart
    that libo1client-cuda already loaded (found in /proc/self/maps)."""

    _lib: Optional[ctypes.CDLL] = None

    @classmethod
    def get(cls) -> ctypes.CDLL:
        if cls._lib is None:
            path = None
            with open("/proc/self/maps", encoding="utf-8") as f:
                for line in f:
                    if "libcudart" in line:
                        path = line.split()[-1]
                        break
            if path is None:
                raise CudaError(-5, "libcudart is not loaded")
            rt = ctypes.CDLL(path)
            rt.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                           ctypes.c_size_t, ctypes.c_int,
                                           ctypes.c_void_p]
            rt.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
            rt.cudaDeviceGetByPCIBusId.argtypes = [
                ctypes.POINTER(ctypes.c_int), ctypes.c_char_p]
            cls._lib = rt
        return cls._lib


class DeviceOutput:
    """A connection's device output area mapped in this process
    (o1_cuda_output_open); Client.device_logits makes one per client."""

    def __init__(self, conn: Any, device: int = -1) -> None:
        if isinstance(device, bool) or not isinstance(device, int) or \
                device < -1:
            raise ValueError("device must be a CUDA ordinal or -1")
        conn.device_output(_lib.DeviceOutput())  # NoDeviceOutputError
        self._lib = _lib.cuda_lib()
        opts = _lib.CudaOutputOpts(sz=ctypes.sizeof(_lib.CudaOutputOpts),
                                   device=device)
        out = ctypes.c_void_p()
        rc = conn.handle_for(lambda p: self._lib.o1_cuda_output_open(
            p, ctypes.byref(opts), ctypes.byref(out)))
        if rc:
            raise _cuda_error(rc)
        self._ptr: Optional[int] = out.value
        self._lock = threading.Lock()  # libo1client-cuda: one caller
        self.rows = self._lib.o1_cuda_output_rows(self._ptr)
        self.row_floats = self._lib.o1_cuda_output_row_floats(self._ptr)
        self.device = device if device >= 0 else self._daemon_device(conn)

    @staticmethod
    def _daemon_device(conn: Any) -> int:
        d = _lib.DeviceOutput()
        conn.device_output(d)
        ordinal = ctypes.c_int(-1)
        rc = _Runtime.get().cudaDeviceGetByPCIBusId(ctypes.byref(ordinal),
                                                    d.pci_bus_id)
        if rc:
            raise CudaError(-5, f"cudaDeviceGetByPCIBusId: error {rc}")
        return ordinal.value

    @staticmethod
    def _event(tok: TokenEvent) -> _lib.Event:
        ev = _lib.Event(type=_lib.EVENT_TOKEN, req_id=tok.req_id,
                        n_ids=len(tok.ids),
                        has_logprobs=_lib.TOKEN_HAS_DEVICE
                        if tok.dev_seq is not None else 0,
                        dev_seq=tok.dev_seq or 0)
        for i, t in enumerate(tok.ids[:8]):
            ev.ids[i] = t
        return ev

    def row(self, tok: TokenEvent, stream: int) -> int:
        """The device address of tok's row; ``stream`` waits for it."""
        ev = self._event(tok)
        ptr = ctypes.c_void_p()
        with self._lock:
            if self._ptr is None:
                raise CudaError(-9, "the device output is closed")
            rc = self._lib.o1_cuda_output_row(self._ptr, ctypes.byref(ev),
                                              stream, ctypes.byref(ptr))
            if rc:
                raise _cuda_error(rc)
        return ptr.value or 0

    def check(self, tok: TokenEvent, stream: int) -> None:
        """Raises StaleRowError when tok's row was overwritten before the
        reads enqueued on ``stream`` so far."""
        ev = self._event(tok)
        with self._lock:
            if self._ptr is None:
                raise CudaError(-9, "the device output is closed")
            rc = self._lib.o1_cuda_output_check(self._ptr, ctypes.byref(ev),
                                                stream)
            if rc:
                raise _cuda_error(rc)

    def close(self) -> None:
        with self._lock:
            ptr, self._ptr = self._ptr, None
            if ptr is not None:
                self._lib.o1_cuda_output_close(ptr)


class DeviceToken:
    """One generated token and its logits row on the GPU."""

    def __init__(self, out: DeviceOutput, event: TokenEvent, ptr: int,
                 stream: int) -> None:
        self.event = event
        self.token_id = event.ids[0]
        self.data_ptr = ptr
        self.device = out.device
        self.size = out.row_floats
        self._out = out
        self._stream = stream

    @property
    def __cuda_array_interface__(self) -> dict:
        return {
            "shape": (self.size,),
            "typestr": "<f4",
            # not flagged read-only, since torch refuses such views; the
            # row is the daemon's: never write into it
            "data": (self.data_ptr, False),
            "strides": None,
            "version": 3,
            # 1: the legacy default stream (0 is not allowed here)
            "stream": self._stream or 1,
        }

    def check(self) -> None:
        """After the reads of the row were enqueued on the stream: raises
        StaleRowError if the ring lapped the row before them."""
        self._out.check(self.event, self._stream)

    def to_host(self) -> array.array:
        """A copy of the row in host memory (array('f')), checked."""
        buf = array.array("f", bytes(4 * self.size))
        addr, _ = buf.buffer_info()
        rt = _Runtime.get()
        rc = rt.cudaMemcpyAsync(addr, self.data_ptr, 4 * self.size, 2,
                                self._stream)
        if not rc:
            rc = rt.cudaStreamSynchronize(self._stream)
        if rc:
            raise CudaError(-5, f"copying the logits row: CUDA error {rc}")
        self.check()
        return buf

    def to_torch(self) -> Any:
        """The row as a torch tensor on its GPU (no copy)."""
        import torch

        return torch.as_tensor(self, device=f"cuda:{self.device}")

    def to_cupy(self) -> Any:
        """The row as a cupy array (no copy)."""
        import cupy

        with cupy.cuda.Device(self.device):
            return cupy.asarray(self)


class DeviceLogits:
    """Iterator of DeviceToken for one device-logits request; ``final``
    and ``completion()`` as for a Stream."""

    def __init__(self, out: DeviceOutput, stream: Any,
                 cuda_stream: Any) -> None:
        self._out = out
        self._s = stream
        self._cs = _stream_handle(cuda_stream)

    @property
    def id(self) -> int:
        return self._s.id

    @property
    def final(self) -> Optional[FinalEvent]:
        return self._s.final

    def __iter__(self) -> Iterator[DeviceToken]:
        return self

    def __next__(self) -> DeviceToken:
        for ev in self._s:
            if isinstance(ev, TokenEvent) and ev.dev_seq is not None:
                return DeviceToken(self._out, ev,
                                   self._out.row(ev, self._cs), self._cs)
        raise StopIteration

    def completion(self) -> Any:
        return self._s.completion()

    def cancel(self) -> None:
        self._s.cancel()

    def close(self) -> None:
        self._s.close()

    def __enter__(self) -> "DeviceLogits":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
