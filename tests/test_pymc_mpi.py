"""test_pymc_mpi.py — PyMC models split over MPI ranks (kiln.pymc's
mpi_axis; docs/pymc.md, "Under MPI").  Run by tests/test_pymc_mpi.sh:

  test_pymc_mpi.py prepare TMP     (no mpirun; needs PyMC) converts a
      linear regression (pm.Data X and y over dim "obs_id"), the radon
      varying-intercept model (../shared/data/radon.csv, a numpy county
      index per row), a two-row regression (mpi_axis given as a length), a
      logistic and a Poisson regression with PyMC's default check_bounds
      (its parameter checks, where(all(c), logp, -inf) over the rows) and
      a per-row sigma whose check fails on one row (log density -inf:
      PyMC's own compile_logp raises ParameterValueError there) with their
      axis; writes each one's .kg and .npy files, its serial
      BridgeStan library (data as constants, no axis) and its MPI library,
      and the expected values at a few points: PyMC's own
      model.compile_logp() / compile_dlogp() in PyTensor's Python mode (C
      compiler off).  Checks the serial kiln model of the split text
      against PyMC and the unsplit one, and that models that cannot be
      split are refused naming the node.
  mpirun -np R test_pymc_mpi.py run TMP   every rank loads each MPI
      library with the real BridgeStan client; rank 0 compares the log
      density and gradient with the serial library (1e-12 relative to the
      largest entry) and with PyMC's (1e-10).

Lines are unnumbered TAP ("ok - ...") prefixed with the rank; the shell
script numbers them.
"""
import os
import sys
import tempfile
import warnings

import numpy as np

from test_bridgestan_mpi import Out, rank_of

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("KILN_SRCDIR", os.path.join(HERE, ".."))
SHARED = os.path.join(SRC, "..", "shared")
PYDIR = os.environ.get("KILN_SHARED_PYTHON", os.path.join(SHARED, "python"))
RADON = os.environ.get("KILN_RADON_CSV", os.path.join(SHARED, "data", "radon.csv"))
MODELS = ("linreg", "radon", "tiny", "shaped", "logit", "poisson", "negsig")
ROWS = {"linreg": 103, "radon": 919, "tiny": 2, "shaped": 61, "logit": 97,
        "poisson": 89, "negsig": 53}


# ---- the models (prepare only: they need PyMC) ------------------------------

def linreg(pm, n=103, seed=3):
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(n, 3))
    y = x @ np.array([1.0, -2.0, 0.5]) + 0.3 + rng.normal(size=n)
    with pm.Model(coords={"obs_id": range(n), "k": range(3)}) as m:
        X = pm.Data("X", x, dims=("obs_id", "k"))
        a = pm.Normal("alpha", 0, 5)
        b = pm.Normal("beta", 0, 2, dims="k")
        s = pm.HalfNormal("sigma", 2)
        mu = pm.Deterministic("mu", a + X @ b, dims="obs_id")
        pm.Deterministic("b_scaled", 2 * b, dims="k")
        pm.Normal("y", mu, s, observed=y, dims="obs_id")
    return m


def radon(pm):
    import csv
    with open(RADON) as f:
        rows = list(csv.DictReader(f))
    county = np.array([int(r["county_code"]) for r in rows])
    floor = np.array([float(r["floor"]) for r in rows])
    logr = np.array([float(r["log_radon"]) for r in rows])
    with pm.Model(coords={"county": range(county.max() + 1),
                          "obs_id": range(len(rows))}) as m:
        fl = pm.Data("floor", floor, dims="obs_id")
        mu_a = pm.Normal("mu_a", 0, 10)
        sigma_a = pm.HalfNormal("sigma_a", 5)
        a = pm.Normal("a", mu_a, sigma_a, dims="county")
        b = pm.Normal("b", 0, 10)
        sigma_y = pm.HalfNormal("sigma_y", 5)
        # a coordinate-sized parameter indexed by the axis (a numpy index)
        pm.Normal("log_radon", a[county] + b * fl, sigma_y, observed=logr,
                  dims="obs_id")
    return m


def tiny(pm):
    """Two rows, no dims: mpi_axis=2 (a length); over 3 ranks rank 0 has
    none."""
    x = np.array([0.5, -1.5])
    with pm.Model() as m:
        a = pm.Normal("a", 0, 3)
        b = pm.Normal("b", 0, 3)
        s = pm.Exponential("s", 1.0)
        pm.StudentT("y", nu=4, mu=a + b * x, sigma=s, observed=np.array([1.0, -2.0]))
    return m


def shaped(pm):
    """No dims: pm.Data X and an observed pm.Data, sizes taken from the
    data (pt.alloc(c, X.shape[0]), shape=X.shape[0]): mpi_axis=61."""
    import pytensor.tensor as pt
    rng = np.random.RandomState(9)
    x = rng.normal(size=(61, 2))
    y = x @ np.array([0.5, -1.0]) + rng.normal(size=61)
    with pm.Model() as m:
        X = pm.Data("X", x)
        yd = pm.Data("y_obs", y)
        b = pm.Normal("b", 0, 5, shape=2)
        c = pm.Normal("c", 0, 1)
        s = pm.HalfNormal("s", 2)
        pm.Normal("y", X @ b + pt.alloc(c, X.shape[0]), s, observed=yd,
                  shape=X.shape[0])
    return m


def logit(pm, n=97, seed=4):
    """PyMC's default check_bounds: Bernoulli's check_parameters (0 <= p
    <= 1) is where(all(c), logp, -inf) over the rows: a check the
    partition splits."""
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(n, 2))
    yb = (rng.uniform(size=n) < 1 / (1 + np.exp(-(x @ [1.0, -0.5] + 0.2)))).astype(int)
    with pm.Model(coords={"obs_id": range(n), "k": range(2)}) as m:
        X = pm.Data("X", x, dims=("obs_id", "k"))
        a = pm.Normal("a", 0, 2)
        b = pm.Normal("b", 0, 2, dims="k")
        pm.Bernoulli("y", logit_p=a + X @ b, observed=yb, dims="obs_id")
    return m


def poisson(pm, n=89, seed=6):
    """Poisson regression, default check_bounds (mu >= 0 over the rows)."""
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(n, 2))
    cnt = rng.poisson(np.exp(x @ [0.4, -0.3] + 0.5))
    with pm.Model(coords={"obs_id": range(n), "k": range(2)}) as m:
        X = pm.Data("X", x, dims=("obs_id", "k"))
        a = pm.Normal("a", 0, 2)
        b = pm.Normal("b", 0, 1, dims="k")
        pm.Poisson("y", mu=pm.math.exp(a + X @ b), observed=cnt, dims="obs_id")
    return m


def negsig(pm, n=53, seed=8):
    """A per-row sigma s * w with w < 0 on row 40 only: PyMC's check sigma
    > 0 fails there at every point (log density -inf; the checks of logit
    and poisson cannot fail at any unconstrained point: sigmoid and exp
    stay in the support)."""
    rng = np.random.RandomState(seed)
    w = np.abs(rng.normal(size=n)) + 0.1
    w[40] = -0.5
    with pm.Model(coords={"obs_id": range(n)}) as m:
        W = pm.Data("w", w, dims="obs_id")
        s = pm.HalfNormal("s", 1)
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("y", mu, s * W, observed=rng.normal(size=n), dims="obs_id")
    return m


AXES = {"linreg": "obs_id", "radon": "obs_id", "tiny": 2, "shaped": 61,
        "logit": "obs_id", "poisson": "obs_id", "negsig": "obs_id"}


def points(n, k=4, seed=5):
    rng = np.random.RandomState(seed)
    return np.array([np.zeros(n)] + [rng.normal(scale=0.5, size=n)
                                     for _ in range(k - 1)])


def near(out, got, want, rtol, what):
    """|got - want| <= rtol * max |want| (the gradient's largest entry);
    where want's log density (first) is -inf, got's must be, and its
    gradient is not compared (docs/pymc.md: not meaningful there)."""
    got, want = np.asarray(got, float), np.asarray(want, float)
    if np.isneginf(want[0]):
        out.ok(got.shape == want.shape and np.isneginf(got[0]),
               "%s (log density -inf)" % what)
        return
    scale = max(float(np.max(np.abs(want))), 1.0)
    err = float(np.max(np.abs(got - want))) if got.shape == want.shape else np.inf
    out.ok(err <= rtol * scale, "%s (max error %.3g, scale %.3g)" % (what, err, scale))


def prepare(tmp):
    out = Out(0)
    for p in (os.path.join(PYDIR, "site"), os.path.join(PYDIR, "pytensor-2.27.1")):
        if p not in sys.path:
            sys.path.insert(0, p)
    os.environ.setdefault("PYTENSOR_FLAGS", "cxx=,base_compiledir="
                          + os.path.join(tempfile.gettempdir(), "kiln-pt-pymc-mpi"))
    import pymc as pm
    import pytensor.tensor as pt
    from pytensor.compile.mode import Mode
    import kiln.pymc as kp
    ref = Mode(linker="py", optimizer=None)
    for name in MODELS:
        m = {"linreg": linreg, "radon": radon, "tiny": tiny, "shaped": shaped,
             "logit": logit, "poisson": poisson, "negsig": negsig}[name](pm)
        axis = AXES[name]
        d = os.path.join(tmp, name)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            km = kp.compile_model(m, mpi_axis=axis)
        text = km.text
        out.ok("partition N" in text and "= npy(" in text,
               "%s: the text declares partition N and binds npy data" % name)
        if name == "linreg":
            out.ok("shared X: f64[N, 3]" in text and "shared y: f64[N]" in text,
                   "linreg: X and y are shared values sized by N")
            out.ok(any("'mu'" in str(x.message) or " mu " in str(x.message)
                       for x in w), "linreg: the per-row deterministic mu is left out, "
                   "with a warning")
        if name == "radon":
            out.ok("i64[N]" in text and "param a: f64[85]" in text,
                   "radon: the county index is data sized by N, a[85] a parameter")
        kp.write_model(km, d)
        out.ok(os.path.isfile(os.path.join(d, "model.kg")), "%s: write_model" % name)
        kp.to_bridgestan(m, os.path.join(d, "serial.so"))
        kp.to_bridgestan(km, os.path.join(d, "mpi.so"))
        km0 = kp.compile_model(m)          # data as constants
        f = m.compile_logp(mode=ref)
        df = m.compile_dlogp(mode=ref)
        pts = points(km.n_unc)
        want = []
        for i, u in enumerate(pts):
            p = km.unc_point(u)
            lp, g = km.log_density_gradient(u)
            lp0, g0 = km0.log_density_gradient(u)
            try:
                ref_v = np.append(float(f(p)), np.asarray(df(p), float))
            except Exception as e:  # noqa: BLE001  PyMC's own check
                # (Python mode keeps CheckParameterValue: it raises where
                # the default rewrites give -inf)
                out.ok(name == "negsig" and type(e).__name__ ==
                       "ParameterValueError" and "sigma > 0" in str(e),
                       "%s, point %d: PyMC's own check refuses the point "
                       "(%s)" % (name, i, str(e).splitlines()[0]))
                ref_v = np.append(-np.inf, np.full(km.n_unc, np.nan))
            want.append(ref_v)
            near(out, np.append(lp, g), np.append(lp0, g0), 1e-12,
                 "%s, point %d: split text (serial) = unsplit kiln model" % (name, i))
            near(out, np.append(lp, g), ref_v, 1e-10,
                 "%s, point %d: split text (serial) = PyMC's compile_logp/dlogp"
                 % (name, i))
        np.save(os.path.join(d, "points.npy"), pts)
        np.save(os.path.join(d, "pymc.npy"), np.array(want))

    # models that cannot be split: refused, naming the node
    x = np.random.RandomState(1).normal(size=(40, 2))
    y = x[:, 0] + 1.0

    def centred():
        with pm.Model(coords={"obs_id": range(40)}) as m:
            X = pm.Data("X", x, dims=("obs_id", None))
            b = pm.Normal("b", 0, 1, shape=2)
            pm.Normal("y", (X - X.mean(0)) @ b, 1.0, observed=y, dims="obs_id")
        return m

    def baked():
        with pm.Model(coords={"obs_id": range(40)}) as m:
            X = pm.Data("X", x, dims=("obs_id", None))
            b = pm.Normal("b", 0, 1, shape=2)
            c = pm.Normal("c", 0, 1)
            pm.Normal("y", X @ b + pt.alloc(c, 40), 1.0, observed=y, dims="obs_id")
        return m

    def latent():
        with pm.Model(coords={"obs_id": range(40)}) as m:
            z = pm.Normal("z", 0, 1, dims="obs_id")
            pm.Normal("y", z, 1.0, observed=y, dims="obs_id")
        return m

    def nosuch():
        return centred()

    out.raises(lambda: kp.model_to_kg(centred(), mpi_axis="obs_id"),
               ["cannot split", "obs_id", "divides by a sum", "PyTensor's True_div"],
               "data centred by their mean: refused, naming the node")
    out.raises(lambda: kp.to_bridgestan(centred(), os.path.join(tmp, "x.so"),
                                        mpi_axis="obs_id"),
               ["cannot split", "node"], "to_bridgestan: the same refusal")
    out.ok(not os.path.exists(os.path.join(tmp, "x.so")), "  ... nothing written")
    out.raises(lambda: kp.model_to_kg(baked(), mpi_axis="obs_id"),
               ["cannot split", "length 40 is built into the graph", "shape=[40]"],
               "a length baked into a broadcast: refused, naming the line")
    out.raises(lambda: kp.model_to_kg(latent(), mpi_axis="obs_id"),
               ["cannot split", "free variable 'z' has the axis's length"],
               "a latent value per observation: refused, naming the variable")
    out.raises(lambda: kp.model_to_kg(nosuch(), mpi_axis="rows"),
               ["'rows' is not a dim"], "an unknown dim: refused")
    out.raises(lambda: kp.model_to_kg(nosuch(), mpi_axis=7),
               ["nothing to split"], "a length no data has: refused")
    out.raises(lambda: kp.model_to_kg(nosuch(), mpi_axis=1),
               ["at least 2 rows"], "a length 1: refused")

    # data whose dims name another coordinate of the axis's length: not
    # split (it was, and the model was refused blaming 'beta': an attack's
    # find)
    def coef_as_long():
        xs = np.linspace(-1, 1, 5)
        with pm.Model(coords={"obs_id": range(5), "coef": range(5)}) as m:
            w = pm.Data("w", np.array([1.0, 2.0, -1.0, 0.5, 3.0]), dims="coef")
            beta = pm.Normal("beta", mu=w, sigma=1.0, dims="coef")
            mu = beta.sum() * 0.1 + 2 * pm.Data("x", xs, dims="obs_id")
            pm.Normal("y", mu, 1.0, observed=0.5 + 2 * xs, dims="obs_id")
        return m
    try:
        kc = kp.compile_model(coef_as_long(), mpi_axis="obs_id")
        kc0 = kp.compile_model(coef_as_long())
        u = points(kc.n_unc)[0]
        out.ok("shared x: f64[N]" in kc.text and "shared w" not in kc.text,
               "a coef-dim datum as long as the axis: not split (x is, w stays "
               "a constant)")
        near(out, np.append(*kc.log_density_gradient(u)),
             np.append(*kc0.log_density_gradient(u)), 1e-12,
             "  ... and the split text equals the unsplit model")
    except Exception as e:   # noqa: BLE001 - the refusal is the failure
        out.ok(False, "a coef-dim datum as long as the axis: %s" % e)
    return 1 if out.failed else 0


# ---- under mpirun -----------------------------------------------------------

def run(tmp):
    import bridgestan as bs
    out = Out(rank_of())
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    for name in MODELS:
        d = os.path.join(tmp, name)
        m = bs.StanModel(os.path.join(d, "mpi.so"), warn=False)
        # rank r of R binds the rows i with floor(i R / T) = r, in order
        # (tiny: 2 rows over 3 ranks, rank 1 none); a serial library (no
        # axis) would say nothing of rows
        t = ROWS[name]
        mine = [i for i in range(t) if i * size // t == out.rank]
        b = mine[0] if mine else next((i for i in range(t) if i * size // t > out.rank), t)
        rows = "rows [%d, %d) of %d" % (b, b + len(mine), t)
        out.ok(rows in m.model_info(), "%s: rank %d of %d binds %s"
               % (name, out.rank, size, rows))
        if out.rank == 0:
            s = bs.StanModel(os.path.join(d, "serial.so"), warn=False)
            pts = np.load(os.path.join(d, "points.npy"))
            want = np.load(os.path.join(d, "pymc.npy"))
            for i, u in enumerate(pts):
                lp, g = m.log_density_gradient(u)
                lps, gs = s.log_density_gradient(u)
                near(out, np.append(lp, g), np.append(lps, gs), 1e-12,
                     "%s, point %d: MPI library = serial library" % (name, i))
                near(out, np.append(lp, g), want[i], 1e-10,
                     "%s, point %d: MPI library = PyMC" % (name, i))
            del s
        del m
    return 1 if out.failed else 0


def main():
    try:
        if sys.argv[1] == "prepare":
            return prepare(sys.argv[2])
        return run(sys.argv[2])
    except Exception as e:  # noqa: BLE001
        import traceback
        print("not ok - rank %d: unexpected %s: %s" % (rank_of(), type(e).__name__, e))
        for ln in traceback.format_exc().splitlines():
            print("# " + ln)
        return 1


if __name__ == "__main__":
    sys.exit(main())
