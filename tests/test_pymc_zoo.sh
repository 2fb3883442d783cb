#!/bin/sh
# test_pymc_zoo.sh — the PyMC model zoo of `make bench-pytensor`
# (bench/pymc_models.py) cannot rot (TAP).
#
# Builds every zoo model and evaluates logp and dlogp at its initial point
# in PyTensor's Python reference mode (Mode(linker="py", optimizer=None),
# no C compiler): both must be finite, and the number of unconstrained
# parameters and observations must be the ones each docstring documents.
# Eight schools is also checked against an independent scipy evaluation
# of its log density (with the log-transform's Jacobian) at a fixed point.
# The distributions of issue 28 (pymc_models.DISTRIBUTIONS: AR,
# GaussianRandomWalk, Dirichlet, OrderedLogistic, pm.gp.Latent,
# pm.gp.Marginal, MvNormal with an LKJCholeskyCov factor, GARCH11) are
# compiled in the KILN mode: logp and PyTensor's dlogp (logp alone for
# those of KILN_MODE_LOGP_ONLY, which says why) with no node left to
# PyTensor's VM (a KilnFallbackWarning fails), and
# kiln.pymc.compile_model's log density and gradient, both against
# the Python mode at a point off the initial one, 1e-10 relative
# (SKIP without $KILN_BUILDDIR/.libs/libkiln.so).
# SKIPs without the shared PyTensor/PyMC (KILN_SHARED, else
# $KILN_SRCDIR/../shared) or without numpy/scipy in /usr/bin/python3.
src=${KILN_SRCDIR:-.}
shared=${KILN_SHARED:-$src/../shared}
python=${KILN_TEST_PYTHON:-/usr/bin/python3}
pt="$shared/python/pytensor-2.27.1"
if [ ! -d "$pt" ]; then
  echo "1..0 # SKIP no shared PyTensor/PyMC at $shared/python (set KILN_SHARED)"
  exit 0
fi
if ! "$python" -c 'import numpy, scipy' 2>/dev/null; then
  echo "1..0 # SKIP $python lacks numpy or scipy"
  exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln_zoo.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
KILN_SHARED=$shared
PYTHONPATH="$pt:$shared/python/site:$src/python${PYTHONPATH:+:$PYTHONPATH}"
PYTENSOR_FLAGS="base_compiledir=$tmp/pytensor,cxx="
export KILN_SHARED PYTHONPATH PYTENSOR_FLAGS
lib=${KILN_BUILDDIR:-.}/.libs/libkiln.so
if [ -f "$lib" ] && [ -z "$SAN_CFLAGS" ]; then
  KILN_LIBRARY=$lib
  export KILN_LIBRARY
fi
exec "$python" - "$src/bench" <<'EOF'
import sys
import warnings

warnings.filterwarnings("ignore")
try:
    import numpy as np
    import pymc as pm  # noqa: F401
    import pytensor
    from pytensor.compile.mode import Mode
except Exception as e:  # noqa: BLE001
    print(f"1..0 # SKIP PyMC does not import: {e}")
    sys.exit(0)
from scipy import stats

sys.path.insert(0, sys.argv[1])
import pymc_models as zoo  # noqa: E402

REF = Mode(linker="py", optimizer=None)
n = failed = 0


def ok(cond, name, diag=""):
    global n, failed
    n += 1
    if not cond:
        failed += 1
    print(f"{'ok' if cond else 'not ok'} {n} - {name}", flush=True)
    if diag and not cond:
        for line in str(diag).splitlines():
            print(f"# {line}")


def logp_dlogp(m, point, grad):
    """logp, and its gradient (raveled) when grad, at point, in py mode.
    Not PyMC's compile_dlogp: that canonicalises the summed logp into one
    Add of an input per term, which PyTensor's Python linker cannot run
    beyond 32 operands (the larger zoo models)."""
    lp = m.logp()
    vv = m.value_vars
    g = pytensor.grad(lp, vv) if grad else []
    f = pytensor.function(vv, [lp] + g, mode=REF)
    out = f(*[point[v.name] for v in vv])
    return float(out[0]), (np.concatenate([np.ravel(x) for x in out[1:]])
                           if grad else None)


# (unconstrained size, total observations) as the docstrings document them
EXPECT = {
    "eight_schools": (10, 8),
    "radon": (89, 919),
    "pooled_6_8_gamma": (14, 120), "pooled_6_8_lognormal": (14, 120),
    "pooled_18_24_gamma": (42, 360), "pooled_18_24_lognormal": (42, 360),
    "pooled_48_64_gamma": (112, 960), "pooled_48_64_lognormal": (112, 960),
    "additive_80": (81, 200),
    "hierarchical_3000": (157, 510),
}
ok(sorted(EXPECT) == sorted(zoo.ZOO), "the zoo has the documented models",
   f"zoo: {sorted(zoo.ZOO)}")

# dlogp too for the models of at most 50 parameters (the gradient graphs
# of the large ones take most of a minute to build in py mode)
for name in zoo.ZOO:
    grad = EXPECT[name][0] <= 50
    try:
        m = zoo.build(name)
        ip = m.initial_point(0)
        lp, dlp = logp_dlogp(m, ip, grad)
        nunc = sum(int(np.size(v)) for v in ip.values())
        nobs = sum(int(np.size(m.rvs_to_values[rv].data))
                   for rv in m.observed_RVs)
    except Exception as e:  # noqa: BLE001
        ok(False, f"{name}: builds and evaluates in py mode",
           f"{type(e).__name__}: {e}")
        continue
    what = "logp and dlogp" if grad else "logp"
    ok(np.isfinite(lp) and (not grad or (dlp.shape == (nunc,)
                                         and np.all(np.isfinite(dlp)))),
       f"{name}: {what} finite at the initial point in py mode",
       f"logp {lp}, dlogp {dlp}")
    ok((nunc, nobs) == EXPECT[name],
       f"{name}: {EXPECT[name][0]} unconstrained, {EXPECT[name][1]} observed",
       f"got {nunc} unconstrained, {nobs} observed")

# eight schools against scipy at a fixed point (tau on the log scale).
# 1e-7 relative, not 1e-9: PyTensor makes the literal 5.0 a float32
# constant (exact in float32), so log(5) in the priors is a float32 log.
m = zoo.eight_schools()
y = np.array([28.0, 8, -3, 7, -1, 1, 18, 12])
s = np.array([15.0, 10, 16, 11, 9, 11, 10, 18])
mu, log_tau, th = 1.5, 0.7, np.linspace(-1.0, 1.2, 8)
tau = np.exp(log_tau)
want = (stats.norm.logpdf(mu, 0, 5) + stats.halfcauchy.logpdf(tau, 0, 5)
        + log_tau + stats.norm.logpdf(th).sum()
        + stats.norm.logpdf(y, mu + tau * th, s).sum())
pt_names = {v.name for v in m.value_vars}
got = float(m.compile_logp(mode=REF)({"mu": mu, "tau_log__": log_tau,
                                      "theta_t": th}))
ok(pt_names == {"mu", "tau_log__", "theta_t"}
   and abs(got - want) <= 1e-7 * abs(want),
   "eight_schools: logp equals scipy's at a fixed point",
   f"kiln zoo {got!r}, scipy {want!r}, value vars {pt_names}")

# issue 28's distributions in the KILN mode against the Python mode
DIST_EXPECT = {"ar2": (3, 100), "gaussian_random_walk": (51, 50),
               "dirichlet_multinomial": (3, 80), "ordered_logistic": (4, 60),
               "gp_latent": (12, 10), "gp_marginal": (3, 30),
               "mvnormal_lkj": (9, 120), "garch11": (3, 100)}
ok(sorted(DIST_EXPECT) == sorted(zoo.DISTRIBUTIONS),
   "the distributions are the documented ones",
   f"have: {sorted(zoo.DISTRIBUTIONS)}")


def rel_err(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))


kiln_ok = None
if "KILN_LIBRARY" not in __import__("os").environ:
    kiln_ok = "no libkiln.so in the build tree (or a sanitizer build)"
else:
    try:
        import kiln.pymc
        import kiln.pytensor as kpt
    except Exception as e:  # noqa: BLE001
        kiln_ok = f"kiln does not import: {e}"
for name, fn in zoo.DISTRIBUTIONS.items():
    if kiln_ok:
        print(f"ok {n + 1} - {name}: KILN mode # SKIP {kiln_ok}")
        n += 1
        continue
    try:
        from pymc.blocking import DictToArrayBijection
        m = fn()
        ip = m.initial_point(0)
        vv = m.value_vars
        rng = np.random.default_rng(1)
        point = {k: np.asarray(v) + 0.1 * rng.normal(size=np.shape(v))
                 for k, v in ip.items()}
        nunc = sum(int(np.size(v)) for v in ip.values())
        nobs = sum(int(np.size(m.rvs_to_values[rv].data))
                   for rv in m.observed_RVs)
        ok((nunc, nobs) == DIST_EXPECT[name],
           f"{name}: {DIST_EXPECT[name][0]} unconstrained, "
           f"{DIST_EXPECT[name][1]} observed",
           f"got {nunc} unconstrained, {nobs} observed")
        lp = m.logp()
        outs = [lp] + pytensor.grad(lp, vv)
        args = [point[v.name] for v in vv]
        want = pytensor.function(vv, outs, mode=REF)(*args)
        only = name in zoo.KILN_MODE_LOGP_ONLY
        with warnings.catch_warnings():
            warnings.simplefilter("error", kpt.KilnFallbackWarning)
            got = pytensor.function(vv, outs[:1] if only else outs,
                                    mode="KILN")(*args)
        e = max(rel_err(a, b) for a, b in zip(got, want))
        what = "logp" if only else "logp and dlogp"
        ok(e <= 1e-10, f"{name}: {what} in the KILN mode, all in "
           f"kiln, equal the Python mode's (largest error {e:.2g})")
        x = DictToArrayBijection.map({v.name: point[v.name]
                                      for v in vv}).data
        with warnings.catch_warnings():
            warnings.simplefilter("error", kpt.KilnFallbackWarning)
            km = kiln.pymc.compile_model(m)
            klp, kg = km.log_density_gradient(x)
        e = max(rel_err(klp, want[0]),
                rel_err(kg, np.concatenate([np.ravel(a) for a in want[1:]])))
        ok(e <= 1e-10, f"{name}: kiln.pymc.compile_model's log density and "
           f"gradient equal the Python mode's (largest error {e:.2g})")
    except Exception as e:  # noqa: BLE001
        ok(False, f"{name}: compiles in the KILN mode",
           f"{type(e).__name__}: {e}")

print(f"1..{n}")
sys.exit(1 if failed else 0)
EOF
