#!/usr/bin/env python3
"""topk_cases.py — reference cases for tests/test_topk.c (issue 29's
top_k), computed with NumPy: torch.topk(sorted=True)'s order, NaN
largest, equal values by lower index (a stable sort on (not NaN, -x)).

One case per block:
    case LABEL DTYPE AXIS K TRANSPOSE RANK D1 .. Dr
    x N values          (the input, C order; with TRANSPOSE 1 the graph
                         reads transpose(x) and the reference is of x.T)
    vals N values       (the values, C order)
    idx N values        (the indices)
"""
import numpy as np


def topk(x, k, axis):
    x = np.moveaxis(x, axis, -1)
    flat = x.reshape(-1, x.shape[-1])
    vals = np.empty((flat.shape[0], k), x.dtype)
    idx = np.empty((flat.shape[0], k), np.int64)
    for r, row in enumerate(flat):
        nan = np.isnan(row)
        key = np.where(nan, 0, -row.astype(np.float64))
        order = np.lexsort((np.arange(row.size), key, ~nan))[:k]
        vals[r], idx[r] = row[order], order
    shp = x.shape[:-1] + (k,)
    return (np.moveaxis(vals.reshape(shp), -1, axis),
            np.moveaxis(idx.reshape(shp), -1, axis))


def emit(label, x, k, axis, transpose=0):
    xr = x.T if transpose else x
    v, i = topk(xr, k, axis)
    dt = "f32" if x.dtype == np.float32 else "f64"
    print("case %s %s %d %d %d %d %s" % (label, dt, axis, k, transpose,
                                        x.ndim, " ".join(map(str, x.shape))))
    for name, a in (("x", x), ("vals", v), ("idx", i)):
        a = np.ascontiguousarray(a).ravel()
        print(name, a.size, " ".join(repr(float(e)) if name != "idx"
                                     else str(int(e)) for e in a))


def main():
    rng = np.random.default_rng(29)
    emit("vector", rng.normal(size=10), 4, 0)
    emit("all", rng.normal(size=6), 6, 0)
    emit("k0", rng.normal(size=5), 0, 0)
    emit("ties", np.array([1, 5, 5, 2, 5, 0, 1.0]), 4, 0)
    emit("nan_inf", np.array([1, np.nan, np.inf, -np.inf, np.nan, 3.0]),
         4, 0)
    emit("rows_f32", rng.normal(size=(3, 7)).astype(np.float32), 3, 1)
    emit("axis0", rng.normal(size=(5, 4)), 2, 0)
    emit("rank3_mid", rng.integers(0, 4, size=(2, 6, 3)).astype(float), 3,
         1)
    emit("transposed", rng.normal(size=(6, 4)), 3, 1, transpose=1)
    emit("vocab_f32", rng.normal(size=4096).astype(np.float32), 50, 0)


if __name__ == "__main__":
    main()
