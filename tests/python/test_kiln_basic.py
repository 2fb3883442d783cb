"""The kiln Python package: parse, compile and call on every backend built,
the builder API, errors, input conversion, threads, the logp callback."""

import ctypes
import threading
import time

import numpy as np
import pytest

import kiln
from kiln_testutil import (backends, eight_schools_logp, example, fd_grad)

RNG = np.random.default_rng(25)


@pytest.fixture(scope="module")
def es_graph():
    return kiln.Graph.parse(example("eight_schools.kg"), "eight_schools.kg")


@pytest.mark.parametrize("backend", backends())
def test_eight_schools_against_numpy(es_graph, backend, tmp_path):
    f = kiln.compile(es_graph, backend=backend, cache=str(tmp_path),
                     tiers=False)
    assert f.kernel_backends and set(f.kernel_backends) == {backend}
    assert f.input_names == ("mu", "log_tau", "theta_t")
    assert f.output_names == ("logp", "d_mu", "d_log_tau", "d_theta_t")
    for _ in range(5):
        mu, lt = RNG.normal(), RNG.normal(0, 0.5)
        tt = RNG.normal(size=8)
        lp, d_mu, d_lt, d_tt = f(mu, lt, tt)
        assert isinstance(lp, np.ndarray) and lp.shape == ()
        assert d_tt.shape == (8,) and d_tt.dtype == np.float64
        assert lp == pytest.approx(eight_schools_logp(mu, lt, tt), rel=1e-12)
        x = np.concatenate([[mu, lt], tt])
        g = fd_grad(lambda v: eight_schools_logp(v[0], v[1], v[2:]), x)
        got = np.concatenate([[d_mu, d_lt], d_tt])
        np.testing.assert_allclose(got, g, rtol=1e-6, atol=1e-7)


def test_call_dict_and_keywords(es_graph):
    f = kiln.compile(es_graph, backend="interp")
    tt = np.linspace(-1, 1, 8)
    d = f.call({"mu": 1.0, "log_tau": 0.5, "theta_t": tt})
    assert list(d) == list(f.output_names)
    pos = f(1.0, 0.5, tt)
    kw = f(1.0, theta_t=tt, log_tau=0.5)
    for a, b, c in zip(d.values(), pos, kw):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    with pytest.raises(kiln.KilnError, match="'theta_t' not given"):
        f.call({"mu": 1.0, "log_tau": 0.5})
    with pytest.raises(kiln.KilnError, match="no input named 'nu'"):
        f.call({"mu": 1.0, "log_tau": 0.5, "theta_t": tt, "nu": 1})


def test_builder_matches_numpy_and_prints():
    g = kiln.Graph("built")
    x = g.input("x", "f64", ("n", 3))
    w = g.input("w", np.float64, (3,))
    c = g.const(np.array([1.0, 2.0, 3.0]))
    y = g.op("mul", g.op("add", x, c), w)
    s = g.op("sum", g.op("square", y), axis=[1])
    cost = g.op("sum", s)
    g.output("s", s)
    g.output("cost", cost)
    dx, dw = g.grad(cost, [x, w])
    g.output("dx", dx)
    g.output("dw", dw)
    text = g.print()
    assert "input x: f64[n, 3]" in text and "graph built" in text
    xv = RNG.normal(size=(5, 3))
    wv = RNG.normal(size=3)
    yv = (xv + [1, 2, 3]) * wv
    for graph in (g, kiln.Graph.parse(text)):
        f = kiln.compile(graph, backend="interp")
        s_, cost_, dx_, dw_ = f(xv, wv)
        np.testing.assert_allclose(s_, (yv ** 2).sum(axis=1), rtol=1e-13)
        assert cost_ == pytest.approx((yv ** 2).sum(), rel=1e-13)
        np.testing.assert_allclose(dx_, 2 * yv * wv, rtol=1e-13)
        np.testing.assert_allclose(dw_, (2 * yv * (xv + [1, 2, 3])).sum(0),
                                   rtol=1e-13)
    # symbolic dim n takes another size at the next call
    s2 = kiln.compile(g, backend="interp")(np.ones((2, 3)), np.ones(3))[0]
    np.testing.assert_allclose(s2, [4 + 9 + 16] * 2)


def test_builder_literals_indexing_and_attrs():
    g = kiln.Graph()
    x = g.input("x", "f64", (4, 5))
    a = g.subtensor(x, (slice(1, None), 2))           # x[1:, 2]
    b = g.op("mul", a, 2)                              # int literal
    k = g.op("cast", b, dtype="i64")
    z = g.set_subtensor(x, (0, slice(None, None, 2)), 7.5)
    g.output("b", b)
    g.output("k", k)
    g.output("z", z)
    f = kiln.compile(g, backend="interp")
    xv = np.arange(20.0).reshape(4, 5) / 3
    b_, k_, z_ = f(xv)
    np.testing.assert_array_equal(b_, xv[1:, 2] * 2)
    assert k_.dtype == np.int64
    np.testing.assert_array_equal(k_, (xv[1:, 2] * 2).astype(np.int64))
    zz = xv.copy()
    zz[0, ::2] = 7.5
    np.testing.assert_array_equal(z_, zz)


def test_builder_errors_name_the_problem():
    g = kiln.Graph()
    x = g.input("x", "f64", (3,))
    y = g.input("y", "f64", (4,))
    with pytest.raises(kiln.KilnError) as e:
        g.op("add", x, y)
    assert e.value.code == kiln._lib.ERR_SHAPE
    assert "(3)" in str(e.value) and "(4)" in str(e.value)
    with pytest.raises(kiln.KilnError, match="unknown op 'nosuch'"):
        g.op("nosuch", x)
    with pytest.raises(kiln.KilnError, match="'x'"):
        g.input("x", "f64", ())
    with pytest.raises(kiln.KilnError, match="no kiln dtype"):
        g.input("c", np.complex128, ())


def test_parse_error_has_file_line_col():
    text = "kiln 1\ngraph bad\n  input a: f64\n  output b = foo(a)\nend\n"
    with pytest.raises(kiln.KilnError) as e:
        kiln.Graph.parse(text, "bad.kg")
    msg = str(e.value)
    assert msg.startswith("bad.kg:4:")
    assert "foo" in msg and "\n" not in msg
    assert not isinstance(e.value, kiln.CheckError)
    with pytest.raises(kiln.KilnError, match=r"^m\.kg:2:"):
        kiln.Graph.parse("kiln 1\ngraph ) x\nend\n", "m.kg")


def test_wrong_input_shape_names_input_and_shapes(es_graph):
    f = kiln.compile(es_graph, backend="interp")
    with pytest.raises(kiln.KilnError) as e:
        f(0.0, 1.0, np.zeros(7))
    msg = str(e.value)
    assert "theta_t" in msg and "(8)" in msg and "(7)" in msg
    assert e.value.code == kiln._lib.ERR_SHAPE
    with pytest.raises(kiln.KilnError, match="3 inputs given|2 inputs given"):
        f(0.0, 1.0)
    with pytest.raises(kiln.KilnError, match="input 'mu': cannot convert"):
        f(np.complex128(1), 1.0, np.zeros(8))


def test_input_paths_copy_and_no_copy(es_graph):
    f = kiln.compile(es_graph, backend="interp")
    tt = RNG.normal(size=16)
    ref = f(0.25, 0.2, np.ascontiguousarray(tt[::2]))
    # the right dtype and C-contiguous: the array itself is handed over
    a = np.ascontiguousarray(tt[::2])
    assert kiln._as_input(a, kiln._lib.F64, "theta_t") is a
    f(0.25, 0.2, a)
    assert f._local.ctx.ins[2].data == a.ctypes.data   # a's own memory
    # non-contiguous, f32, int and list inputs are converted once
    assert kiln._as_input(tt[::2], kiln._lib.F64, "t") is not tt
    for v in (tt[::2], tt[::2].astype(np.float32), list(tt[::2])):
        out = f(np.float32(0.25), 0.2, v)    # 0.25 is exact in f32
        expect = ref if not (isinstance(v, np.ndarray) and
                             v.dtype == np.float32) else \
            f(0.25, 0.2, v.astype(np.float64))
        for x, y in zip(out, expect):
            np.testing.assert_array_equal(x, y)
    ints = f(1, 0, np.arange(8))
    ref2 = f(1.0, 0.0, np.arange(8.0))
    for x, y in zip(ints, ref2):
        np.testing.assert_array_equal(x, y)
    # outputs are the caller's: a later call does not change them
    first = f(0.0, 0.0, np.zeros(8))
    keep = [x.copy() for x in first]
    f(5.0, 1.0, np.ones(8))
    for x, y in zip(first, keep):
        np.testing.assert_array_equal(x, y)


def test_threads_give_equal_results(es_graph):
    f = kiln.compile(es_graph, backend=backends()[-1], tiers=False)
    pts = [(RNG.normal(), RNG.normal(0, .3), RNG.normal(size=8))
           for _ in range(16)]
    want = [f(*p) for p in pts]
    errors = []

    def run(k):
        try:
            for i in range(300):
                j = (i + k) % len(pts)
                got = f(*pts[j])
                for a, b in zip(got, want[j]):
                    if not np.array_equal(a, b):
                        errors.append((k, i))
        except Exception as e:   # reported below
            errors.append(repr(e))
    ts = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []


def test_call_releases_the_gil():
    # One long kiln call in a thread; the main thread must run Python
    # code in the middle of it (impossible if the call held the GIL).
    g = kiln.Graph("long")
    a = g.input("a", "f64", ("n", "n"))
    g.output("c", g.op("sum", g.op("dot", a, a)))
    f = kiln.compile(g, backend="interp")
    n = 64
    while True:
        m = np.full((n, n), 1.0 / n)
        t0 = time.perf_counter()
        f(m)
        dt = time.perf_counter() - t0
        if dt > 0.3 or n >= 2048:
            break
        n *= 2
    span = {}

    def worker():
        span["t0"] = time.perf_counter()
        f(m)
        span["t1"] = time.perf_counter()
    ticks = []
    th = threading.Thread(target=worker)
    th.start()
    while th.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    th.join()
    lo = span["t0"] + 0.25 * (span["t1"] - span["t0"])
    hi = span["t1"] - 0.25 * (span["t1"] - span["t0"])
    assert any(lo < t < hi for t in ticks), \
        "no Python ran during the middle half of a %.2f s call" % (
            span["t1"] - span["t0"])


def test_logp_callback_through_ctypes(es_graph):
    f = kiln.compile(es_graph, backend="interp")
    fn, ud, dim = f.logp_callback("logp")
    assert dim == 10
    addr = ctypes.cast(fn, ctypes.c_void_p).value
    assert addr and isinstance(ud, int)
    # call it as a sampler would: through the raw address
    raw = kiln.LOGP_FN(addr)
    x = RNG.normal(size=10)
    grad = np.zeros(10)
    lp = ctypes.c_double()
    dp = ctypes.POINTER(ctypes.c_double)
    rc = raw(10, x.ctypes.data_as(dp), grad.ctypes.data_as(dp),
             ctypes.byref(lp), ud)
    assert rc == 0
    assert lp.value == pytest.approx(eight_schools_logp(x[0], x[1], x[2:]),
                                     rel=1e-12)
    out = f(x[0], x[1], x[2:])
    np.testing.assert_allclose(grad, np.concatenate([[out[1], out[2]],
                                                      out[3]]), rtol=1e-14)
    # several threads through the one pointer, as a sampler's chains
    xs = [RNG.normal(size=10) for _ in range(6)]
    want = [eight_schools_logp(v[0], v[1], v[2:]) for v in xs]
    bad = []

    def chain(k):
        g = np.zeros(10)
        out = ctypes.c_double()
        for i in range(200):
            j = (i + k) % len(xs)
            r = raw(10, xs[j].ctypes.data_as(dp), g.ctypes.data_as(dp),
                    ctypes.byref(out), ud)
            if r != 0 or abs(out.value - want[j]) > 1e-9 * abs(want[j]):
                bad.append((k, i, r))
    ts = [threading.Thread(target=chain, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert bad == []
    rc = raw(9, x.ctypes.data_as(dp), None, ctypes.byref(lp), ud)
    assert rc == -1
    assert "9" in kiln.Function.logp_callback_message(ud)
    with pytest.raises(kiln.KilnError, match="no output named 'lp'"):
        f.logp_callback("lp")


def test_compile_options(es_graph, tmp_path):
    with pytest.raises(kiln.KilnError, match="tiers="):
        kiln.compile(es_graph, tiers="sometimes")
    with pytest.raises(kiln.KilnError, match="cache="):
        kiln.compile(es_graph, cache=3)
    f = kiln.compile(example("eight_schools.kg"), backend="interp",
                     cache=False, quiet=True, passes="none")
    assert f(0.0, 0.0, np.zeros(8))[0] == pytest.approx(
        eight_schools_logp(0.0, 0.0, np.zeros(8)), rel=1e-12)
    pol = tmp_path / "p.yaml"
    pol.write_text("nonsense: [\n")
    with pytest.raises(kiln.KilnError, match="p.yaml"):
        kiln.compile(es_graph, policy=str(pol))
    # the policy names the backend (the default policy's choice differs)
    b = backends()[-1]
    yaml = "kiln_policy: 1\nbackends: [%s, interp]\ndefault: %s\n" % (b, b)
    pol.write_text(yaml)
    for p in (str(pol), yaml):        # a file, then YAML text
        f = kiln.compile(es_graph, policy=p, tiers=False)
        assert set(f.kernel_backends) == {b}
    with pytest.raises(kiln.KilnError, match="<policy>"):
        kiln.compile(es_graph, policy="kiln_policy: 1\nbackends: [\n")


def test_symbolic_output_shapes_change_between_calls():
    g = kiln.Graph("sym")
    x = g.input("x", "f64", ("n",))
    y = g.input("y", "f64", ("m",))
    g.output("outer", g.op("mul", g.op("reshape", x, shape=["n", 1]), y))
    g.output("sx", g.op("sum", x))
    f = kiln.compile(g, backend="interp")
    for n, m in [(5, 3), (2, 3), (2, 7), (5, 3), (0, 4), (3, 1)]:
        xv = RNG.normal(size=n)
        yv = RNG.normal(size=m)
        o, sx = f(xv, yv)
        assert o.shape == (n, m)
        np.testing.assert_array_equal(o, np.outer(xv, yv))
        assert sx == pytest.approx(xv.sum(), abs=1e-15)
    with pytest.raises(kiln.KilnError):
        f(np.zeros((2, 2)), np.zeros(3))
    o, _ = f(np.ones(2), np.ones(3))
    np.testing.assert_array_equal(o, np.ones((2, 3)))


ADD = ("kiln 1\ngraph g\n  input a: f64[n]\n  input b: f64[n]\n"
       "  output y = add(a, b)\nend\n")


def test_reentrant_call_from_array_conversion():
    """An input whose __array__ calls the same function on the same thread
    (attack of issue 25): every input is converted before the thread's
    context is filled, so the outer call sees its own inputs."""
    f = kiln.compile(ADD, backend="interp")
    inner = []

    class Evil:
        def __array__(self, dtype=None, copy=None):
            inner.append(f(np.full(1000, 100.0), np.full(1000, 100.0))[0])
            junk = [np.full(1000, -7.0) for _ in range(50)]  # noqa: F841
            return np.full(1000, 2.0)
    out = f(np.full(1000, 1.0), Evil())[0]
    np.testing.assert_array_equal(out, np.full(1000, 3.0))
    np.testing.assert_array_equal(inner[0], np.full(1000, 200.0))


def test_narrowing_integer_inputs_are_checked():
    """int64 into an i32 input, uint64 into i64: values that do not fit are
    an error naming the input, never wrapped."""
    f = kiln.compile("kiln 1\ngraph g\n  input k: i32[n]\n"
                     "  output y = mul(k, 2)\nend\n", backend="interp")
    np.testing.assert_array_equal(f(np.array([3, -4], dtype=np.int64))[0],
                                  np.array([6, -8], dtype=np.int32))
    with pytest.raises(kiln.KilnError, match="'k'.*2147483648.*i32"):
        f(np.array([1, 2**31], dtype=np.int64))
    g = kiln.compile("kiln 1\ngraph g\n  input k: i64[n]\n"
                     "  output y = add(k, 1)\nend\n", backend="interp")
    assert g(np.array([5], dtype=np.uint64))[0][0] == 6
    with pytest.raises(kiln.KilnError, match="does not fit in i64"):
        g(np.array([2**63], dtype=np.uint64))


@pytest.mark.parametrize("backend", backends())
def test_bool_bytes_other_than_0_1(backend):
    """A bool array whose bytes are 2 or 255 (a .view(bool)) means True to
    NumPy; kiln gets 0/1 bytes on every backend."""
    f = kiln.compile("kiln 1\ngraph g\n  input b: bool[n]\n"
                     "  output all_ = all(b)\n"
                     "  output n = sum(cast(b, dtype=i64))\n"
                     "  output e = eq(b, true)\nend\n", backend=backend)
    b = np.array([2, 255, 1], dtype=np.uint8).view(np.bool_)
    a, n, e = f(b)
    assert bool(a) is True and int(n) == 3 and e.tolist() == [True] * 3
    b0 = np.array([2, 255, 0], dtype=np.uint8).view(np.bool_)
    a, n, e = f(b0)
    assert bool(a) is False and int(n) == 2 and e.tolist() == [True, True, False]


def test_complex_values_are_refused(es_graph):
    f = kiln.compile(es_graph, backend="interp")
    with pytest.raises(kiln.KilnError, match="complex"):
        f(0.0, 0.0, np.zeros(8) + 1j)
    m = kiln.Model(example("eight_schools_noncentered.kg"),
                   data={"J": 8, "y": list(np.arange(8.0)), "sigma": [1.0] * 8},
                   backend="interp")
    with pytest.raises(kiln.KilnError, match="complex"):
        m.log_density(np.zeros(10) + 0j)
    with pytest.raises(kiln.KilnError, match="expected 10 numbers"):
        m.log_density(["a"] * 10)
