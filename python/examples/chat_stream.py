#!/usr/bin/env python3
"""A streaming chat with o1d: type a line, watch the answer arrive token
by token; Ctrl-C during an answer cancels it, Ctrl-D ends.

    python3 chat_stream.py [--socket PATH] [--max-tokens N] [--system TEXT]
"""

import argparse
import sys
from pathlib import Path

try:
    import o1client
except ImportError:  # run from a source checkout: use the package beside us
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import o1client


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--socket", help="o1d's socket (default: as o1ctl)")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--system", default="You are a helpful assistant.")
    args = ap.parse_args()
    messages = [{"role": "system", "content": args.system}]
    try:
        client = o1client.Client(args.socket, name="chat_stream.py")
    except o1client.O1Error as e:
        print(f"chat_stream: {e}", file=sys.stderr)
        return 1
    with client:
        while True:
            try:
                line = input("> ")
            except EOFError:
                return 0
            messages.append({"role": "user", "content": line})
            answer = []
            stream = client.generate(messages, stream=True,
                                     max_tokens=args.max_tokens,
                                     temperature=args.temperature)
            try:
                for ev in stream:
                    if isinstance(ev, o1client.TokenEvent):
                        answer.append(ev.text)
                        print(ev.text, end="", flush=True)
            except KeyboardInterrupt:
                stream.close()  # cancels the request in the daemon
                print(" [cancelled]", end="")
            except o1client.O1Error as e:
                print(f"\n[error: {e}]", end="")
            print()
            messages.append({"role": "assistant", "content": "".join(answer)})


if __name__ == "__main__":
    sys.exit(main())
