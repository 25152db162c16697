#!/usr/bin/env python3
"""Issue 17's table from tools/gpu/table.sh's raw lines (one measure a line,
key=value): table.py RAW [RAW...] prints markdown, each figure the median
[min .. max] over its repetitions with their count. A run that lost a
request (errors, or fewer completed than asked) or ran fewer streams at
once than it names (peak_inflight) is marked, never averaged in silently.
Exit 1 when there is nothing to show."""
import statistics
import sys

SHAPE = ("part", "side", "model", "cache", "streams", "words", "long")


def read(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            for line in f:
                kv = dict(w.split("=", 1) for w in line.split() if "=" in w)
                if "part" in kv:
                    rows.append(kv)
    return rows


def num(r, k):
    try:
        return float(r[k])
    except (KeyError, ValueError):
        return None


def spread(vals, prec=1):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    med = statistics.median(vals)
    if len(vals) == 1:
        return f"{med:.{prec}f}"
    return f"{med:.{prec}f} [{min(vals):.{prec}f} .. {max(vals):.{prec}f}]"


def groups(rows, part, side=None):
    out = {}
    for r in rows:
        if r["part"] != part or (side and r.get("side") != side):
            continue
        key = tuple(r.get(k, "") for k in SHAPE)
        out.setdefault(key, []).append(r)
    return out


def flags(rs, streams=None):
    f = []
    for r in rs:
        req, done, err = num(r, "requests"), num(r, "completed"), num(r, "errors")
        if err or (req is not None and done is not None and done < req):
            f.append(f"rep {r.get('rep')}: {err or 0:.0f} errors, "
                     f"{done or 0:.0f} of {req or 0:.0f} completed")
        peak = num(r, "peak_inflight")
        if streams and peak is not None and peak < streams:
            f.append(f"rep {r.get('rep')}: at most {peak:.0f} at once")
    return "; ".join(f)


def ratio(rs, a, b):
    return [num(r, a) / num(r, b) if num(r, a) and num(r, b) else None
            for r in rs]


def batch1(rows):
    o1d, back = groups(rows, "batch1", "o1d"), groups(rows, "batch1", "backend")
    models = []
    for key in list(o1d) + list(back):
        if key[2] not in models:
            models.append(key[2])
    if not models:
        return []
    out = ["### Batch 1 (128-word prompt, 128 new tokens)", "",
           "| model | o1d tok/s | o1d decode tok/s | o1d ITL p50 ms | o1d TTFT p50 ms "
           "| backend tok/s | backend ms/step | floor tok/s | o1d / floor "
           "| n (o1d, backend) | marks |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in models:
        o = next((v for k, v in o1d.items() if k[2] == m), [])
        b = next((v for k, v in back.items() if k[2] == m), [])
        floor = [num(r, "floor") for r in b]
        fl = statistics.median([f for f in floor if f]) if any(floor) else None
        share = [num(r, "throughput_tok_s") / fl * 100 if fl and
                 num(r, "throughput_tok_s") else None for r in o]
        out.append(
            f"| {m} | {spread([num(r, 'throughput_tok_s') for r in o])} "
            f"| {spread([num(r, 'stream_decode_tok_s') for r in o])} "
            f"| {spread([num(r, 'itl_ms_p50') for r in o], 3)} "
            f"| {spread([num(r, 'ttft_ms_p50') for r in o], 2)} "
            f"| {spread([num(r, 'tok_s') for r in b])} "
            f"| {spread([num(r, 'ms_step') for r in b], 3)} "
            f"| {spread(floor, 0)} | {spread(share)}% | {len(o)}, {len(b)} "
            f"| {flags(o)} |")
    return out + [""]


def streams(rows):
    g = groups(rows, "streams")
    if not g:
        return []
    out = ["### Concurrent streams (128 new tokens, requests = 2 x streams)", "",
           "| model | prompts | streams | prompt tokens | tok/s | ITL p50 ms "
           "| ITL p99 ms | p99 / p50 | TTFT p50 ms | n | marks |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, rs in sorted(g.items(), key=lambda kv: (
            kv[0][3] != "shared", int(kv[0][5] or 0), int(kv[0][4] or 0))):
        n = int(key[4] or 0)
        out.append(
            f"| {key[2]} | {key[3]} | {n} "
            f"| {spread([num(r, 'prompt_tokens_per_request') for r in rs])} "
            f"| {spread([num(r, 'throughput_tok_s') for r in rs], 0)} "
            f"| {spread([num(r, 'itl_ms_p50') for r in rs], 2)} "
            f"| {spread([num(r, 'itl_ms_p99') for r in rs], 2)} "
            f"| {spread(ratio(rs, 'itl_ms_p99', 'itl_ms_p50'), 2)} "
            f"| {spread([num(r, 'ttft_ms_p50') for r in rs], 1)} "
            f"| {len(rs)} | {flags(rs, n)} |")
    return out + [""]


def ttft(rows):
    g = groups(rows, "ttft")
    if not g:
        return []
    out = ["### Time to first token (8 requests one at a time, a fresh o1d each)",
           "", "| model | prompt tokens | cache | TTFT p50 ms | TTFT p99 ms | n | marks |",
           "|---|---|---|---|---|---|---|"]
    for key, rs in sorted(g.items(), key=lambda kv: (int(kv[0][5] or 0),
                                                     kv[0][3])):
        out.append(
            f"| {key[2]} "
            f"| {spread([num(r, 'prompt_tokens_per_request') for r in rs])} "
            f"| {key[3]} | {spread([num(r, 'ttft_ms_p50') for r in rs], 2)} "
            f"| {spread([num(r, 'ttft_ms_p99') for r in rs], 2)} | {len(rs)} "
            f"| {flags(rs)} |")
    return out + [""]


def long(rows):
    g = groups(rows, "long")
    if not g:
        return []
    out = ["### Long prompts arriving beside running streams", "",
           "| model | streams | long prompts (words) | ITL p50 before ms "
           "| ITL p99 during ms | p99 during / p50 before | long TTFT p50 ms "
           "| long TTFT max ms | n | marks |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for key, rs in g.items():
        out.append(
            f"| {key[2]} | {key[4]} | {key[6]} ({key[5]}) "
            f"| {spread([num(r, 'itl_before_ms_p50') for r in rs], 2)} "
            f"| {spread([num(r, 'itl_during_ms_p99') for r in rs], 2)} "
            f"| {spread(ratio(rs, 'itl_during_ms_p99', 'itl_before_ms_p50'), 2)} "
            f"| {spread([num(r, 'long_ttft_ms_p50') for r in rs], 0)} "
            f"| {spread([num(r, 'long_ttft_max_ms') for r in rs], 0)} "
            f"| {len(rs)} | {flags(rs)} |")
    return out + [""]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: table.py RAW [RAW...]")
    rows = read(sys.argv[1:])
    lines = batch1(rows) + streams(rows) + ttft(rows) + long(rows)
    if not lines:
        sys.exit("table.py: no measures in " + " ".join(sys.argv[1:]))
    print("\n".join(lines))


main()
