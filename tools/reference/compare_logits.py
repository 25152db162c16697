#!/usr/bin/env python3
"""Compares an engine's logits with a transformers reference.

    compare_logits.py REF_DIR ENGINE_LOGITS [--max-rel-l2 2e-2] [--min-top1 0.98]
                      [--greedy "ids..."]

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
"""
import argparse
import json
import os
import sys

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ref_dir")
    p.add_argument("engine_logits")
    p.add_argument("--max-rel-l2", type=float, default=2e-2)
    p.add_argument("--min-top1", type=float, default=0.98)
    p.add_argument("--greedy", help="the engine's greedy ids")
    a = p.parse_args()
    ref_json = json.load(open(os.path.join(a.ref_dir, "reference.json")))
    vocab = ref_json["vocab_size"]
    n = len(ref_json["prompt_ids"])
    ref = np.fromfile(os.path.join(a.ref_dir, ref_json["logits_file"]),
                      dtype="<f4").reshape(n, vocab).astype(np.float64)
    eng = np.fromfile(a.engine_logits, dtype="<f4")
    if eng.size != n * vocab:
        sys.exit(f"engine logits hold {eng.size} floats, want {n} x {vocab}")
    eng = eng.reshape(n, vocab).astype(np.float64)
    if not np.isfinite(eng).all():
        sys.exit("engine logits hold NaN or inf")
    rel = np.linalg.norm(eng - ref, axis=1) / np.linalg.norm(ref, axis=1)
    top_e, top_r = eng.argmax(axis=1), ref.argmax(axis=1)
    agree = top_e == top_r
    rms = np.sqrt((ref ** 2).mean(axis=1))
    gap = ref[np.arange(n), top_r] - ref[np.arange(n), top_e]
    near = (~agree) & (gap <= 4e-2 * rms)
    top1 = agree.mean()
    print(f"positions {n}, vocab {vocab}")
    print(f"rel L2: max {rel.max():.4g} (position {rel.argmax()}), "
          f"mean {rel.mean():.4g}, bar {a.max_rel_l2}")
    print(f"top-1: {agree.sum()}/{n} = {top1:.4f} (bar {a.min_top1}); "
          f"disagreements that are near ties: {near.sum()}")
    for i in np.flatnonzero(~agree):
        print(f"  position {i}: ref {top_r[i]} engine {top_e[i]}, "
              f"margin {gap[i] / rms[i]:.3g} x rms")
    ok = rel.max() <= a.max_rel_l2 and top1 >= a.min_top1
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
