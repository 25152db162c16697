#!/usr/bin/env python3
"""Where a kernel's warps spend their time, from a source-level ncu report
(`ncu --section SourceCounters --section WarpStateStats --import-source yes
-k regex:NAME --launch-count 1 -o REP ...`, then `ncu -i REP.ncu-rep --page
source --csv --print-source cuda,sass > SRC.csv`):

    ncu_source.py SRC.csv [TOP]

prints the warp-stall samples by SASS instruction, each instruction counted
once (the page lists a source file once per inlining context, each time
with the instructions it holds: summing its rows by source line counts an
instruction several times), grouped into the wgmma wait, the wgmma issue,
the mbarrier waits and each source file, then the TOP (default 20)
instructions with their own samples and those not issued. The twenty-fifth
session's call 4 found gemm_qw's unit scales at a quarter of its samples
this way (docs/PERFORMANCE.md)."""
import collections
import csv
import sys


def instructions(path):
    """{address: (samples, not issued, SASS text, source file)}."""
    out, src, head = {}, None, None
    with open(path, newline="") as f:
        for r in csv.reader(f):
            if len(r) == 2 and r[0] == "File Path":
                src = r[1].rsplit("/", 1)[-1]
                continue
            if r and r[0] == "Line No":
                head = r
                continue
            if not head or len(r) < 6 or not r[2]:
                continue
            try:
                s, ni = int(r[4] or 0), int(r[5] or 0)
            except ValueError:
                continue
            out.setdefault(r[2], (s, ni, r[3].strip(), src))
    return out


def group(sass, src):
    if "DEPBAR" in sass:
        return "wgmma wait (WARPGROUP.DEPBAR)"
    if "HGMMA" in sass:
        return "wgmma issue (HGMMA)"
    if "SYNCS" in sass:
        return "mbarrier try_wait (SYNCS; its loop's branch: the file's)"
    return src or "?"


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: ncu_source.py SRC.csv [TOP]")
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    ins = instructions(sys.argv[1])
    total = sum(v[0] for v in ins.values())
    if not total:
        sys.exit("ncu_source: no warp samples in " + sys.argv[1])
    print(f"{len(ins)} instructions, {total} warp samples "
          f"({sum(v[1] for v in ins.values())} not issued)")
    by = collections.Counter()
    for s, _, sass, src in ins.values():
        by[group(sass, src)] += s
    for g, s in by.most_common():
        print(f"  {100 * s / total:5.1f}%  {s:7d}  {g}")
    print(f"top {top} instructions (samples, not issued, file, SASS):")
    for a, (s, ni, sass, src) in sorted(ins.items(),
                                        key=lambda kv: -kv[1][0])[:top]:
        print(f"  {s:6d} {ni:6d}  {src:20.20}  {sass[:70]}")


if __name__ == "__main__":
    main()
