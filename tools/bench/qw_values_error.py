#!/usr/bin/env python3
"""How far gemm_qw.cu's Q4_K weight values are from quant.h's, on the CPU.

    tools/bench/qw_values_error.py [QUANT_DIR]

QUANT_DIR (default ../shared/testdata/quant) holds llama.cpp's Q4_K rows
(q4_k.bin) and their dequantization (q4_k.dequant.f32; its README). Each
value is decoded here as quant.h does (checked equal to the reference
bitwise) and then as three bf16 versions: the tiles' (quant.h's value
rounded once), gemm_qw's with the scale D and min M each rounded to bf16
once (q D' - M', rounded: its first version), and with each in two bf16
parts ((q Dh - Mh) + (q Dl - Ml), each rounded: the kernel's). Prints the
relative RMS error of each against quant.h's values, by the README's row
kinds. Exit 77 without the data.
"""
import math
import os
import struct
import sys

Q = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "../../../shared/testdata/quant")
if not os.path.exists(os.path.join(Q, "q4_k.bin")):
    print("qw_values_error: no %s/q4_k.bin: skipped" % Q)
    sys.exit(77)
ROWS, COLS, SB = 64, 1024, 144
raw = open(os.path.join(Q, "q4_k.bin"), "rb").read()
ref = struct.unpack("<%df" % (ROWS * COLS),
                    open(os.path.join(Q, "q4_k.dequant.f32"), "rb").read())


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f16(h):
    return struct.unpack("<e", struct.pack("<H", h))[0]


def bf16(x):
    """x rounded to 8 significant bits, to nearest even, in one step."""
    if x == 0 or not math.isfinite(x):
        return x
    m, e = math.frexp(x)
    return math.ldexp(round(math.ldexp(m, 8)), e - 8)


KINDS = ["N(0, .02)", "N(0, 1)", "N(0, 1e-4)", "outliers", "zeros", "0.5",
         "ramp", "|N(0, .05)|"]
sums = {}
for r in range(ROWS):
    for c in range(COLS):
        b = raw[r * (COLS // 256) * SB + (c // 256) * SB:][:SB]
        d, dmin = f16(b[0] | b[1] << 8), f16(b[2] | b[3] << 8)
        x, s, i = b[4:16], c % 256 // 32, c % 32
        if s < 4:
            sc, mn = x[s] & 63, x[s + 4] & 63
        else:
            sc = (x[s + 4] & 15) | (x[s - 4] >> 6) << 4
            mn = (x[s + 4] >> 4) | (x[s] >> 6) << 4
        qb = b[16 + 32 * (s // 2) + i]
        q = qb >> 4 if s % 2 else qb & 15
        dd, mm = f32(d * sc), f32(dmin * mn)
        v = f32(f32(dd * q) - mm)  # quant.h's value
        if v != ref[r * COLS + c]:
            sys.exit("qw_values_error: row %d col %d: %r, llama.cpp %r"
                     % (r, c, v, ref[r * COLS + c]))
        tiles = bf16(v)
        one = bf16(q * bf16(dd) - bf16(mm))
        dh, mh = bf16(dd), bf16(-mm)
        two = bf16(bf16(q * dh + mh) + bf16(q * bf16(dd - dh) +
                                          bf16(-mm - mh)))
        a = sums.setdefault(r % 8, [0.0] * 4)
        a[0] += v * v
        a[1] += (tiles - v) ** 2
        a[2] += (one - v) ** 2
        a[3] += (two - v) ** 2
print("%-12s %-9s %-9s %s" % ("rows", "tiles", "one part", "two parts"))
for k in sorted(sums):
    a = sums[k]
    if a[0]:
        print("%-12s %.2e  %.2e  %.2e" % (KINDS[k],
              *(math.sqrt(e / a[0]) for e in a[1:])))
