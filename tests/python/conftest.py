"""Fixtures of the o1client tests: a real o1d on the CPU backend, serving
the tiny model that `o1model make --preset tiny` makes (the preset and
the o1d settings of tests/daemon/daemon_harness.c), and references from
`o1model run` with the same parameters.

The binaries come from the environment that tests/python/CMakeLists.txt
sets (O1D_BIN, O1MODEL_BIN, O1CTL_BIN, O1_PY_LAYOUT, O1_LIBO1CLIENT);
run by hand, they default to <repo>/build. Nothing waits a fixed time:
start-up polls o1d's log for its ready line with a generous deadline.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("O1_BUILD_DIR", REPO / "build"))

sys.path.insert(0, str(REPO / "python"))


def _bin(env: str, rel: str) -> str:
    path = os.environ.get(env) or str(BUILD / rel)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: build it (or set ${env})")
    return path


@pytest.fixture(scope="session")
def o1d_bin() -> str:
    return _bin("O1D_BIN", "daemon/o1d/o1d")


@pytest.fixture(scope="session")
def o1model_bin() -> str:
    return _bin("O1MODEL_BIN", "tools/o1model/o1model")


@pytest.fixture(scope="session")
def o1ctl_bin() -> str:
    return _bin("O1CTL_BIN", "tools/o1ctl/o1ctl")


@pytest.fixture(scope="session")
def workdir():
    d = tempfile.mkdtemp(prefix="o1py-test-")
    os.chmod(d, 0o755)
    yield Path(d)
    if not os.environ.get("O1_TEST_KEEP"):
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def model(workdir, o1model_bin) -> str:
    path = workdir / "tiny.gguf"
    subprocess.run([o1model_bin, "make", "--preset", "tiny", "--out",
                    str(path)], check=True, capture_output=True)
    return str(path)


@dataclass
class Daemon:
    """One o1d process; stop() sends SIGTERM and reaps it."""

    o1d: str
    model: str
    dir: Path
    sets: tuple = ()
    proc: Optional[subprocess.Popen] = None
    socket: str = ""
    log: Path = field(default_factory=Path)

    def start(self) -> "Daemon":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.socket = str(self.dir / "o1d.sock")
        self.log = self.dir / "o1d.log"
        args = [self.o1d, "--set", f"ipc.socket={self.socket}",
                "--set", f"model.path={self.model}",
                "--set", "metrics.enabled=false",
                "--set", "backend.device=cpu", "--set", "backend.threads=2"]
        for s in self.sets:
            args += ["--set", s]
        logf = open(self.log, "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=logf)
        logf.close()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if b"o1d: ready socket=" in self.log.read_bytes():
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"o1d exited at start-up:\n{self.text()}")
            time.sleep(0.01)
        self.kill()
        raise RuntimeError(f"o1d not ready after 120 s:\n{self.text()}")

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() \
            else ""

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=300)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=300)


@pytest.fixture(scope="session")
def start_daemon(workdir, o1d_bin, model):
    """start_daemon(*sets) -> a started Daemon (stopped at session end)."""
    started = []

    def start(*sets: str) -> Daemon:
        d = Daemon(o1d_bin, model, workdir / f"d{len(started)}", sets)
        started.append(d)
        return d.start()

    yield start
    for d in started:
        d.kill()


@pytest.fixture(scope="module")
def daemon(start_daemon) -> Daemon:
    """The shared daemon: room for 128 requests in flight per client."""
    d = start_daemon("ipc.max_inflight=128")
    yield d
    d.stop()


@pytest.fixture
def client(daemon):
    import o1client

    with o1client.Client(daemon.socket, name="pytest") as c:
        yield c


@dataclass(frozen=True)
class Spec:
    """One request that `o1model run` can also make."""

    ids: tuple
    max_tokens: int
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def params(self) -> dict:
        return dict(max_tokens=self.max_tokens, temperature=self.temperature,
                    top_k=self.top_k, top_p=self.top_p, seed=self.seed)


def spec(i: int) -> Spec:
    """Deterministic mixed spec number i (as daemon_harness.c's spec_make)."""
    n = 2 + (i * 7) % 45
    ids = tuple((i * 31 + j * 17 + j * j) % 490 for j in range(n))
    return Spec(ids, 3 + (i * 5) % 18,
                0.0 if i % 3 == 0 else 0.9, 20 if i % 4 == 1 else 0,
                0.9 if i % 5 == 2 else 1.0, 1000 + i)


class Reference:
    """`o1model run` outputs, cached per spec."""

    def __init__(self, o1model: str, model: str) -> None:
        self.o1model, self.model = o1model, model
        self.cache: dict = {}

    def _run(self, args: list) -> tuple[list[int], bytes]:
        out = subprocess.run([self.o1model, "run", self.model, "--threads",
                              "2", *args], check=True,
                             capture_output=True).stdout
        first, _, rest = out.partition(b"\n")
        if rest.endswith(b"\n"):
            rest = rest[:-1]
        return [int(t) for t in first.split()], rest

    def ids(self, s: Spec) -> list[int]:
        if s not in self.cache:
            self.cache[s] = self._run([
                "--ids-only", "--max-tokens", str(s.max_tokens),
                "--temperature", f"{s.temperature:g}", "--top-k",
                str(s.top_k), "--top-p", f"{s.top_p:g}", "--seed",
                str(s.seed), "--ids", " ".join(map(str, s.ids))])[0]
        return self.cache[s]

    def text(self, prompt: str, max_tokens: int) -> tuple[list[int], bytes]:
        """Greedy ids and decoded text of a text prompt."""
        key = (prompt, max_tokens)
        if key not in self.cache:
            self.cache[key] = self._run(["--max-tokens", str(max_tokens),
                                         "--prompt", prompt])
        return self.cache[key]


@pytest.fixture(scope="session")
def reference(o1model_bin, model) -> Reference:
    return Reference(o1model_bin, model)
