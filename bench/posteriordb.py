"""posteriordb.py -- the per-gradient table of the posteriordb corpus
against Stan (make bench-posteriordb; docs/performance.md, "posteriordb").

usage: /usr/bin/python3 bench/posteriordb.py BUILDDIR [NAME ...]

For each posterior of examples/posteriordb/CORPUS (or the NAMEs given):
kiln's cold compile (parse + kiln_model_new on an empty cache) and its
time per gradient with the default policy after tier-up, and with llvm
forced ($KILN_BACKEND=llvm), from bench/bench_posteriordb; Stan's time per
gradient and compile time from bench/stan_times.json (made by
bench/stan-times.sh with rstan; posteriors it lacks show "-").  Prints a
Markdown table and the median ratio kiln / Stan.  Standard library only.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def data_file(name):
    for d in ("examples/posteriordb/data", "examples/data/posteriordb",
              "../shared/posteriordb/data"):
        p = os.path.join(SRC, d, name + ".json")
        if os.path.exists(p):
            return p
    return None


def run(bench, kg, data, env_extra, seconds):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, KILN_CACHE_DIR=cache, **env_extra)
        p = subprocess.run([bench, kg, data, str(seconds)], env=env,
                           capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return dict(kv.split("=", 1) for kv in p.stdout.split()), None


def stan_times():
    p = os.path.join(SRC, "bench", "stan_times.json")
    if not os.path.exists(p):
        return {}, None
    d = json.load(open(p))
    by = {}
    for r in d.get("posteriors", []):
        by[r["posterior"]] = {"ns_per_grad": r.get("stan_ns_per_grad"),
                              "compile_s": r.get("cold_compile_s")}
    return by, d.get("method")


def main():
    build = sys.argv[1]
    bench = os.path.join(build, "bench", "bench_posteriordb")
    names = sys.argv[2:] or [
        line.strip() for line in open(
            os.path.join(SRC, "examples/posteriordb/CORPUS"))
        if line.strip() and not line.startswith("#")]
    seconds = float(os.environ.get("KILN_BENCH_PDB_SECONDS", "1"))
    stan, method = stan_times()
    print("| posterior | params | Stan ns/grad | kiln ns/grad (policy, "
          "tiered) | kiln ns/grad (llvm) | kiln / Stan | Stan compile s | "
          "kiln cold ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for name in names:
        dname, model = name.split("-", 1)
        kg = os.path.join(SRC, "examples/posteriordb", model + ".kg")
        data = data_file(dname)
        if not os.path.exists(kg) or not data:
            print("| %s | - | - | skipped: no %s | | | | |"
                  % (name, "model" if not os.path.exists(kg) else "data"))
            continue
        pol, err = run(bench, kg, data, {}, seconds)
        llvm, err2 = run(bench, kg, data, {"KILN_BACKEND": "llvm"}, seconds)
        if not pol:
            print("| %s | - | - | error: %s | | | | |" % (name, err[:80]))
            continue
        s = stan.get(name, {})
        sns = s.get("ns_per_grad")
        kns = float(pol["ns_per_grad"])
        ratio = kns / sns if sns else None
        if ratio:
            ratios.append(ratio)
        print("| %s | %s | %s | %.0f (%s) | %s | %s | %s | %s |" % (
            name, pol["dim"], "%.0f" % sns if sns else "-", kns,
            pol["tiered"], "%.0f" % float(llvm["ns_per_grad"]) if llvm
            else "-", "%.2f" % ratio if ratio else "-",
            "%.1f" % s["compile_s"] if s.get("compile_s") else "-",
            pol["cold_ms"]))
        sys.stdout.flush()
    if ratios:
        print()
        print("median kiln / Stan over %d posteriors: %.2f (best %.2f, "
              "worst %.2f)" % (len(ratios), statistics.median(ratios),
                               min(ratios), max(ratios)))
    if method:
        print()
        print("Stan's times:", method)


main()
