#!/usr/bin/env python3
"""bench/pytensor_bench.py: PyMC models under kiln's KILN mode against
PyTensor's NUMBA and C modes and the rewrite-only floor (issue 25;
`make bench-pytensor`; docs/performance.md "PyTensor / PyMC").

Every measurement runs in a fresh child process (this script with
``--child``), under ``nice -n 10`` and a time limit; a child that exceeds
its limit is killed and reported as "> LIMIT s", never dropped.  For each
model (bench/pymc_models.py) and each mode:

* ``cold``:  empty caches (a new PyTensor compiledir, NUMBA_CACHE_DIR and
  KILN_CACHE_DIR for this model and mode): wall time of
  ``model.logp_dlogp_function(ravel_inputs=True, mode=...)`` plus its first
  call, and the child's peak RSS (getrusage ru_maxrss);
* ``warm``:  a second process on the same (now filled) caches: the same
  measures, then logp+dlogp per call from Python (the compiled PyTensor
  function with ``trust_input``, median of batch means), and for KILN the
  per call through kiln's model object (kiln.pymc, no PyTensor VM) when
  that module exists;
* ``sample``: a third process on the warm caches: ``pm.sample(tune=1000,
  draws=1000, chains=1, cores=1)`` wall time including its compile.

Modes: KILN (``import kiln.pytensor``; mode "KILN"), NUMBA (mode "NUMBA",
numba's cache on), C (PyTensor's default "FAST_RUN" mode, C linker; the
warm process keeps the compiledir), FLOOR (``Mode(linker="py",
optimizer="fast_run")``: PyTensor's rewrites and nothing compiled; its time
is the compile alone, without the first call, which PyTensor's Python
linker cannot run on the larger models: an elementwise node of more than
32 operands).  FLOOR has no cache, so only its cold compile is measured.

The parent never imports PyTensor.  Results go to a JSON file and a
Markdown table (``--out``, ``--md``); ratios are computed from the one run.
"""

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)

MODES = ("FLOOR", "KILN", "NUMBA", "C")
QUICK_MODELS = ("eight_schools", "radon", "pooled_6_8_gamma")
SAMPLE_MODES = ("KILN", "NUMBA", "C")


# --------------------------------------------------------------------------
# child side: one measurement in this process

def _rss_mb():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _cpu_s():
    """CPU seconds of this process (every thread) and its finished
    children (g++): a figure the machine's other load hardly moves."""
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _mode_object(mode):
    if mode == "FLOOR":
        from pytensor.compile.mode import Mode
        return Mode(linker="py", optimizer="fast_run")
    if mode == "KILN":
        import kiln.pytensor  # noqa: F401  (registers the KILN mode)
        return "KILN"
    if mode == "NUMBA":
        return "NUMBA"
    if mode == "C":
        return "FAST_RUN"
    raise ValueError(f"unknown mode {mode}")


def kiln_model_object(model):
    """Hook for kiln's model object over a PyMC model (kiln.pymc, engineer
    "pymc").  Returns (logp_grad(theta) -> (float, ndarray), how) or raises
    with the reason.  Accepts the names the package contract allows."""
    import kiln.pymc as kpm
    for name in ("from_pymc", "model_from_pymc", "compile_model", "to_kiln",
                 "KilnModel"):
        fn = getattr(kpm, name, None)
        if fn is None:
            continue
        km = fn(model)
        if hasattr(km, "log_density_gradient"):
            return km.log_density_gradient, f"kiln.pymc.{name}"
        if hasattr(km, "logp_dlogp"):
            return km.logp_dlogp, f"kiln.pymc.{name}"
    raise RuntimeError("kiln.pymc has no from_pymc/compile_model/to_kiln")


def _tier_up(fn, kilns, x, calls=300, timeout=120.0):
    """kiln's steady state before timing calls: enough calls for the tiers
    to time every kernel, then the tier-up compiles waited for (NUMBA and C
    compile everything before their first call)."""
    for _ in range(calls):
        fn(x)
    for k in kilns:
        k.tier_wait(timeout)


def _per_call(fn, x, quick):
    """Median over batches of the mean time of one call of fn(x), seconds."""
    fn(x)
    target = 0.05 if quick else 0.25
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn(x)
        t = time.perf_counter() - t0
        if t >= target or n >= 1 << 22:
            break
        n *= 4 if t < target / 8 else 2
    batches = 3 if quick else 7
    res = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(x)
        res.append((time.perf_counter() - t0) / n)
    return statistics.median(res), n * batches


def child(spec):
    import warnings
    warnings.filterwarnings("ignore")
    out = {"ok": False}
    t0 = time.perf_counter()
    import numpy as np
    import pymc as pm
    sys.path.insert(0, HERE)
    import pymc_models
    from pymc.blocking import DictToArrayBijection
    mode = _mode_object(spec["mode"])   # KILN: imports kiln.pytensor here
    out["import_s"] = time.perf_counter() - t0
    model = pymc_models.build(spec["model"])
    out["rss_base_mb"] = _rss_mb()
    x0 = DictToArrayBijection.map(model.initial_point(0)).data
    out["n_unc"] = int(x0.size)

    if spec["phase"] == "sample":
        t = time.perf_counter()
        with model:
            tr = pm.sample(tune=spec["tune"], draws=spec["draws"], chains=1,
                           cores=1, random_seed=1, progressbar=False,
                           compute_convergence_checks=False,
                           return_inferencedata=False,
                           compile_kwargs={"mode": mode})
        out["sample_s"] = time.perf_counter() - t
        try:
            out["n_grad"] = int(np.sum(tr.get_sampler_stats("n_steps")))
        except Exception:  # noqa: BLE001
            pass
        out["rss_mb"] = _rss_mb()
        out["ok"] = True
        return out

    t = time.perf_counter()
    cpu0 = _cpu_s()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vgf = model.logp_dlogp_function(ravel_inputs=True, mode=mode)
    fb = [str(w.message).splitlines()[0] for w in caught
          if type(w.message).__name__ == "KilnFallbackWarning"]
    if fb:
        out["fallback"] = fb[0][:300]
    vgf.set_extra_values({})
    fn = vgf._pytensor_function
    out["compile_only_s"] = time.perf_counter() - t
    if spec["mode"] == "FLOOR":
        # the floor is PyTensor's rewrites alone: its Python linker cannot
        # run an elementwise node of more than 32 operands, which PyMC's
        # summed logp becomes on the larger models, so its first call is
        # tried but not part of the time
        out["compile_s"] = out["compile_only_s"]
        out["compile_cpu_s"] = _cpu_s() - cpu0
        out["rss_mb"] = _rss_mb()
        try:
            fn(x0)
            out["first_call"] = "ok"
        except Exception as e:  # noqa: BLE001
            out["first_call"] = f"{type(e).__name__}"
        out["ok"] = True
    else:
        logp, grad = fn(x0)
        out["compile_s"] = time.perf_counter() - t
        out["compile_cpu_s"] = _cpu_s() - cpu0
        out["rss_mb"] = _rss_mb()
        if spec["mode"] == "KILN":
            # kiln's disk cache right after the first call: a warm process
            # whose first call compiled nothing leaves it as it found it
            out["kiln_cache_first"] = sorted(
                _dir_state(os.environ["KILN_CACHE_DIR"]))
        out["logp"] = float(logp)
        out["finite"] = bool(np.isfinite(logp) and
                             np.all(np.isfinite(grad)))
        out["ok"] = True
    if spec.get("count_nodes"):          # after the timing: it rewrites again
        out["nodes"] = pymc_models.graph_nodes(model)
    if spec["phase"] != "warm":
        return out

    fn.trust_input = True
    xr = x0 + 0.1 * np.random.default_rng(2).standard_normal(x0.size)
    if spec["mode"] == "KILN":
        _tier_up(fn, [n.op.fn for n in fn.maker.fgraph.toposort()
                      if type(n.op).__name__ == "KilnOp"], xr)
    out["call_s"], out["calls"] = _per_call(fn, xr, spec["quick"])
    if spec["mode"] == "KILN":
        try:
            t = time.perf_counter()
            lg, how = kiln_model_object(model)
            v, g = lg(xr)
            _tier_up(lg, [lg.__self__], xr)
            out["obj_compile_s"] = time.perf_counter() - t
            out["obj_how"] = how
            out["obj_match"] = bool(np.isclose(v, fn(xr)[0], rtol=1e-9))
            out["obj_call_s"], _ = _per_call(lg, xr, spec["quick"])
        except Exception as e:  # noqa: BLE001
            out["obj_error"] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
    return out


# --------------------------------------------------------------------------
# parent side

def _dir_state(d):
    """Set of (path, size, mtime) under d: a backend compile that writes to
    a cache changes it."""
    st = set()
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            if root == d and f == "stats":   # the cache's hit/miss counters
                continue
            try:
                s = os.stat(p)
            except OSError:
                continue
            st.add((os.path.relpath(p, d), s.st_size, s.st_mtime_ns))
    return st


class Runner:
    def __init__(self, args):
        self.args = args
        self.root = args.workdir or tempfile.mkdtemp(prefix="kiln-bench-pt-")
        os.makedirs(self.root, exist_ok=True)
        self.python = args.python
        self.base_env = child_env(args)
        self.helpers = None

    def cache_dirs(self, model, mode):
        scope = model if self.args.cache_scope == "model" else "all"
        base = os.path.join(self.root, scope, mode)
        d = {k: os.path.join(base, k) for k in ("pytensor", "numba", "kiln")}
        fresh = not os.path.isdir(d["pytensor"])
        for p in d.values():
            os.makedirs(p, exist_ok=True)
        if fresh and mode == "C" and self.args.cache_scope == "model":
            self.install_c_helpers(d["pytensor"])
        return d

    def install_c_helpers(self, base):
        """PyTensor's C helpers (cutils_ext, lazylinker_ext: g++ builds of
        PyTensor itself, ~50-90 s, done once per installation) copied into
        a new compile directory, so C's cold is its model's compile."""
        if self.helpers is None:
            tmpl = os.path.join(self.root, "c-helpers")
            env = dict(self.base_env)
            env["PYTENSOR_FLAGS"] = f"base_compiledir={tmpl}"
            code = ("import pytensor, pytensor.link.c.cutils, "
                    "pytensor.link.c.lazylinker_c, os; "
                    "print(os.path.relpath(pytensor.config.compiledir, "
                    f"{tmpl!r}))")
            r = subprocess.run([self.python, "-c", code], env=env,
                               capture_output=True, text=True, timeout=900)
            rel = r.stdout.strip().splitlines()[-1] if r.returncode == 0 \
                else None
            self.helpers = (tmpl, rel)
        tmpl, rel = self.helpers
        if rel is None:
            return
        for h in ("cutils_ext", "lazylinker_ext"):
            src = os.path.join(tmpl, rel, h)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(base, rel, h))

    def env(self, model, mode):
        e = dict(self.base_env)
        d = self.cache_dirs(model, mode)
        e["PYTENSOR_FLAGS"] = f"base_compiledir={d['pytensor']}"
        if mode != "C" and not self.args.cxx_all:
            # nothing FLOOR, KILN or NUMBA run is PyTensor C code, but
            # PyMC's model construction (constant folding, the initial
            # point) compiles C thunks with g++ unless cxx is empty: each
            # of them as fast as it can be (docs/performance.md)
            e["PYTENSOR_FLAGS"] += ",cxx="
        e["NUMBA_CACHE_DIR"] = d["numba"]
        e["KILN_CACHE_DIR"] = d["kiln"]
        e.pop("KILN_CACHE", None)
        return e, d

    def run(self, model, mode, phase, limit):
        spec = dict(model=model, mode=mode, phase=phase, quick=self.args.quick,
                    tune=self.args.tune, draws=self.args.draws,
                    count_nodes=(phase == "cold" and mode == "FLOOR"
                                 and self.args.count_nodes))
        env, dirs = self.env(model, mode)
        before = _dir_state(dirs["kiln"]) if mode == "KILN" else None
        cmd = ["nice", "-n", str(self.args.nice), self.python,
               os.path.abspath(__file__), "--child", json.dumps(spec)]
        t = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            so, se = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return {"ok": False, "timeout": limit,
                    "wall_s": time.perf_counter() - t,
                    "at": time.strftime("%H:%M", time.gmtime())}
        wall = time.perf_counter() - t
        res = None
        for line in so.splitlines():
            if line.startswith("RESULT "):
                res = json.loads(line[7:])
        if res is None:
            err = [ln for ln in se.strip().splitlines() if ln.strip()]
            res = {"ok": False, "error": (err[-1] if err else
                                          f"exit {p.returncode}")[:300]}
        res["wall_s"] = wall
        res["at"] = time.strftime("%H:%M", time.gmtime())
        if mode == "KILN" and phase == "warm" and res.get("ok"):
            first = {tuple(x) for x in res.pop("kiln_cache_first", [])}
            res["cache_new_files"] = len(first - before)
            res["cache_new_files_process"] = len(_dir_state(dirs["kiln"])
                                                 - before)
        res.pop("kiln_cache_first", None)
        return res


def _status(r):
    """The text of a run that has no number (None when it has one)."""
    if r is None:
        return "-"
    if r.get("skipped"):
        return "not run"
    if r.get("timeout"):
        return f"> {r['timeout']:.0f} s"
    if not r.get("ok"):
        return "fails"
    return None


def fmt_s(r, key="compile_s"):
    st = _status(r)
    v = None if st else r.get(key)
    if v is None:
        return st or "-"
    return f"{v:.2f}" if v < 100 else f"{v:.0f}"


def fmt_us(r, key="call_s"):
    st = _status(r)
    v = None if st else r.get(key)
    if v is None:
        return st or "-"
    v *= 1e6
    return f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def fmt_mb(r):
    if r is None or not r.get("ok") or r.get("rss_mb") is None:
        return fmt_s(r) if r is not None and not r.get("ok") else "-"
    return f"{r['rss_mb']:.0f}"


def ratio(a, b, ka="compile_s", kb="compile_s"):
    """a/b as text; '>' or '<' bounds when one side timed out."""
    def val(r, k):
        if r is None:
            return None, None
        if r.get("timeout"):
            # a process's wall-time limit bounds its compile or sample
            # time, not its CPU time or the time of one call
            if k.endswith("cpu_s") or k.endswith("call_s"):
                return None, None
            return float(r["timeout"]), "limit"
        if r.get("ok") and r.get(k) is not None:
            return float(r[k]), "exact"
        return None, None
    va, sa = val(a, ka)
    vb, sb = val(b, kb)
    if va is None or vb is None or vb == 0:
        return "-", None
    q = va / vb
    if sa == "limit" and sb == "limit":
        return "?", None
    if sa == "limit":
        return f"> {q:.2f}", q
    if sb == "limit":
        return f"< {q:.2f}", q
    return f"{q:.2f}", q


def tables(R, models, modes, sample):
    """Markdown tables from the results dict R[model][mode][phase]."""
    g = lambda m, mo, ph: R.get(m, {}).get(mo, {}).get(ph)  # noqa: E731
    L = []
    L.append("Compile, first call included (s), peak RSS of the process (MB):")
    L.append("")
    hdr = ["model", "nodes", "floor"]
    for mo in ("KILN", "NUMBA", "C"):
        if mo in modes:
            hdr += [f"{mo} cold", f"{mo} warm"]
    hdr += ["KILN cold / floor", "NUMBA cold / KILN cold",
            "KILN warm / floor", "CPU: KILN cold / floor",
            "CPU: NUMBA cold / KILN cold"]
    for mo in ("KILN", "NUMBA", "C"):
        if mo in modes:
            hdr.append(f"RSS {mo} cold")
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|" + " --- |" * len(hdr))
    for m in models:
        fl = g(m, "FLOOR", "cold")
        row = [m, str(fl.get("nodes", "-")) if fl and fl.get("ok") else "-",
               fmt_s(fl)]
        for mo in ("KILN", "NUMBA", "C"):
            if mo in modes:
                row += [fmt_s(g(m, mo, "cold")), fmt_s(g(m, mo, "warm"))]
        row.append(ratio(g(m, "KILN", "cold"), fl)[0])
        row.append(ratio(g(m, "NUMBA", "cold"), g(m, "KILN", "cold"))[0])
        row.append(ratio(g(m, "KILN", "warm"), fl)[0])
        row.append(ratio(g(m, "KILN", "cold"), fl,
                         "compile_cpu_s", "compile_cpu_s")[0])
        row.append(ratio(g(m, "NUMBA", "cold"), g(m, "KILN", "cold"),
                         "compile_cpu_s", "compile_cpu_s")[0])
        for mo in ("KILN", "NUMBA", "C"):
            if mo in modes:
                row.append(fmt_mb(g(m, mo, "cold")))
        L.append("| " + " | ".join(row) + " |")
    L.append("")
    L.append("logp+dlogp per call (µs), warm process: from Python through "
             "the compiled PyTensor function; KILN obj = kiln's model object "
             "(kiln.pymc, no PyTensor VM):")
    L.append("")
    hdr = ["model"] + [m for m in ("KILN", "KILN obj", "NUMBA", "C")
                       if m.split()[0] in modes] + ["KILN obj / NUMBA"]
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|" + " --- |" * len(hdr))
    for m in models:
        kw = g(m, "KILN", "warm")
        row = [m]
        if "KILN" in modes:
            row.append(fmt_us(kw))
            if kw and kw.get("ok") and kw.get("obj_error"):
                row.append("n/a")
            else:
                row.append(fmt_us(kw, "obj_call_s"))
        for mo in ("NUMBA", "C"):
            if mo in modes:
                row.append(fmt_us(g(m, mo, "warm")))
        row.append(ratio(kw, g(m, "NUMBA", "warm"), "obj_call_s",
                         "call_s")[0])
        L.append("| " + " | ".join(row) + " |")
    if sample:
        L.append("")
        L.append("`pm.sample` (1 chain, tune/draws as below), wall time "
                 "including compile (s), warm caches; gradient evaluations "
                 "in brackets:")
        L.append("")
        hdr = ["model"] + [m for m in SAMPLE_MODES if m in modes] + \
              ["KILN / NUMBA", "KILN / C"]
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|" + " --- |" * len(hdr))
        for m in models:
            row = [m]
            for mo in SAMPLE_MODES:
                if mo in modes:
                    r = g(m, mo, "sample")
                    s = fmt_s(r, "sample_s")
                    if r and r.get("ok") and r.get("n_grad"):
                        s += f" [{r['n_grad']}]"
                    row.append(s)
            row.append(ratio(g(m, "KILN", "sample"), g(m, "NUMBA", "sample"),
                             "sample_s", "sample_s")[0])
            row.append(ratio(g(m, "KILN", "sample"), g(m, "C", "sample"),
                             "sample_s", "sample_s")[0])
            L.append("| " + " | ".join(row) + " |")
    notes = []
    for m in models:
        for mo in MODES:
            for ph in ("cold", "warm", "sample"):
                r = g(m, mo, ph)
                if not r:
                    continue
                if not r.get("ok") and not r.get("timeout") \
                        and not r.get("skipped"):
                    notes.append(f"- {m} {mo} {ph}: fails: {r.get('error')}")
                if r.get("fallback"):
                    notes.append(f"- {m} {mo} {ph}: {r['fallback']}")
                if r.get("obj_error") and ph == "warm":
                    notes.append(f"- {m} KILN model object: "
                                 f"{r['obj_error']}")
                if r.get("ok") and r.get("finite") is False:
                    notes.append(f"- {m} {mo} {ph}: logp or dlogp not finite")
    if notes:
        L.append("")
        L.append("Notes:")
        L.append("")
        L += notes
    return "\n".join(L)


def goals(R, models):
    """The issue's goals against this run: list of (goal, verdict, detail)."""
    g = lambda m, mo, ph: R.get(m, {}).get(mo, {}).get(ph)  # noqa: E731
    out = []
    big = [m for m in models if m.startswith(("pooled_18_24", "pooled_48_64"))]

    def check(name, items, pred):
        det, verdict = [], "met"
        if not items:
            out.append((name, "not measured", ""))
            return
        for m, txt, q in items:
            det.append(f"{m} {txt}")
            if q is None:
                verdict = "not measured" if verdict == "met" else verdict
            elif not pred(q):
                verdict = "not met"
        out.append((name, verdict, "; ".join(det)))

    it = []
    for m in big:
        t, q = ratio(g(m, "KILN", "cold"), g(m, "FLOOR", "cold"))
        if t.startswith(">"):
            q = float("inf")
        it.append((m, t, q))
    check("KILN cold compile <= 1.0x floor (pooled 18/24 and larger)", it,
          lambda q: q <= 1.0)
    it = []
    for m in big:
        t, q = ratio(g(m, "NUMBA", "cold"), g(m, "KILN", "cold"))
        if t.startswith("<") or (t.startswith(">") and q < 20.0):
            q = None                     # a bound that does not decide
        it.append((m, t, q))
    check("KILN cold >= 20x faster than NUMBA cold (pooled 18/24 and "
          "larger)", it, lambda q: q >= 20.0)
    it = []
    for size in ("6_8", "18_24", "48_64"):
        gm, lm = f"pooled_{size}_gamma", f"pooled_{size}_lognormal"
        if gm in models and lm in models:
            t, q = ratio(g(lm, "KILN", "cold"), g(gm, "KILN", "cold"))
            it.append((size, f"time {t}", q))
            t, q = ratio(g(lm, "KILN", "cold"), g(gm, "KILN", "cold"),
                         "rss_mb", "rss_mb")
            it.append((size, f"RSS {t}", q))
    check("KILN LogNormal/Gamma compile time and RSS <= 1.2 at every size",
          it, lambda q: q <= 1.2)
    it = []
    for m in models:
        r = g(m, "KILN", "warm")
        t, q = ratio(r, g(m, "FLOOR", "cold"))
        if r and r.get("ok") and r.get("cache_new_files"):
            # kiln compiled something before its first call returned
            t += (f" ({r['cache_new_files']} kernel files compiled before "
                  "the first call returned)")
            q = float("inf")
        it.append((m, t, q))
    check("KILN warm second process <= 1.2x floor, no backend compile "
          "(no new file in KILN_CACHE_DIR when the first call returns)", it, lambda q: q <= 1.2)
    it = []
    for m in models:
        kw = g(m, "KILN", "warm")
        if kw and kw.get("ok") and kw.get("obj_error"):
            it.append((m, "no model object", None))
            continue
        t, q = ratio(kw, g(m, "NUMBA", "warm"), "obj_call_s", "call_s")
        it.append((m, t, q))
    check("per call through kiln's model object <= NUMBA's", it,
          lambda q: q <= 1.0)
    it = []
    for m in models:
        t, q = ratio(g(m, "KILN", "sample"), g(m, "NUMBA", "sample"),
                     "sample_s", "sample_s")
        if g(m, "KILN", "sample") is None:
            continue
        if t.startswith("<"):
            q = 0.0
        it.append((m, t, q))
    check("pm.sample wall time incl. compile below NUMBA's on every model",
          it, lambda q: q < 1.0)
    return out


def zoo_model_names():
    """The keys of pymc_models.ZOO, read without importing PyMC."""
    import ast
    with open(os.path.join(HERE, "pymc_models.py")) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and \
                any(getattr(t, "id", None) == "ZOO" for t in node.targets):
            return [k.value for k in node.value.keys]
    raise RuntimeError("bench/pymc_models.py has no ZOO")


def child_env(a):
    """PYTHONPATH with the shared PyTensor/PyMC and kiln's package; the
    build tree's libkiln.  Returns (env, shared python dir) or raises."""
    shared = os.environ.get("KILN_SHARED") or os.path.join(
        os.path.dirname(SRC), "shared")
    sp = os.path.join(shared, "python")
    pt = os.path.join(sp, "pytensor-2.27.1")
    if not os.path.isdir(pt):
        raise FileNotFoundError(f"no shared PyTensor at {pt} (set "
                                "KILN_SHARED to the shared folder)")
    e = dict(os.environ)
    e["KILN_SHARED"] = shared
    paths = [pt, os.path.join(sp, "site"), os.path.join(SRC, "python")]
    if e.get("PYTHONPATH"):
        paths.append(e["PYTHONPATH"])
    e["PYTHONPATH"] = os.pathsep.join(paths)
    if a.build and "KILN_LIBRARY" not in e:
        lib = os.path.join(a.build, ".libs", "libkiln.so")
        if os.path.exists(lib):
            e["KILN_LIBRARY"] = lib
    return e


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    cpu = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f", {kb / 1048576:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{cpu}, {os.cpu_count()} CPUs{mem}, {platform.system()} " \
           f"{platform.release()}"


def versions(python, env):
    code = ("import numpy, pytensor, numba, importlib.metadata as m;"
            "print(numpy.__version__, pytensor.__version__, numba.__version__,"
            " m.version('pymc'))")
    try:
        v = subprocess.run([python, "-c", code], capture_output=True,
                           text=True, timeout=300, env=env).stdout.split()
        return f"numpy {v[0]}, PyTensor {v[1]}, numba {v[2]}, PyMC {v[3]}"
    except Exception:  # noqa: BLE001
        return "versions unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true",
                    help="three small models, few calls, no pm.sample")
    ap.add_argument("--models", help="comma-separated zoo names (default all;"
                    " --quick: " + ",".join(QUICK_MODELS) + ")")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="comma-separated of " + ",".join(MODES))
    ap.add_argument("--no-sample", action="store_true")
    ap.add_argument("--sample-models", help="comma-separated: pm.sample only"
                    " these (default: every model measured)")
    ap.add_argument("--report", metavar="JSON", help="print the tables of an"
                    " earlier --out file (the models and modes it has) and"
                    " exit")
    ap.add_argument("--tune", type=int, default=1000)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--limit", type=float, default=600.0,
                    help="seconds per compile process (default 600)")
    ap.add_argument("--sample-limit", type=float, default=900.0,
                    help="seconds per pm.sample process (default 900)")
    ap.add_argument("--cache-scope", choices=("model", "run"),
                    default="model",
                    help="model: new caches for every model and mode (every"
                    " cold is cold; C's compile directories get PyTensor's "
                    "own C helpers, built once); run: one cache per mode "
                    "for the run")
    ap.add_argument("--count-nodes", action="store_true", default=True,
                    help=argparse.SUPPRESS)
    ap.add_argument("--sample-modes", default=",".join(SAMPLE_MODES),
                    help="modes pm.sample runs in (default: %(default)s)")
    ap.add_argument("--decide-limit", type=float, default=600.0,
                    help="NUMBA cold's limit may grow to 21x KILN cold's "
                    "time, up to this (s), so the 20x goal is decided")
    ap.add_argument("--skip-after-timeout", action="store_true",
                    help="a mode whose cold compile timed out runs no warm "
                    "or pm.sample process (they would compile again)")
    ap.add_argument("--cxx-all", action="store_true",
                    help="give every mode PyTensor's g++ (default: only C; "
                    "FLOOR, KILN and NUMBA run with PYTENSOR_FLAGS=cxx=)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--build", help="kiln build tree (its .libs/libkiln.so "
                    "becomes KILN_LIBRARY unless that is set)")
    ap.add_argument("--nice", type=int, default=10)
    ap.add_argument("--workdir", help="where the caches go (default: a new "
                    "temporary directory, removed at the end)")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--md", help="write the Markdown tables here")
    ap.add_argument("--resume", metavar="JSON",
                    help="start from the results of an earlier --out file:"
                    " its measurements of the modes not in --modes are kept"
                    " (and said so under the tables), those of --modes are"
                    " measured again")
    ap.add_argument("--list", action="store_true",
                    help="print the zoo's model names and exit")
    a = ap.parse_args()

    if a.child:
        spec = json.loads(a.child)
        res = child(spec)
        print("RESULT " + json.dumps(res), flush=True)
        return 0

    zoo_names = zoo_model_names()
    if a.report:
        with open(a.report) as f:
            old = json.load(f)
        R = old["results"]
        return report(R, [m for m in zoo_names if m in R],
                      old.get("header", f"Run {old.get('started')}"), a.md)
    if a.list:
        print("\n".join(zoo_names))
        return 0
    if a.models:
        models = a.models.split(",")
    else:
        models = list(QUICK_MODELS) if a.quick else zoo_names
    for m in models:
        if m not in zoo_names:
            print(f"pytensor_bench: no zoo model {m!r} (have: "
                  f"{', '.join(zoo_names)})", file=sys.stderr)
            return 2
    modes = a.modes.split(",")
    for mo in modes:
        if mo not in MODES:
            print(f"pytensor_bench: unknown mode {mo!r} (have: "
                  f"{', '.join(MODES)})", file=sys.stderr)
            return 2
    sample = not (a.quick or a.no_sample)
    if a.quick:
        a.limit = min(a.limit, 300.0)

    try:
        runner = Runner(a)
    except FileNotFoundError as e:
        print(f"pytensor_bench: {e}", file=sys.stderr)
        return 77
    R = {}
    kept = []
    if a.resume:
        with open(a.resume) as f:
            old = json.load(f)
        for m, byMode in old["results"].items():
            for mo, byPhase in byMode.items():
                if mo not in modes:
                    R.setdefault(m, {})[mo] = byPhase
                    kept.append(mo)
        kept = sorted(set(kept))
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    mach = machine()
    vers = versions(a.python, runner.base_env)
    print(f"# {mach}; {vers}; started {started}", flush=True)
    t_all = time.perf_counter()
    try:
        for m in models:
            for mo in modes:
                phases = ["cold"] if mo == "FLOOR" else ["cold", "warm"]
                if sample and mo in a.sample_modes.split(",") and (
                        not a.sample_models or m in a.sample_models.split(",")):
                    phases.append("sample")
                for ph in phases:
                    cold = R.get(m, {}).get(mo, {}).get("cold") or {}
                    if ph != "cold" and cold.get("timeout") and a.skip_after_timeout:
                        r = {"ok": False, "skipped": f"{mo} cold over its "
                             f"{cold['timeout']:.0f} s limit"}
                        R.setdefault(m, {}).setdefault(mo, {})[ph] = r
                        print(f"{m:24s} {mo:6s} {ph:6s} not run ({r['skipped']})",
                              flush=True)
                        continue
                    lim = a.sample_limit if ph == "sample" else a.limit
                    kc = R.get(m, {}).get("KILN", {}).get("cold") or {}
                    if mo == "NUMBA" and ph == "cold" and kc.get("ok") \
                            and kc.get("compile_s"):
                        # long enough to decide "NUMBA cold >= 20x KILN
                        # cold" either way, within --decide-limit
                        lim = max(lim, min(a.decide_limit,
                                           21.0 * kc["compile_s"]))
                    r = runner.run(m, mo, ph, lim)
                    R.setdefault(m, {}).setdefault(mo, {})[ph] = r
                    key = "sample_s" if ph == "sample" else "compile_s"
                    extra = ""
                    if ph == "warm" and r.get("call_s"):
                        extra = f" call {r['call_s'] * 1e6:.1f} us"
                        if r.get("obj_call_s"):
                            extra += f" obj {r['obj_call_s'] * 1e6:.1f} us"
                    if r.get("error"):
                        extra += f" ({r['error'][:120]})"
                    if r.get("obj_error"):
                        extra += f" (obj: {r['obj_error'][:100]})"
                    if r.get("ok"):
                        what = (f"{fmt_s(r, key):>10s} s  rss "
                                f"{fmt_mb(r):>6s} MB{extra}")
                    else:
                        what = f"{fmt_s(r, key):>12s}{extra}"
                    print(f"{m:24s} {mo:6s} {ph:6s} {what}", flush=True)
                    if a.out:
                        with open(a.out, "w") as f:
                            json.dump(dict(machine=mach, versions=vers,
                                           started=started, results=R), f,
                                      indent=1)
    finally:
        if not a.workdir:
            shutil.rmtree(runner.root, ignore_errors=True)
    cmd = "make bench-pytensor" + (
        f" BENCH_PYTENSOR_ARGS='{' '.join(sys.argv[1:])}'"
        if len(sys.argv) > 1 else "")
    head = (f"Run {started}, {time.perf_counter() - t_all:.0f} s in all; "
            f"{mach}; {vers}; every measurement a fresh process under "
            f"`nice -n {a.nice}`, limits {a.limit:.0f} s (compile; NUMBA "
            f"cold up to 21x KILN cold, at most {a.decide_limit:.0f} s) and "
            f"{a.sample_limit:.0f} s (sample); pm.sample tune={a.tune} "
            f"draws={a.draws}; caches per {a.cache_scope}. Command: `{cmd}`."
            + (f" Modes {', '.join(kept)} from the earlier run of "
               f"{old.get('started')} (--resume; each measurement's UTC "
               "time is in the JSON results)." if kept else ""))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(dict(machine=mach, versions=vers, started=started,
                           header=head, results=R), f, indent=1)
    return report(R, models, head, a.md)


def report(R, models, head, md_path):
    """Print (and write to md_path) the tables and goals of results R."""
    shown = [mo for mo in MODES if any(mo in R.get(m, {}) for m in models)]
    shown_sample = any("sample" in ph for bm in R.values()
                       for ph in bm.values())
    md = [head, "", tables(R, models, shown, shown_sample), "",
          "Goals (issue 25):", "",
          "| goal | verdict | measured |", "| --- | --- | --- |"]
    for name, verdict, det in goals(R, models):
        md.append(f"| {name} | {verdict} | {det} |")
    text = "\n".join(md) + "\n"
    print()
    print(text)
    if md_path:
        with open(md_path, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
