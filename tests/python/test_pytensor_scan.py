#!/usr/bin/env python3
"""PyTensor's Scan through mode="KILN" against PyTensor's Python mode (pytest).

Issue 28: a custom scan (sit_sot carry, nit_sot output, sequence,
non-sequence), a mit_sot scan (taps -2, -1, n_steps, no sequence), the
gradients of both (PyTensor builds them as mit_mot scans: run in kiln, no
Scan left to the VM), a scan whose stopping condition kiln refuses (falls
back with a warning naming the op), and PyMC's GARCH11 log density and
gradient (its volatility recursion is a Scan), each equal to PyTensor's
Python mode to 1e-12 relative.  SKIPs without
PyTensor; the GARCH11 case SKIPs without PyMC.
"""
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kiln_pt_common import setup_or_skip  # noqa: E402

setup_or_skip()

import numpy as np  # noqa: E402
import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
import pytest  # noqa: E402
from pytensor.compile.mode import Mode  # noqa: E402
from pytensor.scan.op import Scan  # noqa: E402
from pytensor.scan.utils import until  # noqa: E402

import kiln.pytensor as kp  # noqa: E402

REF = Mode(linker="py", optimizer="fast_run")


def both(ins, outs, vals):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kp.KilnFallbackWarning)
        fk = pytensor.function(ins, outs, mode="KILN")
    fp = pytensor.function(ins, outs, mode=REF)
    return fk(*vals), fp(*vals), fk


def close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-12, atol=1e-12)


def kiln_ran_scans(fk):
    """No Scan of the forward graph was left to PyTensor's VM."""
    text = str(fk.maker.fgraph.toposort())
    return "Scan{scan_fn" not in text


def no_scan_left(fk):
    """No Scan at all (forward or gradient) was left to PyTensor's VM."""
    return not any(isinstance(n.op, Scan) for n in fk.maker.fgraph.toposort())


def has_mit_mot(ins, outs):
    """The graph PyTensor compiles has a mit_mot Scan (a gradient's)."""
    f = pytensor.function(ins, outs, mode=REF)
    return any(isinstance(n.op, Scan) and n.op.info.n_mit_mot
               for n in f.maker.fgraph.toposort())


def all_in_kiln(ins, outs, vals):
    with warnings.catch_warnings():
        warnings.simplefilter("error", kp.KilnFallbackWarning)
        fk = pytensor.function(ins, outs, mode="KILN")
    fp = pytensor.function(ins, outs, mode=REF)
    return fk(*vals), fp(*vals), fk


def test_custom_scan():
    x = pt.tensor("x", shape=(5,))
    h0 = pt.scalar("h0")
    a = pt.scalar("a")

    def step(xt, h, a):
        return a * h + xt, pt.exp(h) * xt

    (hs, es), _ = pytensor.scan(step, sequences=[x], outputs_info=[h0, None],
                                non_sequences=[a])
    outs = [hs, es, hs.sum() + es.sum()]
    vals = [np.array([0.5, -1.0, 2.0, 0.3, 1.1]), np.array(0.7), np.array(-0.8)]
    k, p, fk = both([x, h0, a], outs, vals)
    assert all(close(u, v) for u, v in zip(k, p))
    assert kiln_ran_scans(fk)


def test_mit_sot_scan():
    init = pt.tensor("init", shape=(2,))
    a = pt.scalar("a")

    def fib(xm2, xm1, a):
        return a * xm1 + 0.5 * xm2

    fs, _ = pytensor.scan(fib, outputs_info=[dict(initial=init, taps=[-2, -1])],
                          non_sequences=[a], n_steps=6)
    k, p, fk = both([init, a], [fs], [np.array([1.0, 2.0]), np.array(-0.8)])
    assert close(k[0], p[0])
    assert kiln_ran_scans(fk)


@pytest.mark.parametrize("n", [1, 2, 7])
def test_grad_of_sit_sot_scan(n):
    """pytensor.grad through a scan: its gradient is a mit_mot scan."""
    x = pt.tensor("x", shape=(n,))
    a = pt.scalar("a")
    h0 = pt.scalar("h0")

    def step(xt, h, a):
        return a * h + pt.tanh(xt) * h

    hs, _ = pytensor.scan(step, sequences=[x], outputs_info=[h0],
                          non_sequences=[a])
    cost = (hs ** 2).sum() + hs[-1]
    outs = [cost] + pytensor.grad(cost, [x, a, h0])
    assert has_mit_mot([x, a, h0], outs)
    vals = [np.linspace(-1.0, 0.8, n), np.array(0.6), np.array(0.4)]
    k, p, fk = all_in_kiln([x, a, h0], outs, vals)
    assert all(close(u, v) for u, v in zip(k, p))
    assert no_scan_left(fk)


def test_grad_of_mit_sot_scan():
    """Taps -2, -1: the gradient's mit_mot window is three slots wide."""
    init = pt.tensor("init", shape=(2,))
    a = pt.scalar("a")

    def fib(xm2, xm1, a):
        return a * xm1 + 0.5 * pt.sin(xm2)

    fs, _ = pytensor.scan(fib, outputs_info=[dict(initial=init, taps=[-2, -1])],
                          non_sequences=[a], n_steps=6)
    cost = (fs * np.arange(1.0, 7.0)).sum()
    outs = [cost] + pytensor.grad(cost, [init, a])
    assert has_mit_mot([init, a], outs)
    k, p, fk = all_in_kiln([init, a], outs, [np.array([1.0, 2.0]), np.array(-0.8)])
    assert all(close(u, v) for u, v in zip(k, p))
    assert no_scan_left(fk)


def test_while_scan_refused():
    h0 = pt.scalar("h0")

    def step(h):
        return h * 2, until(h > 10)

    hs, _ = pytensor.scan(step, outputs_info=[h0], n_steps=10)
    node = [n for n in pytensor.graph.basic.io_toposort([h0], [hs])
            if isinstance(n.op, Scan)][0]
    why = kp.node_support(node)
    assert why and "as_while" in why
    with pytest.warns(kp.KilnFallbackWarning, match="Scan"):
        fk = pytensor.function([h0], hs, mode="KILN")
    fp = pytensor.function([h0], hs, mode=REF)
    assert close(fk(1.5), fp(1.5))


def test_garch11_logp():
    try:
        import pymc as pm
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"PyMC does not import: {e}")
    r = np.array([0.3, -0.8, 1.2, 0.1, -0.4, 0.9, -1.5, 0.2, 0.05, 0.7])
    with pm.Model() as m:
        omega = pm.HalfNormal("omega", 1)
        alpha_1 = pm.Uniform("alpha_1", 0, 1)
        beta_1 = pm.Uniform("beta_1", 0, 1)
        pm.GARCH11("y", omega=omega, alpha_1=alpha_1, beta_1=beta_1,
                   initial_vol=0.5, observed=r, shape=len(r))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kp.KilnFallbackWarning)
        fk = m.compile_logp(mode="KILN")
    fp = m.compile_logp(mode=REF)
    for pt_ in ({"omega_log__": -0.3, "alpha_1_interval__": 0.2,
                 "beta_1_interval__": -0.5},
                {"omega_log__": 0.4, "alpha_1_interval__": -1.0,
                 "beta_1_interval__": 0.8}):
        assert close(fk(pt_), fp(pt_))
    assert kiln_ran_scans(fk.f if hasattr(fk, "f") else fk)
    # the gradient (a mit_mot scan) runs in kiln too
    vv = m.value_vars
    lp = m.logp()
    outs = [lp] + pytensor.grad(lp, vv)
    args = [np.array(v) for v in (-0.3, 0.2, -0.5)]
    k, p, fk = all_in_kiln(vv, outs, args)
    assert all(close(u, v) for u, v in zip(k, p))
    assert no_scan_left(fk)
