#!/usr/bin/env python3
"""Batch scorer on device logits: for each prompt (a line of token ids),
generate greedily and score every generated token with the model's
log-softmax, computed on the GPU from the daemon's logits rows (CUDA IPC,
no copy through host memory). Needs o1d on the CUDA backend with
ipc.device_outputs > 0, libo1client-cuda, and torch (or cupy).

    python3 score_device_logits.py [--socket PATH] [--max-tokens N] < ids.txt
"""

import argparse
import importlib.util
import sys
from pathlib import Path

try:
    import o1client
except ImportError:  # run from a source checkout: use the package beside us
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import o1client


def score(client, ids, max_tokens, xp):
    """(token, logprob, entropy) per generated token."""
    out = []
    for tok in client.device_logits(ids, max_tokens=max_tokens):
        if xp == "torch":
            row = tok.to_torch()
            lp = row.log_softmax(-1)
            ent = -(lp.exp() * lp).sum()
            vals = (lp[tok.token_id].item(), ent.item())
        else:
            import cupy

            row = tok.to_cupy()
            m = row.max()
            lp = row - m - cupy.log(cupy.exp(row - m).sum())
            vals = (float(lp[tok.token_id]), float(-(cupy.exp(lp) * lp).sum()))
        tok.check()  # the row was still this token's when we read it
        out.append((tok.token_id, *vals))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--socket")
    ap.add_argument("--max-tokens", type=int, default=16)
    args = ap.parse_args()
    xp = "torch" if importlib.util.find_spec("torch") else "cupy"
    with o1client.Client(args.socket, device_outputs=True,
                         name="score_device_logits.py") as client:
        info = client.device_output()
        print(f"device output area {info.area}: {info.rows} rows of "
              f"{info.row_floats} logits on {info.pci_bus_id}",
              file=sys.stderr)
        for n, line in enumerate(sys.stdin):
            ids = [int(t) for t in line.split()]
            if not ids:
                continue
            scored = score(client, ids, args.max_tokens, xp)
            total = sum(lp for _, lp, _ in scored)
            print(f"prompt {n}: {len(scored)} tokens, sum logprob "
                  f"{total:.4f}: " + " ".join(
                      f"{t}:{lp:.3f}/{h:.2f}" for t, lp, h in scored))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except o1client.O1Error as e:  # no daemon, no device outputs...
        print(f"score_device_logits: {e}", file=sys.stderr)
        sys.exit(1)
