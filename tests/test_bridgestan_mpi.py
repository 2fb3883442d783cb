"""test_bridgestan_mpi.py — kiln's BridgeStan library under MPI
(bridgestan-mpi.so, `kiln bridgestan --mpi-axis N`; docs/bridgestan.md,
"Under MPI") through the real BridgeStan 2.7.0 Python client.  Run by
tests/test_bridgestan_mpi.sh:

  test_bridgestan_mpi.py prepare KILN SRC TMP   (no mpirun) writes the
      model, its data and the libraries into TMP
  mpirun -np R test_bridgestan_mpi.py MODE TMP   every rank runs it, as a
      user's program would; MODE is one of
      values    rank 0: densities, gradients, Hessians, transforms and a
                MALA chain against the serial library; the other ranks:
                a served model refuses to evaluate; two models one after
                the other
      empty     two observations over three ranks (rank 2 has none)
      bound     examples/logistic.kg, its CSV data bound in the library
      nodestroy rank 0 exits without destroying its model
      disagree  rank 1 passes other data: every rank's construct fails
      badaxis   a library naming an axis that sizes a parameter: every
                rank's construct fails

Each rank prints unnumbered TAP lines ("ok - ...", "not ok - ...",
"# ...") prefixed with its rank; the shell script numbers them.  The
expected values come from the serial library (kiln bridgestan without
MPI: the whole data in one process) and from numpy.
"""
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np

from bridgestan_common import Tap

N, G = 103, 4          # observations (split unevenly), groups
SEED = 20261207


def rank_of():
    """This process's rank, as a user's program finds it (Open MPI, PMIx)."""
    for v in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"):
        if v in os.environ:
            return int(os.environ[v])
    return 0


class Out(Tap):
    """Unnumbered TAP lines of one rank (Tap's close and raises print
    through these)."""

    def __init__(self, rank):
        Tap.__init__(self)
        self.rank = rank

    def ok(self, cond, what):
        if not cond:
            self.failed += 1
        print("%sok - rank %d: %s" % ("" if cond else "not ", self.rank,
                                       what), flush=True)
        return cond

    def diag(self, text):
        for line in str(text).splitlines():
            print("# rank %d: %s" % (self.rank, line), flush=True)

    def near(self, got, want, rtol, what, atol=0.0):
        return self.close(got, want, rtol, atol, what)


# ---- the model, its data, numpy's log density -----------------------------

MODEL = """kiln 1
# a regression with group intercepts: y_i ~ N(alpha + beta . x_i + u[g_i], sigma)
graph bs_mpi_regression
  shared x1: f64[N]
  shared x2: f64[N]
  shared grp: i64[N]
  shared y: f64[N]
  shared u_mean: f64[G]
  param alpha: f64
  param beta: f64[2]
  param u: f64[G]
  param sigma: f64 lower=0
  y_hat = add(add(add(alpha, mul(beta[0], x1)), mul(beta[1], x2)), u[grp])
  z = true_div(sub(y, y_hat), sigma)
  lik = sum(sub(sub(mul(-0.5, square(z)), log(sigma)), 0.9189385332046727))
  lp_alpha = sub(sub(mul(-0.5, square(true_div(alpha, 5.0))), log(5.0)), 0.9189385332046727)
  lp_beta = sum(sub(sub(mul(-0.5, square(true_div(beta, 2.0))), log(2.0)), 0.9189385332046727))
  lp_u = sum(sub(mul(-0.5, square(sub(u, u_mean))), 0.9189385332046727))
  lp_sigma = sub(sub(mul(-0.5, square(true_div(sigma, 3.0))), log(1.5)), 0.9189385332046727)
  output tp scale = mul(sigma, 2.0)
  output logp = add(add(add(add(lp_alpha, lp_beta), lp_u), lp_sigma), lik)
end
"""


def make_data(seed=SEED):
    rng = np.random.RandomState(seed)
    x1, x2 = rng.normal(size=N), rng.normal(size=N)
    grp = rng.randint(0, G, size=N)
    u = rng.normal(size=G) * 0.5
    y = 0.7 + 1.2 * x1 - 0.4 * x2 + u[grp] + 0.8 * rng.normal(size=N)
    return {"x1": x1.tolist(), "x2": x2.tolist(), "grp": grp.tolist(),
            "y": y.tolist(), "u_mean": [0.1, -0.2, 0.0, 0.3]}


def numpy_logp(d, unc, jacobian=True):
    """The log density at unconstrained (alpha, beta[2], u[4], log sigma),
    computed without kiln."""
    alpha, beta, u, ls = unc[0], unc[1:3], unc[3:7], unc[7]
    sigma = math.exp(ls)
    x1, x2, y = (np.asarray(d[k], dtype=float) for k in ("x1", "x2", "y"))
    grp = np.asarray(d["grp"], dtype=int)
    c = 0.5 * math.log(2 * math.pi)
    z = (y - (alpha + beta[0] * x1 + beta[1] * x2 + u[grp])) / sigma
    lp = float(np.sum(-0.5 * z * z - ls - c))
    lp += -0.5 * (alpha / 5) ** 2 - math.log(5) - c
    lp += float(np.sum(-0.5 * (beta / 2) ** 2 - math.log(2) - c))
    lp += float(np.sum(-0.5 * (u - np.asarray(d["u_mean"])) ** 2 - c))
    lp += -0.5 * (sigma / 3) ** 2 - math.log(1.5) - c
    return lp + (ls if jacobian else 0.0)


# ---- the libraries ----------------------------------------------------------

def fnv1a(h, b):
    for c in b:
        h ^= c
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def with_axis(src, dst, axis):
    """A copy of the MPI library src whose trailer names `axis` (the
    format of tools/bs_trailer.h): what `kiln bridgestan` refuses to
    write, to test the library's own check at construct."""
    b = open(src, "rb").read()
    text_len, meta_len, _, version, data_len = struct.unpack(
        "<QQQII", b[-40:-8])
    meta_at = len(b) - 40 - meta_len
    text_at = meta_at - data_len - text_len
    fields = b[meta_at:meta_at + meta_len].split(b"\0")[:-1]
    fields[4] = axis.encode()
    meta = b"\0".join(fields) + b"\0"
    body = b[text_at:meta_at]
    h = fnv1a(fnv1a(fnv1a(0xcbf29ce484222325, b[text_at:text_at + text_len]),
                    b[text_at + text_len:meta_at]), meta)
    foot = struct.pack("<QQQII", text_len, len(meta), h, version, data_len)
    with open(dst, "wb") as f:
        f.write(b[:text_at] + body + meta + foot + b[-8:])
    os.chmod(dst, 0o755)


def prepare(kiln, src, tmp):
    kiln, src = os.path.abspath(kiln), os.path.abspath(src)  # cwd=tmp below
    model = os.path.join(tmp, "reg.kg")
    with open(model, "w") as f:
        f.write(MODEL)
    d = make_data()
    with open(os.path.join(tmp, "data.json"), "w") as f:
        json.dump(d, f)
    tiny = {k: (v[:2] if k != "u_mean" else v) for k, v in d.items()}
    with open(os.path.join(tmp, "tiny.json"), "w") as f:
        json.dump(tiny, f)
    other = dict(d, y=[v + 1.0 for v in d["y"]])
    with open(os.path.join(tmp, "other.json"), "w") as f:
        json.dump(other, f)
    # the model, and one whose data are bound into the library (csv():
    # radon's 919 houses, examples/logistic.kg; every rank slices them):
    # each serial and for MPI along N
    logistic = os.path.join(src, "examples", "logistic.kg")
    for kg, name in ((model, ""), (logistic, "logistic_")):
        for args in (["-o", name + "serial.so"],
                     ["--mpi-axis", "N", "-o", name + "mpi.so"]):
            r = subprocess.run([kiln, "bridgestan", kg] + args, cwd=tmp,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT,
                               universal_newlines=True)
            sys.stdout.write(r.stdout)
            if r.returncode != 0:
                return 1
    with_axis(os.path.join(tmp, "mpi.so"), os.path.join(tmp, "badaxis.so"),
              "G")
    return 0


# ---- under mpirun ------------------------------------------------------------

def points(n, k=4):
    rng = np.random.RandomState(7)
    pts = [np.zeros(n), np.full(n, 0.3)]
    pts += [rng.normal(scale=0.7, size=n) for _ in range(k - 2)]
    return pts


def mala(model, n, steps=300, eps=0.05, seed=11):
    """A fixed-seed MALA chain from 0: (draws, accepted)."""
    rng = np.random.RandomState(seed)
    x = np.zeros(n)
    lp, g = model.log_density_gradient(x)
    draws, acc = [], 0
    for _ in range(steps):
        mean = x + 0.5 * eps * eps * g
        y = mean + eps * rng.normal(size=n)
        lpy, gy = model.log_density_gradient(y)
        back = y + 0.5 * eps * eps * gy
        log_a = (lpy - lp - np.sum((x - back) ** 2) / (2 * eps * eps)
                 + np.sum((y - mean) ** 2) / (2 * eps * eps))
        if math.log(rng.uniform()) < log_a:
            x, lp, g = y, lpy, gy
            acc += 1
        draws.append(x.copy())
    return np.array(draws), acc


def part_rows(n, size, rank):
    """Rank's rows of n over size ranks: the rows i with
    floor(i size / n) = rank, in order (independent of kiln's arithmetic,
    rows [ceil(n r / R), ceil(n (r+1) / R)))."""
    mine = [i for i in range(n) if i * size // n == rank]
    b = mine[0] if mine else next((i for i in range(n) if i * size // n > rank), n)
    return b, b + len(mine)


def values(out, bs, tmp, size):
    rank = out.rank
    data = os.path.join(tmp, "data.json")
    lib = os.path.join(tmp, "mpi.so")
    m = bs.StanModel(lib, data, warn=False)   # collective
    n = m.param_unc_num()
    out.ok(n == 8, "8 unconstrained parameters on every rank (got %d)" % n)
    info = m.model_info()
    rows = "rows [%d, %d) of %d" % (part_rows(N, size, rank) + (N,))
    if not out.ok(("MPI: rank %d of %d, axis N: %s" % (rank, size, rows))
                  in info, "bs_model_info: this rank binds %s" % rows):
        out.diag(info)
    if rank != 0:
        # construct returned: rank 0 destroyed its model
        out.raises(lambda: m.log_density_gradient(np.zeros(n)),
                   ["rank %d of %d" % (rank, size), "only rank 0 evaluates"],
                   "a served model refuses to evaluate")
        out.near(m.param_constrain(np.full(n, 0.5), include_tp=True)[-1],
                  2 * math.exp(0.5), 1e-15,
                  "a served model still constrains (tp scale)")
        del m
        m2 = bs.StanModel(lib, data, warn=False)   # the second model
        out.ok(m2.param_unc_num() == 8, "a second model after the first")
        del m2
        return
    s = bs.StanModel(os.path.join(tmp, "serial.so"), data, warn=False)
    d = json.load(open(data))
    out.ok(m.param_unc_names() == s.param_unc_names() and
           m.param_names(include_tp=True) == s.param_names(include_tp=True),
           "names equal the serial library's")
    worst = 0.0
    good = True
    for i, u in enumerate(points(n)):
        for jac in (True, False):
            lp, g = m.log_density_gradient(u, jacobian=jac)
            lps, gs = s.log_density_gradient(u, jacobian=jac)
            rel = max(abs(lp - lps) / abs(lps),
                      float(np.max(np.abs(g - gs) /
                                   np.maximum(np.abs(gs), 1e-300))))
            worst = max(worst, rel)
            good &= out.near(np.append(lp, g), np.append(lps, gs), 1e-12,
                              "point %d jacobian=%s: log density and "
                              "gradient equal serial to 1e-12" % (i, jac),
                              atol=1e-12)
            out.near(m.log_density(u, jacobian=jac), lps, 1e-12,
                      "point %d jacobian=%s: bs_log_density" % (i, jac))
        out.near(lp, numpy_logp(d, u, False), 1e-11,
                  "point %d: numpy's log density" % i)
    out.diag("largest relative difference from serial: %.3g" % worst)
    u = points(n)[2]
    lp, g, h = m.log_density_hessian(u)
    lps, gs, hs = s.log_density_hessian(u)
    out.near(h, hs, 1e-6, "Hessian (central differences of the summed "
              "gradient) equals serial's to 1e-6", atol=1e-8)
    v = np.linspace(-1, 1, n)
    lp, hv = m.log_density_hessian_vector_product(u, v)
    out.near(hv, hs @ v, 1e-5, "Hessian-vector product", atol=1e-7)
    out.near(m.param_constrain(u, include_tp=True),
              s.param_constrain(u, include_tp=True), 1e-15,
              "param_constrain with tp (local on rank 0)")
    out.near(m.param_unconstrain(s.param_constrain(u)), u, 1e-13,
              "param_unconstrain round trip", atol=1e-13)
    out.raises(lambda: bs.StanModel(lib, data, warn=False),
               ["rank 0 already has a live model"],
               "rank 0 refuses a second live model (the others are serving)")
    # four threads on rank 0 at once (the library serialises its
    # collectives): every result equals the serial call's
    from concurrent.futures import ThreadPoolExecutor
    pts = points(n, 12)
    want = [s.log_density_gradient(p) for p in pts]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda k: m.log_density_gradient(pts[k % 12]),
                          range(200)))
    out.ok(all(abs(lp - want[k % 12][0]) <= 1e-12 * abs(want[k % 12][0]) and
               np.allclose(g, want[k % 12][1], rtol=1e-12, atol=1e-12)
               for k, (lp, g) in enumerate(got)),
           "4 threads x 50 calls on rank 0: each equals the serial call")
    draws, acc = mala(m, n)
    draws_s, acc_s = mala(s, n)
    out.ok(acc == acc_s and 50 < acc, "MALA accepted %d of 300, serial %d"
           % (acc, acc_s))
    out.near(draws, draws_s, 1e-9, "300 MALA draws equal serial's",
              atol=1e-12)
    del m       # the other ranks' construct returns
    m2 = bs.StanModel(lib, data, warn=False)
    lp2, g2 = m2.log_density_gradient(u)
    lps, gs = s.log_density_gradient(u)
    out.near(np.append(lp2, g2), np.append(lps, gs), 1e-12,
              "a second model after the first destroyed", atol=1e-12)
    del m2


def same_as_serial(out, m, s, pts, what):
    """Rank 0: m's log density and gradient at pts equal the serial
    model s's to 1e-12."""
    for i, u in enumerate(pts):
        lp, g = m.log_density_gradient(u)
        lps, gs = s.log_density_gradient(u)
        out.near(np.append(lp, g), np.append(lps, gs), 1e-12,
                 "%s, point %d: equal serial" % (what, i), atol=1e-12)


def empty(out, bs, tmp, size):
    """Two observations over three ranks: rank 2 binds none (an empty
    part adds exactly 0; part 0 has a row and the priors)."""
    data = os.path.join(tmp, "tiny.json")
    m = bs.StanModel(os.path.join(tmp, "mpi.so"), data, warn=False)
    if out.rank == size - 1:
        out.ok("rows [2, 2) of 2" in m.model_info(),
               "rank %d of %d binds no observation" % (size - 1, size))
    if out.rank == 0:
        out.ok("rows [0, 1) of 2" in m.model_info(),
               "rank 0 of %d binds one observation" % size)
        s = bs.StanModel(os.path.join(tmp, "serial.so"), data, warn=False)
        same_as_serial(out, m, s, points(8), "2 observations")
    del m


def bound(out, bs, tmp, size):
    """examples/logistic.kg, its CSV data bound into the library."""
    m = bs.StanModel(os.path.join(tmp, "logistic_mpi.so"), warn=False)
    if out.rank == 0:
        s = bs.StanModel(os.path.join(tmp, "logistic_serial.so"),
                         warn=False)
        out.ok("rows [0, %d) of 919" % part_rows(919, size, 0)[1]
               in m.model_info(),
               "rank 0 binds its rows of the bound CSV")
        same_as_serial(out, m, s, points(3), "logistic (bound csv data)")
    del m


def nodestroy(out, bs, tmp, size):
    """A program that never destroys its model (through ctypes, without
    the client's __del__): the library's exit handler on rank 0 releases
    the serving ranks and every rank finalises MPI; the job ends."""
    import ctypes
    lib = ctypes.CDLL(os.path.join(tmp, "mpi.so"))
    lib.bs_model_construct.restype = ctypes.c_void_p
    lib.bs_model_construct.argtypes = [ctypes.c_char_p, ctypes.c_uint,
                                       ctypes.POINTER(ctypes.c_char_p)]
    err = ctypes.c_char_p()
    with open(os.path.join(tmp, "data.json"), "rb") as f:
        m = lib.bs_model_construct(f.read(), 0, ctypes.byref(err))
    out.ok(bool(m), "constructed; %s" % ("exiting without bs_model_destruct"
                                         if out.rank == 0 else
                                         "construct returned at rank 0's "
                                         "exit"))


def disagree(out, bs, tmp, size):
    data = os.path.join(tmp, "data.json" if out.rank != 1 else "other.json")
    out.raises(lambda: bs.StanModel(os.path.join(tmp, "mpi.so"), data,
                                    warn=False),
               ["bs_model_construct", "disagree"],
               "ranks with different data: construct fails on every rank")


def badaxis(out, bs, tmp, size):
    out.raises(lambda: bs.StanModel(os.path.join(tmp, "badaxis.so"),
                                    os.path.join(tmp, "data.json"),
                                    warn=False),
               ["bs_model_construct", "'G'"],
               "a library whose axis also sizes a parameter: construct "
               "fails on every rank, naming the axis")


def main():
    mode = sys.argv[1]
    if mode == "prepare":
        return prepare(sys.argv[2], sys.argv[3], sys.argv[4])
    tmp = sys.argv[2]
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    out = Out(rank_of())
    import bridgestan as bs
    try:
        {"values": values, "disagree": disagree, "empty": empty,
         "bound": bound, "nodestroy": nodestroy,
         "badaxis": badaxis}[mode](out, bs, tmp, size)
    except Exception as e:  # noqa: BLE001
        import traceback
        out.ok(False, "unexpected %s: %s" % (type(e).__name__, e))
        out.diag(traceback.format_exc())
    return 1 if out.failed else 0


if __name__ == "__main__":
    sys.exit(main())
