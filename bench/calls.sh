#!/bin/sh
# bench/calls.sh — per logp+gradient call time and cold compile, kiln
# interp / tcc / llvm / default policy against a hand-written C floor and
# numba, rounds interleaved (make bench-calls; issue 14; docs/performance.md
# "Calls").
# Usage: sh bench/calls.sh [BUILDDIR]
#   BUILDDIR defaults to $KILN_BUILDDIR, else the source tree.
# Environment: KILN_BENCH_ROUNDS (3), KILN_BENCH_NUMBA_BUDGET (seconds, 120:
#   a model whose numba cold compile takes longer is skipped and reported).
# Models: examples/radon.kg, examples/eight_schools.kg and, from
#   bench/gen_models.sh, pooled 6/8, 18/24, 48/64 (gamma, lognormal) and
#   additive 20/80/320.  Each kiln run uses a new empty KILN_CACHE_DIR
#   (cold compile).  The floors (bench/floor_*.c, gcc -O3 -march=native)
#   and numba (bench/kg2numba.py) are checked against kiln's outputs; a
#   mismatch makes the script exit 1.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${KILN_BUILDDIR:-$src}}
kiln="$build/tools/kiln"
py=/usr/bin/python3
cc=${CC_FLOOR:-gcc}
[ -x "$kiln" ] || { echo "bench/calls.sh: $kiln not found" >&2; exit 1; }
"$py" -c 'import numpy' 2>/dev/null ||
  { echo "bench/calls.sh: $py has no numpy (apt-get install python3-numpy)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for m in radon eight_schools; do
  "$cc" -O3 -march=native -o "$tmp/floor_$m" "$src/bench/floor_$m.c" -lm ||
    { echo "bench/calls.sh: cannot build bench/floor_$m.c with $cc" >&2; exit 1; }
done
sh "$src/bench/gen_models.sh" "$tmp/gen" "$build" >/dev/null
models="$src/examples/radon.kg $src/examples/eight_schools.kg"
for gp in 6_p8 18_p24 48_p64; do
  for lik in gamma lognormal; do models="$models $tmp/gen/pooled_g${gp}_$lik.kg"; done
done
for c in 20 80 320; do models="$models $tmp/gen/additive_c$c.kg"; done
echo "kiln $("$kiln" --version 2>/dev/null | head -1), $(nproc) CPUs, $(uname -m); floor: $("$cc" --version | head -1) -O3 -march=native"
# shellcheck disable=SC2086
KILN_BENCH_FLOORS="$tmp" "$py" "$src/bench/calls.py" "$kiln" "$tmp" "$src" $models
