"""Issue 25 item 6: caching across processes, and no PyTensor C compile.

A PyMC model's logp+dlogp compiled in the KILN mode by one Python process
fills kiln's disk cache; a second process compiling the same model finds
every kernel there (no file in KILN_CACHE_DIR is new or changed after its
first call) and computes the same numbers.  With ``PYTENSOR_FLAGS=cxx=``
(docs/pytensor.md) nothing in either process compiles C: PyTensor's
compile directory stays empty of modules.  ``kiln.pymc.compile_model``
needs no C compiler whatever PyTensor's flags say.  Each process is a
fresh interpreter (subprocess); skips without ../shared/python.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("KILN_SRCDIR", os.path.join(HERE, "..", ".."))
PYDIR = os.environ.get("KILN_SHARED_PYTHON",
                       os.path.join(SRC, "..", "shared", "python"))
if not os.path.isdir(os.path.join(PYDIR, "site", "pymc")):
    pytest.skip("no PyMC in %s (../shared/python)" % PYDIR,
                allow_module_level=True)
pytest.importorskip("numpy")
from kiln_testutil import backends  # noqa: E402  (imports numpy)

CHILD = textwrap.dedent(r"""
    import json, os, sys, warnings
    warnings.filterwarnings("ignore")
    for p in sys.argv[2:]:
        sys.path.insert(0, p)
    import numpy as np
    import pymc as pm
    import pytensor

    def state(d):
        out = {}
        for root, _, files in os.walk(d):
            for f in files:
                p = os.path.join(root, f)
                if root == d and f == "stats":   # hit/miss counters
                    continue
                st = os.stat(p)
                out[os.path.relpath(p, d)] = [st.st_size, st.st_mtime_ns]
        return out

    rng = np.random.default_rng(3)
    groups, n = 5, 12
    g = np.repeat(np.arange(groups), n)
    y = rng.gamma(3.0, 1.0, size=groups * n)
    with pm.Model() as m:
        a = pm.Normal("a", 0, 1, shape=groups)
        b = pm.Normal("b", 0, 1)
        shape = pm.HalfNormal("shape", 2)
        pm.Gamma("y", alpha=shape, beta=shape / pm.math.exp(a[g] + b),
                 observed=y)
    import kiln.pytensor as kpt
    what, backend = sys.argv[1].split(":")
    x = np.linspace(-0.5, 0.5, groups + 2)
    if what == "mode":
        mode = kpt.mode(backend=backend) if backend else "KILN"
        f = m.logp_dlogp_function(ravel_inputs=True, mode=mode)
        f.set_extra_values({})
        call = f._pytensor_function
        fns = [n.op.fn for n in call.maker.fgraph.toposort()
               if isinstance(n.op, kpt.KilnOp)]
    else:
        import kiln.pymc
        km = kiln.pymc.compile_model(m, backend=backend or None)
        call = km.log_density_gradient
        fns = [km]
    lp, gr = call(x)
    first = state(os.environ["KILN_CACHE_DIR"])   # right after the first call
    for i in range(3000):                         # hot: tiers move kernels
        call(x)
    for fn in fns:
        fn.tier_wait(60.0)
    comp = sorted(os.listdir(pytensor.config.compiledir))
    print(json.dumps({"lp": float(lp), "grad": [float(v) for v in gr],
                      "first": first,
                      "final": state(os.environ["KILN_CACHE_DIR"]),
                      "compiledir": comp}))
""")


def _run(tmp, what, cxx):
    env = dict(os.environ)
    env["KILN_CACHE_DIR"] = str(tmp / "kiln-cache")
    flags = "base_compiledir=" + str(tmp / "pt")
    if not cxx:
        flags = "cxx=," + flags
    env["PYTENSOR_FLAGS"] = flags
    env.pop("KILN_CACHE", None)
    env.pop("KILN_BACKEND", None)
    paths = [os.path.join(PYDIR, "pytensor-2.27.1"), os.path.join(PYDIR, "site"),
             os.path.join(SRC, "python")]
    r = subprocess.run([sys.executable, "-c", CHILD, what] + paths, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _modules(names):
    # PyTensor's compiledir holds __init__.py and a lock from the start;
    # a C compile leaves a module directory (tmp*, cutils_ext, ...)
    return [n for n in names if n not in ("__init__.py", ".lock")]


def _compiling():
    """The last compiling backend of this build (llvm, else tcc): one is
    enough here, every backend shares the cache code."""
    return [b for b in backends() if b != "interp"][-1:]


def _check_pair(first, second, compiled):
    assert second["lp"] == first["lp"] and second["grad"] == first["grad"]
    if compiled:
        # a backend named outright compiles every kernel in the first call
        assert first["first"], "the first process cached nothing"
    # everything the first process compiled (first call and tier-ups) is
    # found by the second: its first call adds or rewrites no file
    new = {k: v for k, v in second["first"].items()
           if first["final"].get(k) != v}
    assert new == {}, "backend compiles in the second process: %s" % sorted(new)


@pytest.mark.parametrize("backend", [""] + _compiling())
def test_second_process_compiles_nothing_kiln_mode(tmp_path, backend):
    first = _run(tmp_path, "mode:" + backend, cxx=False)
    second = _run(tmp_path, "mode:" + backend, cxx=False)
    _check_pair(first, second, bool(backend))
    # with cxx= nothing in the KILN path compiles C
    assert _modules(first["compiledir"]) == []
    assert _modules(second["compiledir"]) == []


@pytest.mark.parametrize("backend", [""] + _compiling())
def test_second_process_compiles_nothing_model_object(tmp_path, backend):
    # compile_model turns PyTensor's C off for the graph work it does, so
    # even with cxx set no C module is built
    first = _run(tmp_path, "object:" + backend, cxx=True)
    second = _run(tmp_path, "object:" + backend, cxx=True)
    _check_pair(first, second, bool(backend))
    assert _modules(first["compiledir"]) == [], first["compiledir"]
    assert _modules(second["compiledir"]) == [], second["compiledir"]
