#!/usr/bin/env python3
"""o1client benchmark (not a test): what the Python layer costs on top of
libo1client, measured in one run against the same daemon.

  ping       round trip through the rings: o1bench ping (C, busy daemon)
             against Client.latency (timed inside libo1client) and the
             whole Client.ping() call as Python sees it, p50/p99 in us
  per token  one greedy streamed request, M tokens (ignore_eos), the gap
             between tokens: o1bench run (C) against Client streaming
             and AsyncClient streaming; the difference is the overhead
  HTTP       with --sidecar URL and httpx importable (Debian:
             python3-httpx): the same request streamed through the
             sidecar's /v1/completions

    python3 bench.py --socket PATH --o1bench build/tools/o1bench/o1bench \\
        [--count 20000] [--max-tokens 256] [--sidecar http://127.0.0.1:8080]
"""

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

try:
    import o1client
except ImportError:  # run from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import o1client

PROMPT = "the quick brown fox jumps over the lazy dog"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def c_ping(o1bench, sock, count):
    out = subprocess.run([o1bench, "ping", "--socket", sock, "--count",
                          str(count), "--sleep-count", "1"], check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"shm-spin p50_us=([\d.]+) p99_us=([\d.]+)", out)
    return float(m.group(1)), float(m.group(2))


def c_itl(o1bench, sock, max_tokens, requests):
    out = subprocess.run([o1bench, "run", "--socket", sock, "--requests",
                          str(requests), "--concurrency", "1",
                          "--max-tokens", str(max_tokens), "--prompt",
                          PROMPT, "--json"], check=True,
                         capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["itl_ms_p50"] * 1000, r["itl_ms_p99"] * 1000


def py_itl(client, max_tokens, requests):
    gaps = []
    for _ in range(requests):
        last = None
        for ev in client.generate(PROMPT, max_tokens=max_tokens,
                                  ignore_eos=True, stream=True):
            now = time.perf_counter()
            if isinstance(ev, o1client.TokenEvent):
                if last is not None:
                    gaps.append((now - last) * 1e6)
                last = now
    return statistics.median(gaps), pct(gaps, 99)


def aio_itl(sock, max_tokens, requests):
    async def run():
        gaps = []
        async with o1client.AsyncClient(sock) as c:
            for _ in range(requests):
                last = None
                async for ev in await c.submit(PROMPT, max_tokens=max_tokens,
                                               ignore_eos=True):
                    now = time.perf_counter()
                    if isinstance(ev, o1client.TokenEvent):
                        if last is not None:
                            gaps.append((now - last) * 1e6)
                        last = now
        return statistics.median(gaps), pct(gaps, 99)
    return asyncio.run(run())


def http_itl(url, max_tokens, requests):
    import httpx

    gaps = []
    body = {"model": "default", "prompt": PROMPT, "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True, "stream": True}
    with httpx.Client(base_url=url, timeout=600) as h:
        for _ in range(requests):
            last = None
            with h.stream("POST", "/v1/completions", json=body) as r:
                for line in r.iter_lines():
                    if not line.startswith("data:") or "[DONE]" in line:
                        continue
                    now = time.perf_counter()
                    if last is not None:
                        gaps.append((now - last) * 1e6)
                    last = now
    return statistics.median(gaps), pct(gaps, 99)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--o1bench", required=True)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--sidecar")
    a = ap.parse_args()

    rows = []
    c50, c99 = c_ping(a.o1bench, a.socket, a.count)
    with o1client.Client(a.socket, name="bench.py") as client:
        client.latency(min(a.count, 1000))  # warm up
        lat = client.latency(a.count)
        rows.append(("ping", "C (o1bench)", c50, c99))
        rows.append(("ping", "Python", lat.p50_ns / 1e3, lat.p99_ns / 1e3))
        wall = []
        for _ in range(a.count):  # the call as Python sees it
            t0 = time.perf_counter_ns()
            client.ping()
            wall.append((time.perf_counter_ns() - t0) / 1e3)
        rows.append(("ping", "Python, whole call", statistics.median(wall),
                     pct(wall, 99)))
        ci = c_itl(a.o1bench, a.socket, a.max_tokens, a.requests)
        pi = py_itl(client, a.max_tokens, a.requests)
    ai = aio_itl(a.socket, a.max_tokens, a.requests)
    rows += [("per token", "C (o1bench)", *ci), ("per token", "Python", *pi),
             ("per token", "Python asyncio", *ai)]
    if a.sidecar:
        try:
            rows.append(("per token", "HTTP sidecar (httpx)",
                         *http_itl(a.sidecar, a.max_tokens, a.requests)))
        except ImportError:
            print("bench: httpx missing, no HTTP row", file=sys.stderr)
    print(f"{'what':<10} {'client':<22} {'p50 us':>9} {'p99 us':>9}")
    for what, who, p50, p99 in rows:
        print(f"{what:<10} {who:<22} {p50:9.2f} {p99:9.2f}")
    print(f"Python over C: ping +{rows[2][2] - rows[0][2]:.2f} us p50, "
          f"per token +{pi[0] - ci[0]:.2f} us p50 "
          f"(asyncio +{ai[0] - ci[0]:.2f} us)")


if __name__ == "__main__":
    main()
