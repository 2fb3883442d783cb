#!/usr/bin/env python3
"""Weights used in place (issue 29, `make bench-weights`): peak RSS and
time of building, compiling (interp, no cache) and calling y = W @ x with
a 256 MB f32 weight bound three ways, each in a fresh process:

  copy         Graph.shared(..., W)              (copied: graph + compile)
  ref          Graph.shared(..., W, copy=False)  (the caller's array)
  safetensors  Graph.bind_safetensors(FILE)      (a read-only mapping)

usage: weights.py [--build DIR] [--rows R]   (R x 1024 f32; 65536 = 256 MB)
Peak RSS growth is ru_maxrss after the first call minus before the
graph is built (the array itself, allocated before, is not counted;
the mapping's pages are, once the call reads them)."""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

CHILD = r"""
import resource, sys, time
import numpy as np, kiln
mode, R, C, path = sys.argv[1], int(sys.argv[2]), 1024, sys.argv[3]
W = np.ones((R, C), np.float32) if mode != "safetensors" else None
x = np.ones(C, np.float32)
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
base = rss()
t0 = time.perf_counter()
if mode == "safetensors":
    g = kiln.Graph.parse("kiln 1\ngraph b\n  shared W: f32[%d, %d]\n"
                         "  input x: f32[%d]\n  output y = matmul(W, x)\n"
                         "end\n" % (R, C, C))
    g.bind_safetensors(path)
else:
    g = kiln.Graph("b")
    Wv = g.shared("W", "f32", (R, C), W, copy=(mode == "copy"))
    g.output("y", g.op("matmul", Wv, g.input("x", "f32", (C,))))
t1 = time.perf_counter()
f = kiln.compile(g, backend="interp", cache=False)
t2 = time.perf_counter()
f(x)
t3 = time.perf_counter()
print("%-12s %8.0f %9.0f %10.0f %8.0f" % (mode, rss() - base,
      1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * (t3 - t2)))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=".")
    ap.add_argument("--rows", type=int, default=65536)
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ,
               KILN_LIBRARY=os.path.join(a.build, ".libs", "libkiln.so"),
               PYTHONPATH=os.path.join(here, "..", "python"),
               KILN_PLUGIN_PATH=os.path.join(a.build, "backends", "interp",
                                             ".libs"))
    R, C = a.rows, 1024
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "w.safetensors")
        h = json.dumps({"W": {"dtype": "F32", "shape": [R, C],
                              "data_offsets": [0, R * C * 4]}}).encode()
        h += b" " * (-len(h) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            row = struct.pack("<f", 1.0) * C
            for _ in range(R):
                f.write(row)
        print("W: f32[%d, %d] = %.0f MB" % (R, C, R * C * 4 / 2 ** 20))
        print("%-12s %8s %9s %10s %8s" % ("binding", "RSS+ MB", "build ms",
                                         "compile ms", "call ms"))
        for mode in ("copy", "ref", "safetensors"):
            subprocess.run([sys.executable, "-c", CHILD, mode, str(R), path],
                           env=env, check=True)


if __name__ == "__main__":
    main()
