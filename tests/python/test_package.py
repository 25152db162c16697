"""The package itself: its ctypes structures against the C header's
layout, its version against libo1client's SOVERSION, the socket default
(as o1ctl finds it), and an offline install with pip."""

import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import o1client
import pytest
from conftest import REPO, BUILD
from o1client import _lib

STRUCTS = {
    "o1_client_opts": _lib.ClientOpts,
    "o1_sampling": _lib.Sampling,
    "o1_submit_opts": _lib.SubmitOpts,
    "o1_event": _lib.Event,
    "o1_trace_round": _lib.TraceRound,
    "o1_trace": _lib.Trace,
    "o1_device_output": _lib.DeviceOutput,
    "o1_client_limits": _lib.ClientLimits,
}


def test_layout_matches_the_header():
    exe = os.environ.get("O1_PY_LAYOUT") or str(BUILD / "tests" / "python"
                                                / "o1_py_layout")
    out = subprocess.run([exe], check=True, capture_output=True,
                         text=True).stdout.split("\n")
    seen = set()
    for line in filter(None, out):
        key, value = line.split()
        if "." in key:
            name, fld = key.split(".")
            got = getattr(STRUCTS[name], fld).offset
        else:
            name, got = key, ctypes.sizeof(STRUCTS[key])
        seen.add(name)
        assert got == int(value), key
    assert seen == set(STRUCTS)
    # and every ctypes field is one the C program placed
    keys = {line.split()[0] for line in out if line}
    for name, cls in STRUCTS.items():
        for fld, *_ in cls._fields_:
            assert f"{name}.{fld}" in keys


def test_version_is_the_soversion():
    text = (REPO / "client" / "CMakeLists.txt").read_text()
    so = re.search(r"VERSION \$\{PROJECT_VERSION\} SOVERSION (\d+)", text)
    assert so and int(so.group(1)) == o1client.SOVERSION
    assert o1client.__version__.split(".")[0] == str(o1client.SOVERSION)
    assert o1client.library_path().endswith(f".so.{o1client.SOVERSION}") \
        or os.path.realpath(o1client.library_path()).find(".so.") > 0


def test_socket_default_as_o1ctl(tmp_path, monkeypatch):
    conf = tmp_path / "o1d.ini"
    conf.write_text("; comment\n[ipc]\nsocket = /tmp/x/from-config.sock"
                    " ; trailing\n# more\n")
    monkeypatch.delenv("O1D_SOCKET", raising=False)
    r = o1client.resolve_socket
    assert r() == "/run/o1d/o1d.sock" == o1client.DEFAULT_SOCKET
    assert r(None, str(conf)) == "/tmp/x/from-config.sock"
    monkeypatch.setenv("O1D_SOCKET", "/tmp/x/env.sock")
    assert r(None, str(conf)) == "/tmp/x/env.sock"
    assert r("/tmp/x/arg.sock", str(conf)) == "/tmp/x/arg.sock"
    monkeypatch.setenv("O1D_SOCKET", "")
    assert r(None, str(conf)) == "/tmp/x/from-config.sock"
    with pytest.raises(FileNotFoundError):
        r(None, str(tmp_path / "missing.ini"))


def test_client_uses_o1d_socket_env(daemon, monkeypatch):
    monkeypatch.setenv("O1D_SOCKET", daemon.socket)
    with o1client.Client() as c:
        assert c.socket == daemon.socket
        assert c.generate([1, 2], max_tokens=2).finish_reason


def test_pip_install_offline(tmp_path, daemon):
    if importlib.util.find_spec("pip") is None:
        pytest.skip("pip is not installed for this python")
    src = tmp_path / "src"
    shutil.copytree(REPO / "python", src,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    target = tmp_path / "site"
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index",
                    "--target", str(target), str(src)], check=True,
                   capture_output=True, env=env)
    assert (target / "o1client" / "py.typed").exists()
    # the installed copy works on its own (from another directory)
    code = ("import o1client, sys; c = o1client.Client(sys.argv[1]); "
            "print(o1client.__file__, o1client.__version__, "
            "c.generate([1, 2], max_tokens=2).finish_reason)")
    env = dict(os.environ, PYTHONPATH=str(target),
               O1_LIBO1CLIENT=o1client.library_path())
    out = subprocess.run([sys.executable, "-c", code, daemon.socket],
                         check=True, capture_output=True, text=True,
                         env=env, cwd=str(tmp_path)).stdout.split()
    assert out[0].startswith(str(target))
    assert out[1] == o1client.__version__
