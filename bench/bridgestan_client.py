"""bench/bridgestan_client.py — (not bridgestan.py: that name would shadow
the client package) the per-call cost of bs_log_density_gradient from
the BridgeStan Python client (make bench-bridgestan, bench/bridgestan.sh;
docs/performance.md, "BridgeStan").

usage: PYTHONPATH=../shared/clients python3 bench/bridgestan_client.py LIB DATA [CALLS]
Prints one line: py_ns=... (StanModel.log_density_gradient(x, out=g): the
client's checks, ctypes and the library) ctypes_ns=... (the same C
function through the client's ctypes binding alone), medians of 7 rounds
of CALLS calls, ns per call.
"""
import ctypes
import sys
import time

import numpy as np

import bridgestan


def median_ns(fn, points, calls):
    for i in range(1000):
        fn(points[i % len(points)])
    t = []
    for _ in range(7):
        t0 = time.perf_counter_ns()
        for i in range(calls):
            fn(points[i % len(points)])
        t.append((time.perf_counter_ns() - t0) / calls)
    return sorted(t)[3]


def main():
    lib, data = sys.argv[1], sys.argv[2]
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    m = bridgestan.StanModel(lib, data)
    n = m.param_unc_num()
    rng = np.random.default_rng(7)
    points = [rng.uniform(-1, 1, size=n) for _ in range(64)]
    g = np.zeros(n)

    def client(x):
        return m.log_density_gradient(x, propto=False, jacobian=True, out=g)

    lp = ctypes.c_double()
    err = ctypes.c_char_p()
    raw = m._log_density_gradient   # the client's own ctypes binding

    def direct(x):
        return raw(m.model, False, True, x, ctypes.byref(lp), g,
                   ctypes.byref(err))

    print("py_ns=%.1f ctypes_ns=%.1f" % (median_ns(client, points, calls),
                                         median_ns(direct, points, calls)))


main()
