#!/usr/bin/env python3
"""Sums an `ncu --csv --metrics gpu__time_duration.sum[,dram__bytes_read.sum]
[,smsp__inst_executed.sum]` report (stdin): total device time of the profiled
range, kernel count, and the kernels grouped by name (template arguments
kept), longest first; with the DRAM bytes read, each group's bytes and its
bandwidth over its time; with the executed instructions, each group's warp
instructions per KB read (the block products' decode cost: the eighth
session found them issue-bound at ~140 instructions a 32-weight unit).
`--seq N`: then the first N kernels in launch order, one line each (a
layer's kernels one by one: where a small model's step goes)."""
import collections
import csv
import sys

SCALE = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0,
         "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}
BYTES = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9,
         "KB": 1e3, "MB": 1e6, "GB": 1e9}
COUNT = {"": 1, "inst": 1, "Kinst": 1e3, "Minst": 1e6, "Ginst": 1e9}
rows = [r for r in csv.reader(l for l in sys.stdin if l.startswith('"'))]
if not rows:
    sys.exit("ncu_sum: no CSV rows")
head, rows = rows[0], rows[1:]
name, metric, unit, value = (head.index(k) for k in (
    "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"))
# per kernel group: launches, us, bytes read, warp instructions
by = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
for r in rows:
    v = float(r[value].replace(",", ""))
    k = r[name].split("(")[0][:60]
    if r[metric] == "gpu__time_duration.sum":
        by[k][0] += 1
        by[k][1] += v * SCALE[r[unit]]
    elif r[metric] == "dram__bytes_read.sum":
        by[k][2] += v * BYTES.get(r[unit], 1)
    elif r[metric] == "smsp__inst_executed.sum":
        by[k][3] += v * COUNT.get(r[unit], 1)
total = sum(v[1] for v in by.values())
read = sum(v[2] for v in by.values())
print(f"device time of the profiled range (one step): {total:.1f} us in "
      f"{sum(v[0] for v in by.values())} kernels"
      + (f", {read / 1e9:.3f} GB read from DRAM ({read / total / 1e3:.0f} "
         f"GB/s over the kernels' time)" if read else ""))
for k, (n, us, b, inst) in sorted(by.items(), key=lambda kv: -kv[1][1])[:16]:
    bw = f"  {b / 1e6:9.1f} MB {b / us / 1e3:6.0f} GB/s" if b else ""
    ins = f"  {inst / (b / 1e3):7.1f} inst/KB" if inst and b else ""
    print(f"  {us:8.1f} us  {n:4d} x{bw}{ins}  {k}")
if "--seq" in sys.argv:
    want = int(sys.argv[sys.argv.index("--seq") + 1])
    ident = head.index("ID") if "ID" in head else None
    seq = collections.OrderedDict()  # launch id: [name, us, bytes]
    for i, r in enumerate(rows):
        key = r[ident] if ident is not None else i
        e = seq.setdefault(key, [r[name].split("(")[0][:60], 0.0, 0.0])
        v = float(r[value].replace(",", ""))
        if r[metric] == "gpu__time_duration.sum":
            e[1] += v * SCALE[r[unit]]
        elif r[metric] == "dram__bytes_read.sum":
            e[2] += v * BYTES.get(r[unit], 1)
    print(f"the first {want} kernels in launch order:")
    for k, (nm, us, b) in list(seq.items())[:want]:
        bw = f"  {b / 1e6:7.2f} MB {b / us / 1e3:5.0f} GB/s" if b and us else ""
        print(f"  {us:7.2f} us{bw}  {nm}")
