#!/usr/bin/env python3
"""kiln.pytensor against PyTensor's Python reference (pytest).

Every graph is compiled in the KILN mode and in Mode(linker="py",
optimizer=None); results must agree to 1e-9 relative, with equal dtypes and
shapes.  Each graph runs on every backend given in KILN_TEST_BACKENDS
(default "interp tcc llvm"; a backend that is not built is skipped).

Needs PyTensor (the shared copy: KILN_SHARED_PYTHON, else ../shared/python
beside the source tree) and numpy; SKIPs without them.
"""
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kiln_pt_common import setup_or_skip, backends_available  # noqa: E402

setup_or_skip()

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
from pytensor.compile.mode import Mode  # noqa: E402

import kiln  # noqa: E402
import kiln.pytensor as kp  # noqa: E402

REF = Mode(linker="py", optimizer=None)
rng = np.random.default_rng(42)


def vals(*shape, lo=-2.0, hi=2.0, dtype="float64"):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def pos(*shape, dtype="float64"):
    return rng.uniform(0.2, 3.0, size=shape).astype(dtype)


CASES = []


def case(name, ins, outs, args, expect_fallback=False):
    CASES.append((name, ins, outs, args, expect_fallback))


# ---- elementwise ---------------------------------------------------------
x = pt.dvector("x")
y = pt.dvector("y")
m = pt.dmatrix("m")
xv, yv, mv = vals(5), pos(5), vals(3, 5)
unary = {
    "exp": pt.exp, "log": pt.log, "log1p": pt.log1p, "expm1": pt.expm1,
    "sqrt": pt.sqrt, "tanh": pt.tanh, "sin": pt.sin, "cos": pt.cos,
    "erf": pt.erf, "erfc": pt.erfc, "gammaln": pt.gammaln, "psi": pt.psi,
    "trigamma": pt.tri_gamma, "sigmoid": pt.sigmoid, "softplus": pt.softplus,
    "abs": pt.abs, "neg": pt.neg, "sqr": pt.sqr, "reciprocal": pt.reciprocal,
    "log2": pt.log2, "log10": pt.log10, "exp2": pt.exp2,
}
for n, f in unary.items():
    case(f"elemwise {n}", [y], [f(y)], [pos(7)])
case("elemwise sign floor ceil trunc round",
     [x], [pt.sign(x), pt.floor(x), pt.ceil(x), pt.trunc(x), pt.round(x, "half_to_even")],
     [np.array([-2.5, -1.5, -0.5, 0.0, 0.5, 1.5, 2.5, 1.7])])
case("elemwise log1mexp erfcx erfinv", [y],
     [pt.log1mexp(-y), pt.erfcx(y), pt.erfinv(y / 4)], [pos(6)])
case("elemwise gammainc gammaincc betainc", [x, y],
     [pt.gammainc(y, x * x), pt.gammaincc(y, x * x), pt.betainc(y, y + 1, pt.sigmoid(x))],
     [vals(5), pos(5)])
case("elemwise isnan isinf", [x], [pt.isnan(x), pt.isinf(x)],
     [np.array([0.0, np.nan, np.inf, -np.inf, 1.0])])
case("elemwise mod clip", [x, y], [pt.mod(x, y), pt.clip(x, -0.5, 0.7)], [xv, yv])
case("binary add sub mul div pow", [x, y],
     [x + y, x - y, x * y, x / y, y ** x, pt.maximum(x, y), pt.minimum(x, y)], [xv, yv])
case("n-ary add and mul", [x, y, m], [x + y + m + 1.5, x * y * m], [xv, yv, mv])
case("comparisons and logic", [x, y],
     [x < y, x <= y, x > y, x >= y, pt.eq(x, y), pt.neq(x, y),
      pt.and_(x < 0, y > 1), pt.or_(x < 0, y > 1), pt.invert(x < 0), pt.xor(x < 0, y > 1)],
     [np.array([0.5, -1.0, 2.0, 1.0, 0.0]), np.array([0.5, 1.5, 1.0, 1.0, -1.0])])
case("switch and fill", [x, y], [pt.switch(x > 0, x, y), pt.second(x, 3.0), pt.fill(y, x[0])],
     [xv, yv])
case("broadcasting row/col", [x, m],
     [m + x, m * x[None, :], m[:, 0][:, None] - m, pt.exp(m.T) * m.T[:, 0][:, None]], [xv, mv])
k = pt.lvector("k")
k32 = pt.ivector("k32")
f32 = pt.fvector("f32")
case("int64 arithmetic and true_div", [k], [k + 3, k * k, k - 7, k / 2, -k, abs(k)],
     [np.array([1, -4, 9, 0], dtype=np.int64)])
case("int32 with float32 promotes", [k32, f32], [k32 + f32, f32 * 2, pt.exp(f32), k32 * 2],
     [np.array([1, 2, 3], dtype=np.int32), np.array([0.5, -1.5, 2.25], dtype=np.float32)])
case("casts", [x, k], [pt.cast(x, "int64"), pt.cast(k, "float32"), pt.cast(x, "bool"),
                       pt.cast(x > 0, "int8") * 1.5, pt.cast(k, "int32")],
     [np.array([-2.7, 0.0, 3.9]), np.array([3, -1, 0], dtype=np.int64)])
b = pt.bvector("b")
case("int8 input widened", [b, x], [b * x, b + 1, pt.cast(b, "float64").sum()],
     [np.array([1, -2, 3], dtype=np.int8), np.array([0.5, 1.0, 2.0])])
case("composite inlined", [x, y],
     [pytensor.tensor.elemwise.Elemwise(pytensor.scalar.Composite(
         [s1 := pytensor.scalar.float64("a"), s2 := pytensor.scalar.float64("b")],
         [pytensor.scalar.exp(s1) * s2 + pytensor.scalar.log(s2)]))(x, y)],
     [xv, yv])

# ---- reductions ----------------------------------------------------------
t3 = pt.dtensor3("t3")
t3v = vals(2, 3, 4)
case("sum prod max min axes", [t3],
     [t3.sum(), t3.sum(axis=0), t3.sum(axis=(0, 2)), t3.prod(axis=1), t3.max(axis=-1),
      t3.min(axis=(1, 2)), t3.sum(axis=1, keepdims=True), t3.max()], [t3v])
case("all any", [t3], [pt.all(t3 > 0, axis=1), pt.any(t3 > 1.5), pt.all(t3 > -5)], [t3v])
case("sum f32 accumulates in f64", [f32], [f32.sum(), f32.prod(), f32.sum(dtype="float64")],
     [np.array([1e8, 1.0, -1e8, 0.5], dtype=np.float32)])
case("sum of ints and bools", [k], [k.sum(), (k > 0).sum(), k.prod(), k.max(), k.sum(dtype="float64")],
     [np.array([3, -1, 4, 1, 5], dtype=np.int64)])
case("logsumexp and mean", [m], [pt.logsumexp(m, axis=1), pt.mean(m, axis=0), pt.logsumexp(m)],
     [vals(3, 5) * 300])

# ---- shapes --------------------------------------------------------------
case("dimshuffle", [t3], [t3.dimshuffle(2, 0, 1), t3.dimshuffle("x", 0, 1, 2),
                          t3[:, :1, :].dimshuffle(0, 2), t3.T], [t3v])
case("reshape", [t3], [t3.reshape((6, 4)), t3.reshape((-1,)), t3.reshape((2, 12))], [t3v])
sx = pt.tensor("sx", shape=(2, 3), dtype="float64")
case("static shapes: alloc, shape_i, specify_shape", [sx, x],
     [pt.alloc(x[0], 2, 3) + sx, sx.shape[1] * sx, pt.specify_shape(sx, (2, 3)) * 2,
      pt.zeros((3, 2)) + sx.T, pt.ones_like(sx)], [vals(2, 3), xv])
case("join and make_vector", [x, y, m],
     [pt.concatenate([x, y]), pt.concatenate([m, m[:1]], axis=0), pt.stack([x[0], y[1], 2.0]),
      pt.as_tensor([x[0], y[2]])], [xv, yv, mv])
case("subtensor", [t3], [t3[0], t3[1, 2], t3[:, 1:3], t3[::-1, :, ::2], t3[-1, -1, -1],
                         t3[:, 0, 1:]], [t3v])
case("inc and set subtensor", [m, x],
     [pt.set_subtensor(m[1:3], x), pt.inc_subtensor(m[0, 1:4], x[:3]),
      pt.set_subtensor(m[:, 0], 7.0)], [mv, xv])
idx = pt.lvector("idx")
case("advanced indexing", [m, x, idx],
     [x[idx], m[idx[1:]], pt.inc_subtensor(x[idx], 1.0), pt.set_subtensor(x[idx], -x[idx]),
      m[:, idx], x[np.array([0, 0, 2])], pt.inc_subtensor(m[:, idx], 2.0)],
     [mv, xv, np.array([4, 0, 0, 2], dtype=np.int64)])
a2 = pt.dmatrix("a2")
case("dot shapes", [x, m, a2],
     [pt.dot(x, x), pt.dot(m, x), pt.dot(x[:3], m), pt.dot(m, a2), pt.dot(m.T, m)],
     [xv, mv, vals(5, 2)])
case("cumsum cumprod", [m], [pt.cumsum(m, axis=1), pt.cumprod(m, axis=0), pt.cumsum(m)], [mv])

# ---- float32 -------------------------------------------------------------
fm = pt.fmatrix("fm")
case("float32 graph", [fm, f32], [pt.exp(fm).sum(axis=1) + pt.log1p(f32 * f32)[:3],
                                   pt.sigmoid(fm) * 2.5, fm.max(axis=0)],
     [vals(3, 4, dtype="float32"), vals(3, dtype="float32")])

# ---- fallback ------------------------------------------------------------
case("fallback: tan and argmax stay in PyTensor", [x, y],
     [pt.exp(pt.tan(x) + y).sum(), pt.argmax(x) + 1, x * 2], [xv, yv], expect_fallback=True)
z = pt.zvector("zz")
case("fallback: complex arithmetic", [z, x], [pt.real(z * 2).sum() + x], [np.array([1 + 2j, 3 - 1j]), xv],
     expect_fallback=True)
h = pt.vector("h", dtype="float16")
case("fallback: float16", [h], [h * 2, pt.cast(h, "float64").sum()],
     [np.array([1.5, 2.0], dtype=np.float16)], expect_fallback=True)
case("fallback: shape computed at run time", [x, k],
     [pt.alloc(1.0, k[0]) * 2], [xv, np.array([3], dtype=np.int64)], expect_fallback=True)


def check_outputs(got, want):
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype != w.dtype:
            return f"output {i}: dtype {g.dtype}, PyTensor {w.dtype}"
        if g.shape != w.shape:
            return f"output {i}: shape {g.shape}, PyTensor {w.shape}"
        try:
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-300 if g.dtype.kind == "f" and g.dtype.itemsize == 8 else 0,
                                       equal_nan=True) if g.dtype != np.float32 else \
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-30, equal_nan=True)
        except AssertionError as e:
            return f"output {i}: " + " ".join(str(e).split())[:300]
    return None


BACKENDS = backends_available()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,ins,outs,args,expect_fallback", CASES,
                         ids=[c[0].replace(" ", "_") for c in CASES])
def test_graph(backend, name, ins, outs, args, expect_fallback):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = pytensor.function(ins, outs, mode=kp.mode(backend=backend),
                              on_unused_input="ignore")
    fell = [w for w in caught if issubclass(w.category, kp.KilnFallbackWarning)]
    got = f(*args)
    want = pytensor.function(ins, outs, mode=REF, on_unused_input="ignore")(*args)
    err = check_outputs(got, want)
    assert err is None, err
    if expect_fallback:
        assert fell, "expected a KilnFallbackWarning"
    if fell:
        assert len(fell) == 1, f"{len(fell)} fallback warnings, expected one"
        assert "\n" not in str(fell[0].message), "the warning is not one line"
