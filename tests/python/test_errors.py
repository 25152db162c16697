"""Errors: every failure is an O1Error subclass with the library's code
and message, arguments are checked before anything reaches the daemon,
and a dead daemon or a closed client raises instead of hanging or
crashing."""

import errno
import os
import signal
import socket as pysocket
import threading

import o1client
import pytest
from conftest import spec
from o1client import errors as E

LONG = dict(max_tokens=2000, ignore_eos=True)


def test_daemon_not_running(tmp_path):
    with pytest.raises(o1client.DaemonGoneError) as ei:
        o1client.Client(str(tmp_path / "none.sock"))
    assert ei.value.code == -errno.ENOENT
    assert "none.sock" in str(ei.value)
    # a socket file nobody listens on
    path = str(tmp_path / "dead.sock")
    s = pysocket.socket(pysocket.AF_UNIX, pysocket.SOCK_SEQPACKET)
    s.bind(path)
    s.close()
    with pytest.raises(o1client.DaemonGoneError) as ei:
        o1client.Client(path)
    assert ei.value.code == -errno.ECONNREFUSED
    assert isinstance(ei.value, ConnectionError)


BAD_ARGS = [
    (TypeError, dict(prompt=None)),
    (TypeError, dict(prompt="a", token_ids=[1])),
    (ValueError, dict(prompt="")),
    (ValueError, dict(prompt=[])),
    (TypeError, dict(prompt=[1, "2"])),
    (ValueError, dict(prompt=[1, -1])),
    (ValueError, dict(prompt=[1, 1 << 32])),
    (TypeError, dict(prompt=[1, True])),
    (TypeError, dict(prompt=3.5)),
    (ValueError, dict(max_tokens=0)),
    (TypeError, dict(max_tokens=1.5)),
    (ValueError, dict(temperature=-0.1)),
    (ValueError, dict(temperature=float("nan"))),
    (ValueError, dict(temperature=101)),
    (TypeError, dict(temperature="hot")),
    (ValueError, dict(top_p=0)),
    (ValueError, dict(top_p=1.5)),
    (ValueError, dict(min_p=1.0)),
    (ValueError, dict(top_k=-1)),
    (ValueError, dict(seed=-1)),
    (ValueError, dict(seed=1 << 64)),
    (ValueError, dict(repeat_penalty=0)),
    (ValueError, dict(presence_penalty=2.5)),
    (ValueError, dict(frequency_penalty=-3)),
    (ValueError, dict(logprobs=21)),
    (ValueError, dict(refine_steps=17)),
    (ValueError, dict(refine_steps=1)),  # needs messages
    (ValueError, dict(stop="")),
    (ValueError, dict(stop="x" * 256)),
    (ValueError, dict(stop="a\0b")),
    (TypeError, dict(stop=[1])),
    (TypeError, dict(stop_token_ids="12")),
    (TypeError, dict(confidence=1)),
    (TypeError, dict(prompt=[{"role": "user"}])),
    (ValueError, dict(prompt=[{"role": "", "content": "x"}])),
    (ValueError, dict(prompt=[{"role": "user", "content": "a\0"}])),
    (TypeError, dict(prompt=[{"role": "user", "content": "hi"}, "x"])),
    (TypeError, dict(bogus=1)),
]


def test_bad_arguments_never_reach_the_daemon(client, reference):
    for exc, kw in BAD_ARGS:
        kw = dict(kw)
        prompt = kw.pop("prompt", [1, 2])
        with pytest.raises(exc) as ei:
            client.generate(prompt, **kw)
        assert not isinstance(ei.value, o1client.O1Error), kw
    with pytest.raises(TypeError):
        client.cancel("3")
    with pytest.raises(ValueError):
        client.latency(0)
    # o1d drops a client after 8 violations: none of the above was one
    s = spec(0)
    assert client.generate(list(s.ids), **s.params()).token_ids == \
        reference.ids(s)


def test_daemon_typed_errors(client):
    # outside the vocab: libo1client refuses it against the limits the
    # handshake gave, before anything is sent (no request id, no FINAL)
    with pytest.raises(o1client.BadRequestError) as ei:
        client.generate([1, 10**6], max_tokens=2)
    assert ei.value.code == -E.O1_E_BOUNDS
    assert ei.value.req_id is None
    assert "largest token id" in str(ei.value)
    with pytest.raises(o1client.BadRequestError) as ei:
        client.generate(b"\xff\xfe not UTF-8", max_tokens=2)
    assert ei.value.code == -E.O1_E_TOKENIZER
    assert "tokenizer" in str(ei.value)
    with pytest.raises(o1client.BadRequestError):
        client.generate([1, 2], max_tokens=100000)  # over ipc max_tokens
    # refine_steps above the daemon's refine.max_steps (4)
    with pytest.raises(o1client.BadRequestError) as ei:
        client.generate([{"role": "system", "content": "x"},
                         {"role": "user", "content": "hi"}],
                        max_tokens=2, refine_steps=16)
    print("refine_steps over the daemon's limit:", ei.value)
    # the connection survives them all
    assert client.generate([1, 2], max_tokens=2).finish_reason


def test_context_length(start_daemon):
    d = start_daemon("model.max_context_tokens=32")
    s = spec(19)
    with o1client.Client(d.socket) as c:
        with pytest.raises(o1client.ContextLengthError) as ei:
            c.generate(list(s.ids[:32]) + [1] * (32 - len(s.ids)),
                       max_tokens=4)
        assert isinstance(ei.value, o1client.BadRequestError)
        assert ei.value.code == -E.O1_E_CONTEXT
        got = c.generate([1] * 30, max_tokens=10, ignore_eos=True)
        assert got.finish_reason == "length"
        assert got.usage.completion_tokens == 2  # 30 + 2 = the context
    d.stop()


def test_quota_and_refused(start_daemon):
    d = start_daemon("ipc.max_inflight=2", "ipc.max_clients=1")
    with o1client.Client(d.socket) as c:
        with pytest.raises(o1client.QuotaError) as ei:
            o1client.Client(d.socket)  # the one client slot is taken
        assert isinstance(ei.value, o1client.RefusedError)
        assert "refused" in ei.value.message
        a = c.submit([5, 6, 7], **LONG)
        b = c.submit([5, 6, 7], **LONG)
        with pytest.raises(o1client.QuotaError):
            c.generate([5, 6, 7], max_tokens=2)
        for s in (a, b):
            s.cancel()
            assert s.completion().finish_reason == "cancelled"
        assert c.generate([5, 6, 7], max_tokens=2).finish_reason
    d.stop()


def test_draining(start_daemon, o1ctl_bin):
    import subprocess

    d = start_daemon()
    with o1client.Client(d.socket) as c:
        subprocess.run([o1ctl_bin, "drain", "--socket", d.socket],
                       check=True, capture_output=True)
        with pytest.raises(o1client.DrainingError) as ei:
            c.generate([1, 2], max_tokens=2)
        assert isinstance(ei.value, o1client.RefusedError)
        subprocess.run([o1ctl_bin, "resume", "--socket", d.socket],
                       check=True, capture_output=True)
        assert c.generate([1, 2], max_tokens=2).finish_reason
    d.stop()


def test_closed_client_raises(daemon):
    c = o1client.Client(daemon.socket)
    stream = c.submit([5, 6, 7], **LONG)
    next(iter(stream))
    c.close()
    c.close()  # twice is fine
    assert c.closed
    for call in (lambda: c.generate([1, 2], max_tokens=2),
                 lambda: c.ping(), lambda: c.cancel(1),
                 lambda: c.inflight(), lambda: c.device_output(),
                 lambda: list(stream)):
        with pytest.raises(o1client.ClientClosedError):
            call()


def test_ping(client):
    assert client.ping() > 0
    lat = client.latency(50)
    assert lat.count == 50
    assert 0 < lat.min_ns <= lat.p50_ns <= lat.p99_ns <= lat.max_ns
    s = client.submit([5, 6, 7], **LONG)
    with pytest.raises(o1client.BusyError):
        client.ping()  # only with nothing in flight
    s.close()


def test_daemon_killed_mid_stream(start_daemon):
    d = start_daemon()
    c = o1client.Client(d.socket)
    a = c.submit([5, 6, 7], timeout=120, **LONG)
    b = c.submit([8, 9, 10], timeout=120, **LONG)
    next(iter(a))
    got = []

    def read_b() -> None:
        try:
            for _ in b:
                pass
        except Exception as e:
            got.append(e)

    t = threading.Thread(target=read_b)
    t.start()
    os.kill(d.proc.pid, signal.SIGKILL)
    d.proc.wait(timeout=60)
    with pytest.raises(o1client.DaemonGoneError) as ei:
        for _ in a:
            pass
    t.join(120)
    assert not t.is_alive()
    assert len(got) == 1 and isinstance(got[0], o1client.DaemonGoneError)
    assert "gone" in str(ei.value)
    with pytest.raises(o1client.DaemonGoneError):
        c.generate([1, 2], max_tokens=2)
    # a new daemon on the same socket: reconnect and carry on
    d.start()
    c.reconnect(timeout=60)
    assert c.generate([1, 2], max_tokens=2).finish_reason
    c.close()
    d.stop()
