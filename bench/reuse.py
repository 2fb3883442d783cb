#!/usr/bin/python3
"""bench/reuse.py — fused code shared across related models (issue 27).

Usage: /usr/bin/python3 bench/reuse.py BUILDDIR [--repeat N] [--quick]

For each pair of related models (A compiled first, then B):
  keys      the share of B's kernel keys that A's kernels have, from
            `kiln explain --json`: with fusion on and literal lifting (the
            default), fusion on without lifting (the policy's passes minus
            `lift`: the code before issue 27), and fusion off;
  llvm      one cache directory, `kiln run A` then `kiln run B` with
            --backend llvm --tiers off --cache-report: B's hits and misses
            and B's compile time (compile_ms of --json), against B alone
            in an empty cache;
  per call  B's median call over --repeat calls from the warm cache, with
            and without lifting (llvm; the lifted literals must not slow
            the kernels).
Prints a markdown table.  Timings are wall-clock and noisy on a shared
machine; run it on a quiet one for the record.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASSES = "canonicalize, fold, cse, promote, join_slices, pairwise, fuse, loops"


def policy(tmp, name, passes):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write("kiln_policy: 1\npasses: [%s]\n" % passes)
    return path


def keys(kiln, model, pol):
    args = [kiln, "explain", model, "--json"] + (["--policy", pol] if pol else [])
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    return [k["key"] for k in json.loads(out.stdout)["kernels"]]


def share(a, b):
    s = set(a)
    return sum(1 for k in b if k in s), len(b)


def run(kiln, model, data, cache, extra):
    args = [kiln, "run", model, "--random-inputs", "1", "--backend", "llvm",
            "--tiers", "off", "--json", "--cache-report"] + extra
    if data:
        args += ["--data", data]
    env = dict(os.environ, KILN_CACHE_DIR=cache)
    out = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
    j = json.loads(out.stdout)
    m = re.search(r"(\d+) hits, (\d+) misses", out.stderr)
    hits, misses = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    return j["timing"], hits, misses


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    repeat = 20000
    if "--repeat" in sys.argv:
        repeat = int(sys.argv[sys.argv.index("--repeat") + 1])
    kiln = os.path.join(build, "tools", "kiln")
    gen = os.path.join(build, "tools", "kiln-gen")
    tmp = tempfile.mkdtemp(prefix="kiln-reuse-")
    nolift = policy(tmp, "nolift", PASSES)
    nofuse = policy(tmp, "nofuse", "canonicalize, fold, cse, promote, join_slices, pairwise")
    g = os.path.join(tmp, "gen")
    os.makedirs(g)
    for extra in ([], ["--obs", "40"]):
        for lik in ("gamma", "lognormal"):
            subprocess.run([gen, "pooled", "--groups", "18", "--shared", "24",
                            "--likelihood", lik, "-o", g] + extra,
                           check=True, capture_output=True)
    pdb = os.path.join(SRC, "examples", "posteriordb")
    dat = os.path.join(SRC, "examples", "data", "posteriordb")
    es = os.path.join(dat, "eight_schools.json")
    rn = os.path.join(dat, "radon_mn.json")
    pairs = [
        ("eight schools centred -> non-centred",
         os.path.join(pdb, "eight_schools_centered.kg"), es,
         os.path.join(pdb, "eight_schools_noncentered.kg"), es),
        ("radon varying intercept -> varying slope",
         os.path.join(pdb, "radon_variable_intercept_centered.kg"), rn,
         os.path.join(pdb, "radon_variable_slope_centered.kg"), rn),
        ("pooled 18/24 Gamma -> LogNormal",
         os.path.join(g, "pooled_g18_p24_gamma.kg"), None,
         os.path.join(g, "pooled_g18_p24_lognormal.kg"), None),
        ("pooled 18/24 Gamma, 20 -> 40 observations a group",
         os.path.join(g, "pooled_g18_p24_gamma.kg"), None,
         os.path.join(g, "pooled_g18_p24_gamma_o40.kg"), None),
        ("eight schools, prior scale 5 -> 10 (literals only)",
         os.path.join(SRC, "examples", "eight_schools.kg"), None,
         os.path.join(SRC, "tests", "graphs", "reuse", "eight_schools_scale10.kg"), None),
    ]
    print("| pair | B kernels | keys shared: fused + lifted | fused, not lifted | not fused "
          "| llvm hits of B after A | B compile ms after A | B compile ms alone "
          "| B µs/call lifted | B µs/call not lifted |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, a, da, b, db in pairs:
        cols = []
        for pol in (None, nolift, nofuse):
            h, n = share(keys(kiln, a, pol), keys(kiln, b, pol))
            cols.append("%d/%d (%.0f %%)" % (h, n, 100.0 * h / max(n, 1)))
        both = tempfile.mkdtemp(dir=tmp)
        alone = tempfile.mkdtemp(dir=tmp)
        run(kiln, a, da, both, [])
        tb, hits, misses = run(kiln, b, db, both, [])
        ta, _, _ = run(kiln, b, db, alone, [])
        calls = []
        for pol in ([], ["--policy", nolift]):
            d = tempfile.mkdtemp(dir=tmp)
            run(kiln, b, db, d, pol)   # compile into the cache
            best = None
            for _ in range(3):
                t, _, _ = run(kiln, b, db, d, pol + ["--repeat", str(repeat)])
                v = t["call_ms_median"] * 1000.0
                best = v if best is None or v < best else best
            calls.append("%.2f" % best)
        print("| %s | %d | %s | %s | %s | %d/%d | %.0f | %.0f | %s | %s |" % (
            name, hits + misses, cols[0], cols[1], cols[2], hits, hits + misses,
            tb["compile_ms"], ta["compile_ms"], calls[0], calls[1]))
        sys.stdout.flush()
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
