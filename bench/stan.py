"""stan.py -- kiln against Stan's own C++, per gradient, on the posteriordb
corpus (make bench-stan; issue 27; docs/performance.md "posteriordb
against Stan").

usage: /usr/bin/python3 bench/stan.py BUILDDIR [NAME ...]

For each posterior of examples/posteriordb/CORPUS (or the NAMEs given):

1. Stan's side is built once per model and cached in $KILN_STAN_CACHE
   (default /tmp/kiln-stan-cache), under harness/: R translates the .stan
   program to C++ (bench/stan-cpp.R: rstan::stanc(...)$cppcode) and writes
   the data as an R dump; g++ compiles that C++ with bench/stan_harness.cpp
   (its main()) at $KILN_STAN_CXXFLAGS (default below: -O3 -march=native
   and the defines Stan's makefiles use).  Compiles run one at a time under
   nice -n 19; a binary is keyed by the model's C++, the harness and the
   flags.
2. kiln is timed by bench/bench_posteriordb (the default policy after its
   tier-up, and llvm forced); its llvm run writes the 64 points it times at
   and kiln's gradients there ($KILN_BENCH_PDB_POINTS).
3. bench/stan_harness times stan::model::log_prob_grad<true,true> in a C++
   loop over the same 64 points, the same way (7 rounds, median), after
   checking Stan's gradient against kiln's at every point (worst
   max|dg|/max|g| must be <= 1e-9, else the row is marked and left out of
   the median).
Posteriors with a Stan reference (examples/posteriordb/references/NAME.json)
but no .kg file yet (issue 28's roadmap) are rows of Stan alone: the
harness times Stan at the reference's three points (posteriordb draws)
and checks its gradient against rstan's there.
ODE posteriors (a reference with "ode_rtol") are checked to
100 * ode_rtol instead of 1e-9 (two solves agree to their tolerance
only), and posteriors with bounds (references/NAME.tol.json) to twice
their largest bound relative to the largest gradient element (at most
1e-3).
Rounds are interleaved: KILN_BENCH_ROUNDS (default 3) passes over the
corpus, each pass timing kiln then Stan for one posterior before moving to
the next; the table shows the median over the rounds.
KILN_BENCH_PDB_SECONDS (default 1) is each timing's length.
Prints a Markdown table and the median ratios kiln / Stan.  Exit status 2
when rstan is not installed (the Makefile target reports a skip).
"""
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
R_SITE = "/usr/lib/R/site-library"
DEFAULT_FLAGS = ("-std=c++14 -O3 -march=native -DNDEBUG -DEIGEN_NO_DEBUG "
                 "-DBOOST_DISABLE_ASSERTS -D_REENTRANT "
                 "-DBOOST_PENDING_INTEGER_LOG2_HPP -DBOOST_NO_AUTO_PTR "
                 "-Wno-ignored-attributes -Wno-deprecated-declarations")
TOL = 1e-9


def say(*a):
    print(*a, file=sys.stderr, flush=True)


def includes():
    """-I options for StanHeaders, Eigen (RcppEigen) and Boost (BH)."""
    sh = os.path.join(R_SITE, "StanHeaders", "include")
    return ["-I" + os.path.join(sh, "src"), "-I" + sh,
            "-I" + os.path.join(R_SITE, "RcppEigen", "include"),
            "-I" + os.path.join(R_SITE, "BH", "include"),
            "-include", os.path.join(sh, "stan", "math", "prim", "mat", "fun",
                                     "Eigen.hpp")]


def libs():
    """StanHeaders' static library: SUNDIALS' CVODES (integrate_ode_bdf);
    the other models take nothing from it (a static archive adds only
    what is referenced).  rk45 is Boost odeint, header-only."""
    return ["-L" + os.path.join(R_SITE, "StanHeaders", "lib"),
            "-lStanHeaders"]


def reference(name):
    """Stan's reference (tools/stan-references.sh) of NAME, or None."""
    p = os.path.join(SRC, "examples/posteriordb/references", name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None


def tolerance(name):
    """The gradient agreement asked of a posterior (the harness's
    max|dg| / max|g|): TOL; or 100 times the ODE solver's rtol; or, where
    references/NAME.tol.json bounds each gradient element
    (tests/posteriordb_ref.py --tolerances: gp_pois_regr's rounding, the
    ODE posteriors), twice the largest bound over the largest |g|."""
    ref = reference(name)
    tol = TOL
    if ref and ref.get("ode_rtol"):
        tol = max(tol, 100 * ref["ode_rtol"])
    p = os.path.join(SRC, "examples/posteriordb/references",
                     name + ".tol.json")
    if ref and os.path.exists(p):
        b = max(max(pt["tol_grad"]) for pt in json.load(open(p))["points"])
        g = max(max(abs(v) for v in pt["grad"]) for pt in ref["points"])
        # the bounds are upper bounds (lotka_volterra's atol of 1e-3 makes
        # its gradient's loose): one number capped at 1e-3 still catches a
        # wrong model
        tol = max(tol, min(2 * b / max(g, 1e-300), 1e-3))
    return tol


def reference_points(name, path):
    """Write the reference's points in bench_posteriordb's points format
    (Stan's lp and gradient, from rstan, in place of kiln's)."""
    pts = reference(name)["points"]
    with open(path, "w") as f:
        f.write("%d %d\n" % (len(pts[0]["unc"]), len(pts)))
        for pt in pts:
            f.write(" ".join("%.17g" % v for v in
                             pt["unc"] + [pt["lp"]] + pt["grad"]) + "\n")


def have_rstan():
    if not shutil.which("Rscript"):
        return "Rscript not found"
    p = subprocess.run(["Rscript", "-e", "library(rstan)"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return "R has no rstan (Debian: apt-get install r-cran-rstan)"
    if not os.path.isdir(os.path.join(R_SITE, "BH", "include", "boost")):
        return ("no Boost headers in %s/BH/include (Debian: ln -s /usr/include "
                "%s/BH/include)" % (R_SITE, R_SITE))
    return None


def build_stan(cache, model, data):
    """Returns (binary, data.R, compile seconds or None if cached) or
    (None, message, None)."""
    cpp_dir = os.path.join(cache, "harness")
    os.makedirs(cpp_dir, exist_ok=True)
    hpp = os.path.join(cpp_dir, model + ".hpp")
    rdump = os.path.join(cpp_dir, data + ".data.R")
    if not os.path.exists(hpp) or not os.path.exists(rdump):
        p = subprocess.run(["nice", "-n", "19", "Rscript",
                            os.path.join(SRC, "bench", "stan-cpp.R"), model,
                            data, hpp + ".tmp", rdump + ".tmp"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            return None, "stanc: " + p.stderr.strip()[-200:], None
        os.replace(hpp + ".tmp", hpp)
        os.replace(rdump + ".tmp", rdump)
    harness = os.path.join(SRC, "bench", "stan_harness.cpp")
    flags = os.environ.get("KILN_STAN_CXXFLAGS", DEFAULT_FLAGS).split()
    cmd = ["g++"] + flags + includes() + ["-include", hpp, harness] + libs()
    key = hashlib.sha256()
    for f in (hpp, harness):
        key.update(open(f, "rb").read())
    # the command without the source tree's path: one cache for every
    # checkout (the files' contents are hashed above)
    key.update(" ".join(["g++"] + flags + includes() + libs()).encode())
    exe = os.path.join(cpp_dir, "%s-%s" % (model, key.hexdigest()[:16]))
    if os.path.exists(exe):
        t = exe + ".compile_s"
        return exe, rdump, float(open(t).read()) if os.path.exists(t) else None
    say("bench/stan.py: compiling %s (about a minute)" % model)
    t0 = time.time()
    p = subprocess.run(["nice", "-n", "19"] + cmd + ["-o", exe + ".tmp"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, "g++: " + p.stderr.strip()[-300:], None
    el = time.time() - t0
    os.replace(exe + ".tmp", exe)
    with open(exe + ".compile_s", "w") as f:
        f.write("%.1f\n" % el)
    return exe, rdump, el


def kv(out):
    return dict(x.split("=", 1) for x in out.split())


def run_kiln(bench, kg, data, env_extra, seconds, points=None):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, KILN_CACHE_DIR=cache, **env_extra)
        if points:
            env["KILN_BENCH_PDB_POINTS"] = points
        p = subprocess.run([bench, kg, data, str(seconds)], env=env,
                           capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return kv(p.stdout), None


def data_file(name):
    """As bench/posteriordb.py finds it (diamonds' data is not shipped)."""
    for d in ("examples/posteriordb/data", "examples/data/posteriordb",
              "../shared/posteriordb/data"):
        p = os.path.join(SRC, d, name + ".json")
        if os.path.exists(p):
            return p
    return None


def stan_round(r, seconds):
    """One timing of Stan's harness for row r (its points file written)."""
    p = subprocess.run([r["exe"], r["rdump"], r["points"], str(seconds)],
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        r["skip"] = "Stan: " + p.stderr.strip()[-160:]
        return
    s = kv(p.stdout)
    r["dim"] = s["dim"]
    r["stan"].append(float(s["ns_per_grad"]))
    r["err"] = max(r["err"] or 0.0, float(s["grad_rel_err"]))


def main():
    build = sys.argv[1]
    names = sys.argv[2:] or [
        line.strip() for line in open(
            os.path.join(SRC, "examples/posteriordb/CORPUS"))
        if line.strip() and not line.startswith("#")]
    if not sys.argv[2:]:        # + the references without a model yet
        refdir = os.path.join(SRC, "examples/posteriordb/references")
        names += sorted(f[:-5] for f in os.listdir(refdir)
                        if f.endswith(".json") and not f.endswith(".tol.json")
                        and f[:-5] not in names)
    why = have_rstan()
    if why:
        say("bench-stan: skipped: " + why)
        sys.exit(2)
    bench = os.path.join(build, "bench", "bench_posteriordb")
    cache = os.environ.get("KILN_STAN_CACHE", "/tmp/kiln-stan-cache")
    seconds = float(os.environ.get("KILN_BENCH_PDB_SECONDS", "1"))
    rounds = int(os.environ.get("KILN_BENCH_ROUNDS", "3"))
    tmp = tempfile.mkdtemp(prefix="kiln-bench-stan.")
    rows = []
    for name in names:          # build everything first, one at a time
        dname, model = name.split("-", 1)
        kg = os.path.join(SRC, "examples/posteriordb", model + ".kg")
        data = data_file(dname)
        r = {"name": name, "kg": kg, "data": data, "pol": [], "llvm": [],
             "stan": [], "err": None}
        rows.append(r)
        if not data or not (os.path.exists(kg) or reference(name)):
            r["skip"] = "no kiln model or data"
            continue
        exe, rdump, cs = build_stan(cache, model, dname)
        if not exe:
            r["skip"] = rdump
            say("%s: %s" % (name, rdump))
            continue
        r.update(exe=exe, rdump=rdump, compile_s=cs,
                 points=os.path.join(tmp, name + ".points"),
                 tol=tolerance(name))
        if not os.path.exists(kg):      # Stan alone, at the reference's points
            r["stan_only"] = True
            reference_points(name, r["points"])
    for rnd in range(rounds):
        for r in rows:
            if "skip" in r:
                continue
            if r.get("stan_only"):
                stan_round(r, seconds)
                continue
            llvm, err = run_kiln(bench, r["kg"], r["data"],
                                 {"KILN_BACKEND": "llvm"}, seconds,
                                 r["points"] if rnd == 0 else None)
            if not llvm:
                r["skip"] = "kiln llvm: " + err[-120:]
                continue
            r["dim"] = llvm["dim"]
            r["llvm"].append(float(llvm["ns_per_grad"]))
            pol, err = run_kiln(bench, r["kg"], r["data"], {}, seconds)
            if pol:
                r["pol"].append(float(pol["ns_per_grad"]))
                r["tiered"] = pol["tiered"]
            stan_round(r, seconds)
        say("round %d/%d done" % (rnd + 1, rounds))
    shutil.rmtree(tmp, ignore_errors=True)

    med = statistics.median
    print("| posterior | params | Stan ns/grad | kiln ns/grad (policy, "
          "tiered) | kiln ns/grad (llvm) | kiln / Stan (policy) | "
          "kiln / Stan (llvm) | grad rel err | Stan compile s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rp, rl, bad = [], [], []
    for r in rows:
        if "skip" in r or not r["stan"]:
            print("| %s | - | - | skipped: %s | | | | | |"
                  % (r["name"], r.get("skip", "no Stan time")))
            continue
        st = med(r["stan"])
        if r.get("stan_only"):
            ok = r["err"] <= r["tol"]
            print("| %s | %s | %.0f | no kiln model yet | - | - | - | "
                  "%.1e vs rstan%s | %s |" % (
                      r["name"], r["dim"], st, r["err"],
                      "" if ok else " (over %.0e)" % r["tol"],
                      "%.1f" % r["compile_s"] if r.get("compile_s") else "-"))
            if not ok:
                bad.append(r["name"])
            continue
        kl = med(r["llvm"])
        kp = med(r["pol"]) if r["pol"] else None
        ok = r["err"] <= r["tol"]
        if ok:
            rl.append(kl / st)
            if kp:
                rp.append(kp / st)
        else:
            bad.append(r["name"])
        print("| %s | %s | %.0f | %s | %.0f | %s | %.2f | %.1e%s | %s |" % (
            r["name"], r["dim"], st,
            "%.0f (%s)" % (kp, r["tiered"]) if kp else "-", kl,
            "%.2f" % (kp / st) if kp else "-", kl / st, r["err"],
            "" if ok else " (over %.0e: left out)" % r["tol"],
            "%.1f" % r["compile_s"] if r.get("compile_s") else "-"))
        sys.stdout.flush()
    print()
    for label, rs in (("policy", rp), ("llvm", rl)):
        if rs:
            print("median kiln / Stan (%s) over %d posteriors: %.2f (best "
                  "%.2f, worst %.2f; kiln slower on %d)" % (
                      label, len(rs), med(rs), min(rs), max(rs),
                      sum(1 for x in rs if x > 1)))
    flags = os.environ.get("KILN_STAN_CXXFLAGS", DEFAULT_FLAGS)
    print()
    print("Stan: stanc C++ (rstan %s) + bench/stan_harness.cpp, g++ %s; "
          "median of %d interleaved rounds of %g s each side."
          % (subprocess.run(["Rscript", "-e",
                             "cat(as.character(packageVersion('rstan')))"],
                            capture_output=True, text=True).stdout.strip(),
             flags, rounds, seconds))
    if bad:
        print("gradient disagreement over the tolerance: " + ", ".join(bad))
        sys.exit(1)


main()
