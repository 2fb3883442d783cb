"""f32 transcendentals (issue 29, docs/backends.md "f32 elementwise math"):
exp, log, tanh, sigmoid, erf and sqrt of float32 inputs on every backend,
against the float64 truth (NumPy/SciPy in f64, then compared in units of
the f32 result's ulp) and against NumPy's own float32 functions, over a
range with the edge cases (+-0, denormals, the overflow and underflow
thresholds, +-FLT_MAX, +-inf, NaN).  The llvm backend computes exp, log,
tanh and sigmoid inline (backends/llvm/vmath.c): its bound is 0.5 ulp
plus 2^-20 ulp, like (float)f((double)x) through libm on the others."""

import numpy as np
import pytest

import kiln
from kiln_testutil import backends

F32 = np.float32
TINY = np.finfo(F32).smallest_subnormal
BIG = np.finfo(F32).max
MINN = np.finfo(F32).tiny


def _sigmoid64(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _erf64(x):
    sp = pytest.importorskip("scipy.special")
    return sp.erf(x)


REF64 = {"exp": np.exp, "log": np.log, "tanh": np.tanh,
         "sigmoid": _sigmoid64, "erf": _erf64, "sqrt": np.sqrt}
REF32 = {"exp": np.exp, "log": np.log, "tanh": np.tanh,
         "sigmoid": lambda x: F32(1) / (F32(1) + np.exp(-x)),
         "erf": None, "sqrt": np.sqrt}


def _inputs(name):
    rng = np.random.default_rng(29)
    edge = [0.0, -0.0, TINY, -TINY, 3 * TINY, 1e-40, -1e-40, MINN, -MINN,
            1e-30, -1e-30, 1e-8, -1e-8, 1e-4, 0.5, -0.5, 0.34657359,
            -0.34657359, 1.0, -1.0, 0.625, 2.0, 9.0, 9.1, -9.1, 20.0, 88.0,
            88.72, 88.7228, 88.73, 89.0, -87.3, -87.34, -100.0, -103.9,
            -103.98, -104.0, -110.0, -200.0, 1e30, -1e30, BIG, -BIG,
            np.inf, -np.inf, np.nan]
    parts = [np.array(edge, dtype=F32),
             rng.normal(0, 3, 20011).astype(F32),
             rng.uniform(-120, 100, 20011).astype(F32),
             (rng.uniform(-1, 1, 5003) * 10.0 ** rng.uniform(-44, 0, 5003)).astype(F32)]
    if name == "log" or name == "sqrt":
        parts.append(np.exp(rng.uniform(-103, 88, 20011)).astype(F32))
        parts.append((1 + rng.uniform(-1e-3, 1e-3, 5003)).astype(F32))
    # an odd length: vector loops and their scalar remainders
    return np.concatenate(parts)


def _ulps(got, ref64):
    """|got - ref64| in units of the f32 ulp at ref64 (f64 arithmetic)."""
    a = np.abs(ref64)
    r32 = a.astype(F32)
    # the f32 at or below |ref64|: its spacing is the interval's (the
    # spacing below a power of two is half the one above it)
    r32 = np.where(r32.astype(np.float64) > a, np.nextafter(r32, F32(0)), r32)
    ulp = np.spacing(r32).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref64) / ulp


def _same_specials(got, want):
    """NaN where want is NaN, equal infinities, equal signed zeros."""
    assert np.array_equal(np.isnan(got), np.isnan(want))
    inf = np.isinf(want)
    assert np.array_equal(got[inf], want[inf])
    z = want == 0
    assert np.array_equal(np.signbit(got[z]), np.signbit(want[z]))


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sigmoid"])
def test_f32_math_in_folds(name, backend, cache):
    """The function inside folds: along a kept axis (llvm: vectorised,
    inline) and into one value per row or in all (llvm: strips of 256,
    backends/llvm/strips.c), equal to the interpreter's bit for bit (the
    same operands folded in the same order)."""
    x = _inputs(name)
    x = x[:x.size // 7 * 7].reshape(-1, 7)
    g = kiln.Graph("fold_" + name)
    v = g.input("x", "f32", x.shape)
    g.output("y", g.op(name, v))
    g.output("c", g.op("sum", g.op(name, v), axis=0))
    g.output("r", g.op("sum", g.op(name, v), axis=1))
    w = g.op(name, v)
    g.output("t", g.op("sum", g.op("where", g.op("eq", w, w), w, g.literal(0.0))))
    f = kiln.compile(g, backend=backend, cache=cache, tiers=False)
    y, c, r, t = f(x)
    want = kiln.compile(g, backend="interp", cache=cache, tiers=False)(x)
    for got, ref in zip((y, c, r, t), want):
        np.testing.assert_array_equal(got, ref)
    with np.errstate(all="ignore"):
        ref64 = REF64[name](x.astype(np.float64))
        _same_specials(y, ref64.astype(F32))
        fin = np.isfinite(ref64) & np.isfinite(y)
        assert np.max(_ulps(y[fin], ref64[fin])) <= 0.5 + 2.0 ** -20
        y64 = y.astype(np.float64)
        np.testing.assert_allclose(c, y64.sum(axis=0).astype(F32), rtol=1e-6)
        np.testing.assert_allclose(r, y64.sum(axis=1).astype(F32), rtol=1e-6)
        fin = ~np.isnan(y64)
        np.testing.assert_allclose(t, y64[fin].sum().astype(F32), rtol=1e-6)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("f32math"))


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("name", sorted(REF64))
def test_f32_math(name, backend, cache):
    x = _inputs(name)
    g = kiln.Graph("f32_" + name)
    v = g.input("x", "f32", (x.size,))
    g.output("y", g.op(name, v))
    # the fused form too: the function inside a longer program
    g.output("z", g.op("mul", g.op(name, v), g.literal(2.0)))
    f = kiln.compile(g, backend=backend, cache=cache, tiers=False)
    y, z = f(x)
    assert y.dtype == F32 and y.shape == x.shape
    with np.errstate(all="ignore"):
        ref64 = REF64[name](x.astype(np.float64))
        want = ref64.astype(F32)
        _same_specials(y, want)
        fin = np.isfinite(ref64) & np.isfinite(y)
        err = _ulps(y[fin], ref64[fin])
        worst = int(np.argmax(err))
        assert err[worst] <= 0.5 + 2.0 ** -20, (
            "%s(%r) = %r, f64 truth %r: %.6f ulp" % (
                name, x[fin][worst], y[fin][worst], ref64[fin][worst], err[worst]))
        np.testing.assert_array_equal(z, (y * F32(2)))
        if REF32[name] is not None:
            n32 = REF32[name](x)
            # (normal results: 1/(1+exp(-x)) in f32 flushes sigmoid of
            # x < -88.7 to 0)
            fin32 = fin & np.isfinite(n32) & (np.abs(n32) >= MINN)
            d = np.abs(y[fin32].astype(np.float64) - n32[fin32].astype(np.float64))
            ulp = np.spacing(np.abs(n32[fin32])).astype(np.float64)
            # NumPy's SIMD float32 functions are a few ulp from the truth
            assert np.max(d / ulp) <= 4, name
