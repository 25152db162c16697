#!/usr/bin/env python3
"""Compares an engine's logits with a transformers reference.

    compare_logits.py REF_DIR ENGINE_LOGITS [--max-rel-l2 2e-2] [--min-top1 0.98]
                      [--greedy "ids..."] [--baseline LOGITS]

REF_DIR holds reference.json and logits.f32 from make_reference.py;
ENGINE_LOGITS is `o1model run --dump-logits` over the same prompt_ids
(float32, [n_prompt, vocab]). Per prompt position: the relative L2 error
||engine - ref|| / ||ref|| and whether the two agree on the top-1 token. A
disagreement is a near tie when the reference's logit for the engine's pick
is within 4e-2 x rms(ref row) of the reference's maximum: the L2 bound
allows errors of that size, so such a flip says nothing about the engine.
--greedy compares the engine's greedy continuation with greedy_new_ids.
Exits 1 when the worst position's error is above --max-rel-l2 or the raw
top-1 agreement is below --min-top1 (near ties are reported, not excused).
--baseline LOGITS (same layout as ENGINE_LOGITS: transformers' own bf16
run over the same ids, make_reference.py --dtype bfloat16) replaces those
fixed bars by the baseline's own figures against the reference: the
engine passes when its worst and mean relative L2 errors are at most the
baseline's and its top-1 agreement at least the baseline's (issue 17: a
bf16 engine cannot be asked to beat bf16 arithmetic itself).
"""
import argparse
import json
import os
import sys

import numpy as np


def load(path, n, vocab, what):
    """N x VOCAB float32 logits from PATH, as float64; exits if not."""
    v = np.fromfile(path, dtype="<f4")
    if v.size != n * vocab:
        sys.exit(f"{what} logits hold {v.size} floats, want {n} x {vocab}")
    v = v.reshape(n, vocab).astype(np.float64)
    if not np.isfinite(v).all():
        sys.exit(f"{what} logits hold NaN or inf")
    return v


def against(ref, got):
    """Per position: relative L2 error, top-1 agreement, GOT's top-1."""
    rel = np.linalg.norm(got - ref, axis=1) / np.linalg.norm(ref, axis=1)
    top = got.argmax(axis=1)
    return rel, top == ref.argmax(axis=1), top


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ref_dir")
    p.add_argument("engine_logits")
    p.add_argument("--max-rel-l2", type=float, default=2e-2)
    p.add_argument("--min-top1", type=float, default=0.98)
    p.add_argument("--greedy", help="the engine's greedy ids")
    p.add_argument("--baseline", help="transformers' bf16 logits")
    a = p.parse_args()
    ref_json = json.load(open(os.path.join(a.ref_dir, "reference.json")))
    vocab = ref_json["vocab_size"]
    n = len(ref_json["prompt_ids"])
    ref = np.fromfile(os.path.join(a.ref_dir, ref_json["logits_file"]),
                      dtype="<f4").reshape(n, vocab).astype(np.float64)
    eng = load(a.engine_logits, n, vocab, "engine")
    rel, agree, top_e = against(ref, eng)
    top_r = ref.argmax(axis=1)
    rms = np.sqrt((ref ** 2).mean(axis=1))
    gap = ref[np.arange(n), top_r] - ref[np.arange(n), top_e]
    near = (~agree) & (gap <= 4e-2 * rms)
    top1 = agree.mean()
    max_bar, mean_bar, top1_bar = a.max_rel_l2, None, a.min_top1
    print(f"positions {n}, vocab {vocab}")
    if a.baseline:
        b_rel, b_agree, _ = against(ref, load(a.baseline, n, vocab,
                                               "baseline"))
        max_bar, mean_bar = b_rel.max(), b_rel.mean()
        top1_bar = b_agree.mean()
        print(f"baseline (transformers bf16) against the reference: rel "
              f"L2 max {max_bar:.4g}, mean {mean_bar:.4g}, top-1 "
              f"{b_agree.sum()}/{n}")
    print(f"rel L2: max {rel.max():.4g} (position {rel.argmax()}), "
          f"mean {rel.mean():.4g}, bar: max {max_bar:.4g}"
          + (f", mean {mean_bar:.4g}" if mean_bar is not None else ""))
    print(f"top-1: {agree.sum()}/{n} = {top1:.4f} (bar {top1_bar:.4f}); "
          f"disagreements that are near ties: {near.sum()}")
    for i in np.flatnonzero(~agree):
        print(f"  position {i}: ref {top_r[i]} engine {top_e[i]}, "
              f"margin {gap[i] / rms[i]:.3g} x rms")
    ok = rel.max() <= max_bar and top1 >= top1_bar
    if mean_bar is not None:
        ok = ok and rel.mean() <= mean_bar
    if a.greedy is not None:
        got = [int(x) for x in a.greedy.split()]
        want = ref_json["greedy_new_ids"]
        same = 0
        while same < min(len(got), len(want)) and got[same] == want[same]:
            same += 1
        print(f"greedy: first {same} of {len(want)} ids equal "
              f"(engine {got[:len(want)]}, ref {want})")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
