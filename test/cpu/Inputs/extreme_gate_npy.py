"""Writes a gate input (float32 .npy, shape from argv) whose raw values reach
past exp's range: +/-120 at every 7th and 11th element, seeded normal values
elsewhere. A sigmoid or softplus of them overflows exp(.) in f32 (past 88.7),
which the forward takes in stride (1 / (1 + inf) = 0) and whose derivative
must stay 0, not 0 * inf = NaN. Pure Python (no NumPy on CI).

usage: extreme_gate_npy.py OUT.npy [fill=VALUE] D0 D1 ...
(fill=VALUE: every element VALUE instead.)"""
import random
import struct
import sys

out, args = sys.argv[1], sys.argv[2:]
fill = None
if args and args[0].startswith("fill="):
    fill = float(args[0][5:])
    args = args[1:]
shape = [int(d) for d in args]
n = 1
for d in shape:
    n *= d
rng = random.Random(20261204)
values = []
for i in range(n):
    if fill is not None:
        values.append(fill)
    elif i % 7 == 3:
        values.append(120.0)
    elif i % 11 == 5:
        values.append(-120.0)
    else:
        values.append(rng.gauss(0.0, 1.0))
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
    ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
pad = 64 - (10 + len(header) + 1) % 64
header += " " * pad + "\n"
with open(out, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
    f.write(struct.pack("<%df" % n, *values))
