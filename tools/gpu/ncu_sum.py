#!/usr/bin/env python3
"""Sums the kernel durations of an `ncu --csv --metrics
gpu__time_duration.sum` report (stdin): total device time of the profiled
range, kernel count, and the kernels grouped by name, longest first."""
import collections
import csv
import sys

SCALE = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0,
         "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}
rows = [r for r in csv.reader(l for l in sys.stdin if l.startswith('"'))]
if not rows:
    sys.exit("ncu_sum: no CSV rows")
head, rows = rows[0], rows[1:]
name, unit, value = (head.index(k) for k in ("Kernel Name", "Metric Unit",
                                             "Metric Value"))
by = collections.defaultdict(lambda: [0, 0.0])
for r in rows:
    us = float(r[value].replace(",", "")) * SCALE[r[unit]]
    k = r[name].split("(")[0][:60]
    by[k][0] += 1
    by[k][1] += us
total = sum(v[1] for v in by.values())
print(f"device time of one decode step: {total:.1f} us in "
      f"{sum(v[0] for v in by.values())} kernels")
for k, (n, us) in sorted(by.items(), key=lambda kv: -kv[1][1])[:12]:
    print(f"  {us:8.1f} us  {n:4d} x  {k}")
