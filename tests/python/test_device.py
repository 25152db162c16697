"""Device outputs. On the CPU backend (always): the daemon has no device
output area, and every way to ask for one says so with
NoDeviceOutputError. On a CUDA build with a GPU (O1_LIBO1CLIENT_CUDA set
by CMake, and a device present): each token's logits row, read through
CUDA IPC, against `o1model run --dump-logits` on the same ids; the stamp
check; torch and cupy views when those are importable."""

import array
import ctypes
import os
import subprocess

import o1client
import pytest
from conftest import spec


def test_no_device_output_on_cpu(start_daemon, reference):
    d = start_daemon("ipc.device_outputs=2")
    s = spec(0)
    with o1client.Client(d.socket, device_outputs=True) as c:
        with pytest.raises(o1client.NoDeviceOutputError) as ei:
            c.device_output()
        assert "no device output area" in str(ei.value)
        with pytest.raises(o1client.NoDeviceOutputError):
            c.device_logits(list(s.ids), max_tokens=4)
        # asked for anyway: one FINAL with the error, nothing else
        stream = c.submit(list(s.ids), max_tokens=4, device_logits=True)
        with pytest.raises(o1client.NoDeviceOutputError):
            list(stream)
        assert stream.final is not None and stream.final.error
        assert c.generate(list(s.ids), **s.params()).token_ids == \
            reference.ids(s)
    with o1client.Client(d.socket) as c:  # not asked for at connect
        with pytest.raises(o1client.BadRequestError):
            c.device_output()
    d.stop()


def _gpu_or_skip() -> str:
    path = os.environ.get("O1_LIBO1CLIENT_CUDA")
    if not path or not os.path.exists(path):
        pytest.skip("libo1client-cuda not built (CUDA off)")
    cuda = ctypes.CDLL(path)  # loads the CUDA runtime it links
    del cuda
    from o1client.cuda import _Runtime
    n = ctypes.c_int(0)
    rt = _Runtime.get()
    if rt.cudaGetDeviceCount(ctypes.byref(n)) or n.value < 1:
        pytest.skip("no CUDA device")
    return path


def _dump_logits(o1model, model, ids, vocab, tmp_path):
    out = tmp_path / "logits.f32"
    subprocess.run([o1model, "run", model, "--backend", "cuda",
                    "--max-tokens", "0", "--dump-logits", str(out),
                    "--ids", " ".join(map(str, ids))], check=True,
                   capture_output=True)
    a = array.array("f")
    a.frombytes(out.read_bytes())
    assert len(a) == len(ids) * vocab
    return [a[i * vocab:(i + 1) * vocab] for i in range(len(ids))]


def test_device_logits_gpu(start_daemon, o1model_bin, model, tmp_path):
    _gpu_or_skip()
    d = start_daemon("backend.device=cuda:0", "ipc.device_outputs=1",
                     "ipc.device_output_rows=4")
    prompt = list(spec(2).ids)
    with o1client.Client(d.socket, device_outputs=True) as c:
        info = c.device_output()
        assert info.rows == 4 and info.row_floats > 0
        assert len(info.mem_handle) == 64 and info.pci_bus_id
        toks, rows = [], []
        for tok in c.device_logits(prompt, max_tokens=12, ignore_eos=True):
            rows.append(tok.to_host())  # copies, then checks the stamp
            toks.append(tok)
        ids = [t.token_id for t in toks]
        assert len(ids) == 12
        # greedy: each row's argmax is its token
        for t, row in zip(ids, rows):
            assert max(range(len(row)), key=row.__getitem__) == t
        ref = _dump_logits(o1model_bin, model, prompt + ids[:-1],
                           info.row_floats, tmp_path)
        for i, row in enumerate(rows):
            want = ref[len(prompt) - 1 + i]
            err = max(abs(a - b) for a, b in zip(row, want))
            scale = max(abs(b) for b in want)
            assert err <= 2e-2 * max(1.0, scale), f"token {i}: {err}"
        # the ring of 4 rows lapped the first token's row long ago
        with pytest.raises(o1client.StaleRowError):
            toks[0].check()
        toks[-1].check()
        _views(c, prompt)
    d.stop()


def _views(c, prompt):
    """torch and cupy see the row in place (each skipped if missing)."""
    for name in ("torch", "cupy"):
        try:
            __import__(name)
        except ImportError:
            continue
        for tok in c.device_logits(prompt, max_tokens=2):
            host = tok.to_host()
            view = tok.to_torch() if name == "torch" else tok.to_cupy()
            got = view.cpu().tolist() if name == "torch" else view.get()
            assert list(got) == list(host)
            tok.check()
