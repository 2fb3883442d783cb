#!/bin/sh
# bench/dot.sh — a dense model per logp+gradient call, kiln against numpy
# on the same BLAS (make bench-dot; docs/performance.md "dot").
# Usage: sh bench/dot.sh [BUILDDIR] [N]
#   BUILDDIR defaults to $KILN_BUILDDIR, else the source tree; N (1000) is
#   the size of A (N x N).
# The model: logp = sum normal_lpdf(y | A x, sigma) with A (N x N) and y
# shared data (npy files), x the parameter, and d logp / d x =
# A^T (y - A x) / sigma^2: two matrix-vector products and O(N) elementwise
# work.  numpy (/usr/bin/python3) computes the same thing as a user would
# write it.  Rounds alternate kiln and numpy (the machine is shared);
# each figure is the median over rounds of a per-call median.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${KILN_BUILDDIR:-$src}}
n=${2:-1000}
kiln="$build/tools/kiln"
py=/usr/bin/python3
[ -x "$kiln" ] || { echo "bench/dot.sh: $kiln not found" >&2; exit 1; }
"$py" -c 'import numpy' 2>/dev/null ||
  { echo "bench/dot.sh: $py has no numpy (apt-get install python3-numpy)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

"$py" - "$tmp" "$n" <<'EOF'
import sys, numpy as np
d, n = sys.argv[1], int(sys.argv[2])
r = np.random.default_rng(1)
np.save(d + "/A.npy", r.standard_normal((n, n)))
np.save(d + "/y.npy", r.standard_normal(n))
np.save(d + "/x.npy", r.standard_normal(n))
EOF
cat >"$tmp/dense.kg" <<EOF
kiln 1
graph dense
  input x: f64[$n]
  shared A: f64[$n, $n] = npy("A.npy")
  shared y: f64[$n] = npy("y.npy")
  z = true_div(sub(y, dot(A, x)), 0.5)
  output logp = sum(sub(sub(mul(-0.5, square(z)), log(0.5)), 0.9189385332046727))
  dx = grad(logp, x)
  output dx
end
EOF
cat >"$tmp/dense.py" <<'EOF'
import sys, time, numpy as np
d = sys.argv[1]
A = np.load(d + "/A.npy"); y = np.load(d + "/y.npy"); x = np.load(d + "/x.npy")
def logp_grad(x):
    z = (y - A @ x) / 0.5
    logp = np.sum(-0.5 * z * z - np.log(0.5) - 0.9189385332046727)
    return logp, A.T @ (z / 0.5)
logp_grad(x)
t = []
for _ in range(200):
    t0 = time.perf_counter(); logp_grad(x); t.append(time.perf_counter() - t0)
t.sort()
print("%.3f" % (t[len(t) // 2] * 1e3))
EOF
# which BLAS each side runs
kblas=$(ldd "$build/.libs/libkiln.so" 2>/dev/null | awk '/blas/ {print $3}' | head -1)
nblas=$("$py" -c 'import numpy
for l in open("/proc/self/maps"):
    if "blas" in l: print(l.split()[-1]); break')
echo "kiln BLAS:  ${kblas:-?} -> $(readlink -f "${kblas:-/dev/null}")"
echo "numpy BLAS: ${nblas:-?} -> $(readlink -f "${nblas:-/dev/null}")"
echo
backends=interp
for be in tcc llvm; do
  "$kiln" run "$tmp/dense.kg" -i "x=@$tmp/x.npy" --backend $be --json \
    2>/dev/null | grep -q '"logp"' && backends="$backends $be"
done
echo "| $n x $n dense, logp + gradient per call | median (ms) | kiln / numpy |"
echo "|---|---|---|"
: >"$tmp/np"
for be in $backends; do : >"$tmp/k_$be"; done
for r in 1 2 3 4 5; do
  for be in $backends; do
    "$kiln" run "$tmp/dense.kg" -i "x=@$tmp/x.npy" --backend $be --repeat 200 \
      --json | sed -n 's/.*"call_ms_median": \([0-9.e+-]*\).*/\1/p' >>"$tmp/k_$be"
  done
  "$py" "$tmp/dense.py" "$tmp" >>"$tmp/np"
done
np_ms=$(median <"$tmp/np")
echo "| numpy $("$py" -c 'import numpy; print(numpy.__version__)') | $np_ms | 1 |"
for be in $backends; do
  k_ms=$(median <"$tmp/k_$be")
  echo "| kiln, $be | $k_ms | $(awk -v a="$k_ms" -v b="$np_ms" 'BEGIN {printf "%.2f", a / b}') |"
done
