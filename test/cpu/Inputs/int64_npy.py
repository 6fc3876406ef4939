#!/usr/bin/env python3
"""Writes a 1-D int64 .npy of N copies of VALUE (no numpy needed):
    int64_npy.py N VALUE PATH"""
import struct
import sys

n, value, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
header = "{'descr': '<i8', 'fortran_order': False, 'shape': (%d,), }" % n
header = header.encode() + b" " * (63 - len(header)) + b"\n"
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + struct.pack("<q", value) * n)
