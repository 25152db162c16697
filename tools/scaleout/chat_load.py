#!/usr/bin/env python3
"""A multi-turn chat workload for o1-sidecar, alone or behind a balancer.

Each user holds one conversation: a system prompt (the same for all users
of a --tag), then TURNS user messages, the first naming the conversation
(so conversations share the system prompt's prefix and nothing more); every turn re-sends the whole conversation so far (with the
answers the server streamed) to /v1/chat/completions with stream=true,
the OpenAI body's "user" field set to the conversation (and the
X-Conversation-Id header with --header). USERS threads run at once.

A request fails when the status is not 200, the stream carries an error
event, or it ends without "data: [DONE]" (the connection was cut); the
turn is then sent again (at most --retries times), as a client should: the
balancer picks a host again, and a conversation that lands on another host
only loses its prefix cache there.

--action CMD runs a shell command (kill a host, drain one) once --after
requests have finished; the workload then keeps going (conversations
start over under new names) until CMD has exited and --settle-ms more
passed. With --watch URL,BACKEND,SERVER the HAProxy statistics (CSV) are
polled from the start of the action until SERVER of BACKEND is DOWN.

Prints one JSON object on stdout: requests, ok, failed (each one was
retried or its conversation gave up), gave_up, host switches (turns of a
conversation answered by another host than the turn before), the action's start and end and the DOWN time (seconds of
CLOCK_MONOTONIC), and with --events FILE one JSON line per request.
Standard library only; exit 0 unless the arguments are wrong or a
conversation gave up (its turn failed more than --retries times).
"""
import argparse
import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import zlib

SENTENCES = [
    "How does the daemon keep the model resident between requests?",
    "What happens to the KV cache when a request is cancelled?",
    "Explain how the prefix cache decides which pages to share.",
    "Which metrics tell me that the scheduler is overloaded?",
    "How does a client learn that the daemon is draining?",
    "What does the sidecar do when the daemon restarts?",
    "Why are prompts split into chunks during prefill?",
    "How are stop strings matched across token boundaries?",
]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True, help="http://HOST:PORT")
    p.add_argument("--users", type=int, default=40)
    p.add_argument("--turns", type=int, default=6)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--tag", default="run",
                   help="in every system prompt: runs share no prefix")
    p.add_argument("--header", action="store_true",
                   help="also send X-Conversation-Id")
    p.add_argument("--retries", type=int, default=5)
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds for one request")
    p.add_argument("--action")
    p.add_argument("--after", type=int, default=20)
    p.add_argument("--settle-ms", type=int, default=0)
    p.add_argument("--watch")
    p.add_argument("--events")
    a = p.parse_args(argv)
    if a.users < 1 or a.turns < 1 or a.max_tokens < 1:
        p.error("--users, --turns and --max-tokens must be positive")
    return a


class Result:
    """One request: when it was sent and ended, how it went, and where."""

    def __init__(self, user, turn):
        self.user, self.turn = user, turn
        self.t_send = time.monotonic()
        self.t_end = None
        self.ok = False
        self.error = None
        self.host = None
        self.text = ""
        self.prompt_tokens = 0

    def as_dict(self):
        return {"user": self.user, "turn": self.turn, "t_send": self.t_send,
                "t_end": self.t_end, "ok": self.ok, "error": self.error,
                "host": self.host, "prompt_tokens": self.prompt_tokens}


def read_stream(resp, res):
    """Joins the deltas of an SSE answer; sets res.ok or res.error."""
    done = False
    try:
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if "error" in chunk:
                res.error = "event:" + str(chunk["error"].get("code"))
                continue
            for ch in chunk.get("choices") or []:
                res.text += (ch.get("delta") or {}).get("content") or ""
            if chunk.get("usage"):
                res.prompt_tokens = chunk["usage"].get("prompt_tokens", 0)
    except (http.client.HTTPException, OSError, ValueError) as e:
        res.error = "cut:" + type(e).__name__
        return
    if not done and not res.error:
        res.error = "cut:no_done"
    res.ok = done and not res.error


def send(url, user, turn, messages, a):
    """One streamed turn through a fresh connection."""
    res = Result(user, turn)
    u = urllib.parse.urlsplit(url)
    body = json.dumps({"model": "default", "user": user, "stream": True,
                       "stream_options": {"include_usage": True},
                       "max_tokens": a.max_tokens, "messages": messages})
    headers = {"Content-Type": "application/json"}
    if a.header:
        headers["X-Conversation-Id"] = user
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=a.timeout)
    try:
        conn.request("POST", "/v1/chat/completions", body, headers)
        resp = conn.getresponse()
        res.host = resp.getheader("X-O1-Host")
        if resp.status != 200:
            res.error = "status:%d" % resp.status
            resp.read()
        else:
            read_stream(resp, res)
    except (http.client.HTTPException, OSError) as e:
        res.error = "conn:" + type(e).__name__
    finally:
        conn.close()
    res.t_end = time.monotonic()
    return res


class Load:
    """The shared state of one run: results, the action and its times."""

    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.results = []
        self.gave_up = 0
        self.action_start = self.action_end = self.down_at = None
        self.action_rc = None
        self.action_done = threading.Event()
        if not a.action:
            self.action_done.set()

    def record(self, res):
        with self.lock:
            self.results.append(res)
            n_done = len(self.results)
            start = (self.a.action and self.action_start is None and
                     n_done >= self.a.after)
            if start:
                self.action_start = time.monotonic()
        if start:
            threading.Thread(target=self.run_action, daemon=True).start()

    def run_action(self):
        if self.a.watch:
            threading.Thread(target=self.watch, daemon=True).start()
        self.action_rc = subprocess.call(self.a.action, shell=True)
        self.action_end = time.monotonic()
        time.sleep(self.a.settle_ms / 1000.0)
        self.action_done.set()

    def watch(self):
        """Polls HAProxy's CSV statistics until the server is DOWN."""
        url, backend, server = self.a.watch.split(",")
        until = time.monotonic() + 120
        while time.monotonic() < until:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    for row in r.read().decode().splitlines():
                        f = row.split(",")
                        if (len(f) > 17 and f[0] == backend and
                                f[1] == server and
                                f[17].startswith("DOWN")):
                            self.down_at = time.monotonic()
                            return
            except OSError:
                pass
            time.sleep(0.02)

    def more(self):
        """Whether a finished conversation starts over (the action runs)."""
        return not self.action_done.is_set()


def conversation(load, name, system):
    """TURNS turns of one conversation; False when one never succeeded."""
    a = load.a
    messages = [{"role": "system", "content": system}]
    for turn in range(a.turns):
        text = SENTENCES[(zlib.crc32(name.encode()) + turn) % len(SENTENCES)]
        if turn == 0:  # no two conversations share more than the system
            text = "This is %s. %s" % (name, text)
        messages.append({"role": "user", "content": text})
        for _ in range(a.retries + 1):
            res = send(a.url, name, turn, messages, a)
            load.record(res)
            if res.ok:
                break
        else:
            return False
        messages.append({"role": "assistant", "content": res.text})
    return True


def user_loop(load, i):
    a = load.a
    system = ("You are the o1d handbook (%s). Answer briefly and "
              "precisely, naming the component involved." % a.tag)
    rounds = 0
    while True:
        name = "%s-u%d" % (a.tag, i) + ("-r%d" % rounds if rounds else "")
        if not conversation(load, name, system):
            with load.lock:
                load.gave_up += 1
        rounds += 1
        if not load.more():
            return


def summary(load):
    rs = load.results
    by_user = {}
    for r in rs:
        if r.ok:
            by_user.setdefault(r.user, []).append(r.host)
    switches = sum(sum(1 for x, y in zip(h, h[1:]) if x != y)
                   for h in by_user.values())
    return {"requests": len(rs), "ok": sum(r.ok for r in rs),
            "failed": sum(not r.ok for r in rs), "gave_up": load.gave_up,
            "conversations": len(by_user), "host_switches": switches,
            "errors": sorted({r.error for r in rs if r.error}),
            "action_start": load.action_start,
            "action_end": load.action_end, "action_rc": load.action_rc,
            "down_at": load.down_at}


def main(argv):
    a = parse_args(argv)
    load = Load(a)
    threads = [threading.Thread(target=user_loop, args=(load, i))
               for i in range(a.users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    load.action_done.wait()
    if a.events:
        with open(a.events, "w") as f:
            for r in load.results:
                f.write(json.dumps(r.as_dict()) + "\n")
    print(json.dumps(summary(load)))
    return 1 if load.gave_up else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
