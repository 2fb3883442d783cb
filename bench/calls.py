#!/usr/bin/python3
"""bench/calls.py — the driver of make bench-calls (bench/calls.sh runs it;
docs/performance.md "Calls").  Per logp+gradient call time and cold compile
for each model under kiln interp, tcc, llvm and the default policy, the C
floors (bench/floor_*.c) and numba (bench/kg2numba.py), rounds interleaved.

calls.py KILN TMPDIR SRCDIR MODEL.kg...
Environment: KILN_BENCH_ROUNDS (3), KILN_BENCH_NUMBA_BUDGET (seconds a
numba cold compile may take before the model is skipped; 120),
KILN_BENCH_FLOORS (a directory holding the floor_* programs; the script
skips the floors without it).  Exit status 1 when an engine's outputs
disagree with kiln interp (floor: 1e-12 relative, numba: 1e-8: its digamma is the translator's truncated series)."""
import json, os, subprocess, sys, tempfile
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kg2numba

kiln, tmp, src = sys.argv[1], sys.argv[2], sys.argv[3]
models = sys.argv[4:]
rounds = int(os.environ.get("KILN_BENCH_ROUNDS", "3"))
budget = float(os.environ.get("KILN_BENCH_NUMBA_BUDGET", "120"))
floors = os.environ.get("KILN_BENCH_FLOORS", "")
py = "/usr/bin/python3"
failed = []

def label(path):
    b = os.path.basename(path)[:-3]
    for pre, rep in (("pooled_g", "pooled "), ("additive_c", "additive ")):
        if b.startswith(pre):
            b = rep + b[len(pre):].replace("_p", "/").replace("_", " ")
    return b.replace("_", " ")

def run_kiln(path, iargs, be, repeat):
    cache = tempfile.mkdtemp(dir=tmp, prefix="cache.")      # cold compile
    cmd = [kiln, "run", os.path.basename(path), "--repeat", str(repeat), "--json"] + iargs
    if be != "default":
        cmd += ["--backend", be]
    env = dict(os.environ, KILN_CACHE_DIR=cache)
    p = subprocess.run(cmd, cwd=os.path.dirname(path), env=env,
                       capture_output=True, text=True)
    subprocess.run(["rm", "-rf", cache])
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1:]
    return json.loads(p.stdout), None

def relerr(a, b):
    a, b = np.asarray(a, float).ravel(), np.asarray(b, float).ravel()
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))

def compare(who, model, outs, ref, tol):
    worst = max(relerr(outs[n], ref[n]["value"]) for n in ref)
    if not worst <= tol:
        failed.append("%s on %s: outputs differ from kiln by %.3g relative (tolerance %g)"
                      % (who, model, worst, tol))
    return worst

# ---- per model set-up: inputs, numba module, floor ----
M = []
for path in models:
    m = {"path": path, "label": label(path), "t": {}, "c": {}}
    p = kg2numba.prepare(kiln, path, os.path.join(tmp, "numba", "m%d" % len(M)))
    m["iargs"], m["flat"] = p["iargs"], p["flat"]
    if "skip" in p:
        m["numba_skip"] = p["skip"]
    else:
        m["numba_mod"], m["numba_npz"] = p["module"], p["npz"]
    flat = p["flat"]
    stem = os.path.basename(path)[:-3]
    exe = os.path.join(floors, "floor_" + stem) if floors else ""
    if exe and os.access(exe, os.X_OK):
        m["floor"] = exe
        with open(os.path.join(tmp, stem + ".in"), "w") as f:
            f.write("\n".join("%.17g" % x for x in flat) + "\n")
        m["floor_in"] = os.path.join(tmp, stem + ".in")
    M.append(m)

try:
    import numba
    have_numba = numba.__version__
except ImportError:
    have_numba = None
    print("numba not installed (apt-get install python3-numba): numba column skipped")

engines = ["interp", "tcc", "llvm", "default"]
for r in range(rounds):
    for m in M:
        for be in engines:
            if m.get("skip_" + be):
                continue
            rep = m.get("repeat", 50)
            out, err = run_kiln(m["path"], m["iargs"], be, rep)
            if out is None:
                m["skip_" + be] = "kiln: %s" % " ".join(err)
                print("%s, %s: skipped (%s)" % (m["label"], be, m["skip_" + be]), flush=True)
                continue
            if "ref" not in m:
                m["ref"] = out["outputs"]
            else:
                compare("kiln " + be, m["label"], {n: v["value"] for n, v in out["outputs"].items()},
                        m["ref"], 1e-9)
            m["t"].setdefault(be, []).append(out["timing"]["call_ms_median"] * 1e3)
            m["c"].setdefault(be, []).append(out["timing"]["compile_ms"])
            if r == 0 and be == "interp":   # ~0.2 s of calls per run
                m["repeat"] = int(min(20000, max(20, 2e5 / max(m["t"]["interp"][0], 0.01))))
        if "floor" in m:
            args = [m["floor"]] + ([os.path.join(src, "examples/data/radon.csv")]
                                   if "radon" in m["floor"] else []) + [m["floor_in"], "20000"]
            p = subprocess.run(args, capture_output=True, text=True, check=True).stdout
            got = {l.split()[0]: [float(x) for x in l.split()[1:]] for l in p.splitlines()}
            m["t"].setdefault("floor", []).append(got.pop("us_per_call")[0])
            m["floor_err"] = compare("C floor", m["label"], got, m["ref"], 1e-12)
        if have_numba and "numba_mod" in m and not m.get("numba_skip"):
            rep = max(20, min(20000, m.get("repeat", 50)))
            try:
                p = subprocess.run([py, os.path.abspath(kg2numba.__file__), m["numba_mod"],
                                    m["numba_npz"], str(rep)], capture_output=True, text=True,
                                   timeout=budget if r == 0 else None)
            except subprocess.TimeoutExpired:
                m["numba_skip"] = "cold compile over KILN_BENCH_NUMBA_BUDGET=%gs" % budget
                print("%s, numba: skipped (%s)" % (m["label"], m["numba_skip"]), flush=True)
                continue
            if p.returncode != 0:
                m["numba_skip"] = "numba failed: " + " ".join(p.stderr.strip().splitlines()[-1:])
                print("%s: %s" % (m["label"], m["numba_skip"]), flush=True)
                continue
            o = json.loads(p.stdout)
            m["t"].setdefault("numba", []).append(o["us_per_call"])
            if r == 0:
                m["c"]["numba"] = [o["compile_ms"]]     # cold: the cache was empty
            outs = dict(zip(m["ref"].keys(), o["outputs"]))
            m["numba_err"] = compare("numba", m["label"], outs, m["ref"], 1e-8)
    print("round %d/%d done" % (r + 1, rounds), file=sys.stderr, flush=True)

med = lambda v: sorted(v)[(len(v) - 1) // 2] if v else None
cols = ["floor", "numba", "interp", "tcc", "llvm", "default"]
fmt = lambda x: "–" if x is None else ("%.3g" % x if x < 100 else "%.0f" % x)
print()
print("µs per logp+gradient call (median of %d interleaved rounds), cold compile ms in ( )" % rounds)
print()
print("| model | C floor | numba | kiln interp | kiln tcc | kiln llvm | kiln default |")
print("|---|---|---|---|---|---|---|")
for m in M:
    row = []
    for c in cols:
        t, cm = med(m["t"].get(c, [])), med(m["c"].get(c, []))
        row.append(fmt(t) + (" (%s)" % fmt(cm) if cm is not None else ""))
    print("| %s | %s |" % (m["label"], " | ".join(row)))
print()
# the ratios issue 14's goals name, and the default policy against the issue's figures
issue = {"radon": (39, 73), "eight schools": (2.7, 5.2), "pooled 18/24 gamma": (98, 98),
         "pooled 48/64 gamma": (887, 887), "additive 20": (154, 154)}
print("| model | llvm / floor | llvm / numba | interp / llvm | default now (µs) | default in issue 14 (µs) |")
print("|---|---|---|---|---|---|")
for m in M:
    g = lambda c: med(m["t"].get(c, []))
    q = lambda a, b: "–" if a is None or b is None else "%.2f" % (a / b)
    iss = issue.get(m["label"])
    print("| %s | %s | %s | %s | %s | %s |" % (m["label"], q(g("llvm"), g("floor")),
          q(g("llvm"), g("numba")), q(g("interp"), g("llvm")), fmt(g("default")),
          "–" if not iss else ("%g" % iss[0] if iss[0] == iss[1] else "%g–%g" % iss)))
print()
for m in M:
    for k in ("floor_err", "numba_err"):
        if k in m:
            print("%s: %s max relative difference from kiln %.2g" % (m["label"], k[:-4], m[k]))
    for k, v in m.items():
        if k.startswith("skip_") or k == "numba_skip":
            print("%s: %s skipped: %s" % (m["label"], k.replace("skip_", "").replace("_skip", ""), v))
print("numba: %s; translator ops: %s" % (have_numba or "not installed",
      "add sub mul true_div neg square exp log log1p sqrt sin gammaln digamma sum expand_dims squeeze fill take inc_subtensor"))
for f in failed:
    print("FAIL: " + f)
sys.exit(1 if failed else 0)
