#!/usr/bin/python3
"""bench/floors.py -- kiln against the hand-written C floors, both timed the
same way (make bench-floors; issue 27; docs/performance.md "Calls").

floors.py BUILDDIR
For radon and eight schools (examples/*.kg): builds bench/floor_NAME.c with
$CC_FLOOR (gcc) -O3 -march=native, fills the inputs as bench-calls does
(bench/kg2numba.py), and runs, rounds interleaved (KILN_BENCH_ROUNDS, 5),
the floor and bench/bench_graph under each backend of KILN_BENCH_BACKENDS
("llvm"): both print their outputs and the median over 7 blocks of the
mean time of N calls at one point (a C loop, no clock read per call).
KILN_BENCH_CPU_CLOCK=1 makes both time with the thread's CPU clock (a
loaded machine).  Checks every engine's outputs against the floor's (1e-12 relative to the
largest |value| of the output; exit 1 on a mismatch).  Prints a Markdown
table of medians over the rounds and kiln / floor.  numpy needed."""
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kg2numba  # noqa: E402

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = [("radon", ["examples/data/radon.csv"], 20000),
          ("eight_schools", [], 2000000)]


def parse(out):
    got = {}
    for line in out.splitlines():
        f = line.split()
        if f:
            got[f[0]] = [float(x) for x in f[1:]]
    return got


def relerr(a, b):
    if len(a) != len(b):
        return float("inf")
    den = max(max(abs(x) for x in b), 1e-300)
    return max(abs(x - y) for x, y in zip(a, b)) / den


def main():
    build = sys.argv[1]
    kiln = os.path.join(build, "tools", "kiln")
    bench = os.path.join(build, "bench", "bench_graph")
    cc = os.environ.get("CC_FLOOR", "gcc")
    rounds = int(os.environ.get("KILN_BENCH_ROUNDS", "5"))
    backends = os.environ.get("KILN_BENCH_BACKENDS", "llvm").split()
    tmp = tempfile.mkdtemp(prefix="kiln-floors.")
    failed, rows = [], []
    for name, extra, calls in MODELS:
        exe = os.path.join(tmp, "floor_" + name)
        subprocess.run([cc, "-O3", "-march=native", "-o", exe,
                        os.path.join(SRC, "bench", "floor_%s.c" % name),
                        "-lm"], check=True)
        kg = os.path.join(SRC, "examples", name + ".kg")
        p = kg2numba.prepare(kiln, kg, os.path.join(tmp, "prep_" + name))
        inp = os.path.join(tmp, name + ".in")
        with open(inp, "w") as f:
            f.write("\n".join("%.17g" % x for x in p["flat"]) + "\n")
        rows.append({"name": name, "floor": [exe] + [
            os.path.join(SRC, x) for x in extra] + [inp, str(calls)],
            "kg": kg, "inp": inp, "calls": calls, "t": {}})
    for _ in range(rounds):
        for r in rows:
            out = subprocess.run(r["floor"], capture_output=True, text=True,
                                 check=True).stdout
            ref = parse(out)
            r["t"].setdefault("floor", []).append(ref.pop("us_per_call")[0])
            for be in backends:
                env = dict(os.environ, KILN_BACKEND=be,
                           KILN_CACHE_DIR=os.path.join(tmp, "cache"))
                q = subprocess.run([bench, r["kg"], r["inp"], str(r["calls"])],
                                   capture_output=True, text=True, env=env)
                if q.returncode != 0:
                    failed.append("%s %s: %s" % (r["name"], be,
                                                 q.stderr.strip()))
                    continue
                got = parse(q.stdout)
                r["t"].setdefault(be, []).append(got.pop("us_per_call")[0])
                for k, v in ref.items():
                    e = relerr(got.get(k, []), v)
                    if not e <= 1e-12:
                        failed.append("%s %s: output %s differs from the "
                                      "floor by %.3g relative"
                                      % (r["name"], be, k, e))
    med = statistics.median
    print("| model | C floor (µs) | " + " | ".join(
        "kiln %s (µs) | %s / floor" % (b, b) for b in backends) + " |")
    print("|---|---:|" + "---:|---:|" * len(backends))
    for r in rows:
        fl = med(r["t"]["floor"])
        cells = []
        for b in backends:
            if r["t"].get(b):
                k = med(r["t"][b])
                cells += ["%.3g" % k, "%.2f" % (k / fl)]
            else:
                cells += ["-", "-"]
        print("| %s | %.3g | %s |" % (r["name"].replace("_", " "), fl,
                                      " | ".join(cells)))
    print()
    print("median of %d interleaved rounds; floor: %s -O3 -march=native; "
          "kiln: bench/bench_graph (kiln_function_call in a C loop, tiers "
          "off); %s clock" % (rounds, cc, "CPU" if os.environ.get(
              "KILN_BENCH_CPU_CLOCK") == "1" else "wall"))
    subprocess.run(["rm", "-rf", tmp])
    if failed:
        print("\n".join(failed), file=sys.stderr)
        sys.exit(1)


main()
