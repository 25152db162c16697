#!/usr/bin/env python3
"""Writes transformers reference outputs for a Hugging Face model folder.

    make_reference.py MODEL_DIR [--prompt-ids "1 2 3" | --n-prompt 40]
                      [--greedy-prompt 12] [--new-tokens 24] [--seed 0]
                      [--dtype float32|bfloat16] [--out DIR]

Loads MODEL_DIR with AutoModelForCausalLM in float32 (--dtype bfloat16:
transformers' own bf16 run, the baseline an engine's bf16 arithmetic is
judged against) with eager attention (no SDPA or flash kernels, so the
reference is the plain softmax(QK^T)V the CPU engine implements), on the
GPU when one is present, and writes into --out (default MODEL_DIR):

  logits.f32      float32 little-endian, [len(prompt_ids), vocab_size],
                  row-major: the logits at every prompt position of one
                  forward pass over prompt_ids;
  reference.json  prompt_ids, logits_file, vocab_size, greedy_prompt_ids
                  (the first --greedy-prompt prompt ids), greedy_new_ids
                  (--new-tokens ids from generate(do_sample=False), EOS
                  ignored so the count is exact), and the versions used.

Without --prompt-ids the prompt is --n-prompt ids drawn uniformly from the
vocabulary with torch.Generator seeded by --seed. TF32 is disabled so GPU
matmuls are true float32.
"""
import argparse
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir")
    p.add_argument("--prompt-ids", help='space-separated ids, e.g. "1 2 3"')
    p.add_argument("--n-prompt", type=int, default=40)
    p.add_argument("--greedy-prompt", type=int, default=12)
    p.add_argument("--new-tokens", type=int, default=24)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=("float32", "bfloat16"),
                   default="float32")
    p.add_argument("--out", help="output folder (default: MODEL_DIR)")
    return p.parse_args()


def prompt_ids(args, vocab):
    if args.prompt_ids:
        ids = [int(x) for x in args.prompt_ids.replace(",", " ").split()]
    else:
        g = torch.Generator().manual_seed(args.seed)
        ids = torch.randint(0, vocab, (args.n_prompt,), generator=g).tolist()
    if not ids or min(ids) < 0 or max(ids) >= vocab:
        sys.exit(f"prompt ids must be in [0, {vocab}): {ids}")
    if args.greedy_prompt > len(ids):
        sys.exit("--greedy-prompt is longer than the prompt")
    return ids


def main():
    args = parse_args()
    out = args.out or args.model_dir
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(
        args.model_dir, dtype=getattr(torch, args.dtype),
        attn_implementation="eager"
    ).to(dev).eval()
    vocab = model.config.vocab_size
    ids = prompt_ids(args, vocab)
    with torch.no_grad():
        logits = model(torch.tensor([ids], device=dev)).logits[0]
        gp = torch.tensor([ids[: args.greedy_prompt]], device=dev)
        gen = model.generate(
            gp, do_sample=False, max_new_tokens=args.new_tokens,
            min_new_tokens=args.new_tokens, pad_token_id=0,
        )
    new_ids = gen[0, args.greedy_prompt:].tolist()
    os.makedirs(out, exist_ok=True)
    logits.float().cpu().numpy().astype("<f4").tofile(
        os.path.join(out, "logits.f32"))
    ref = {
        "prompt_ids": ids,
        "logits_file": "logits.f32",
        "vocab_size": vocab,
        "greedy_prompt_ids": ids[: args.greedy_prompt],
        "greedy_new_ids": new_ids,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "dtype": args.dtype,
        "attn": "eager",
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print(f"{out}: {len(ids)} prompt ids, logits {tuple(logits.shape)}, "
          f"greedy {new_ids}")


if __name__ == "__main__":
    main()
