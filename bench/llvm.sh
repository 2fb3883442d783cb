#!/bin/sh
# bench/llvm.sh BUILDDIR — the llvm backend's benchmarks (docs/performance.md):
# runtime against gcc -O3 -march=native on the C emitter's source and the
# interpreter, the triad bandwidth, compile time at O2/O3 and the width
# sweep (time and peak RSS per width, with the fitted exponent), and the
# CPU's vector flags.  Needs a build configured with the llvm backend.
set -e
b=$(cd "${1:-.}" && pwd)
s=$(cd "$(dirname "$0")/.." && pwd)
export KILN_BUILDDIR="$b"
exe=$b/bench_llvm
gcc -std=c11 -O2 -I"$s/include" -I"$s/core/lower" -I"$s/core/runtime" \
    "$s/bench/bench_llvm.c" \
    -o "$exe" -L"$b/.libs" -lkiln -ldl -lm -Wl,-rpath,"$b/.libs"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "vector flags: $(grep -m1 -o -w 'avx512f\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== runtime, ns per element (best of 7 rounds)"
"$exe" run
echo "== compile vs runtime per backend (median of 5 compiles; ns per element)"
"$exe" tradeoff
echo "== width sweep: inputs opt wall_ms cpu_ms peak_rss_kb"
: >"$b/width.txt"
for o in 2 3; do
  for w in 8 16 32 64 128 256 512 1024 2048; do
    "$exe" width $w $o | tee -a "$b/width.txt"
  done
done
python3 - "$b/width.txt" <<'PY'
import math, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
for o in ('2', '3'):
    pts = [(int(w), float(ms), float(cpu), int(kb)) for w, oo, ms, cpu, kb in rows
           if oo == o and int(w) >= 64]
    def fit(ys, ps=None):
        ps = ps or pts
        xs = [math.log(p[0]) for p in ps]; ys = [math.log(y) for y in ys]
        mx = sum(xs) / len(xs); my = sum(ys) / len(ys)
        return sum((a - mx) * (b - my) for a, b in zip(xs, ys)) / sum((a - mx) ** 2 for a in xs)
    # peak RSS: the growth above the 8-input process (libLLVM's ~49 MB and
    # the runtime are the same in every process), fitted over 256..2048
    rss8 = [int(kb) for w, oo, ms, cpu, kb in rows if oo == o and w == '8'][0]
    big = [p for p in pts if p[0] >= 256]
    print("O%s, 64..2048 inputs: exponent of wall time %.2f, of CPU time %.2f; "
          "peak RSS growth over 8 inputs, 256..2048: exponent %.2f (%d..%d KB)"
          % (o, fit([p[1] for p in pts]), fit([p[2] for p in pts]),
             fit([max(p[3] - rss8, 1) for p in big], big),
             min(p[3] - rss8 for p in big), max(p[3] - rss8 for p in big)))
PY
