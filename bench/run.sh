#!/bin/sh
# bench/run.sh — compile and call times of the example models and of a
# long scalar chain (VM overhead per kernel), through `kiln run --json`.
# Usage: bench/run.sh [BUILDDIR]   (also: make bench)
# Prints a Markdown table; docs/performance.md records a run.  Numbers
# are medians over 5 processes; the machines are shared, so compare
# ratios within one run.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${KILN_BUILDDIR:-$src}}
kiln="$build/tools/kiln"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# a chain of N scalar elementwise kernels: x -> sin -> add 1 -> ...
chain() {
  n=$1
  {
    echo "kiln 1"; echo "graph chain$n"; echo "  input x0: f64"
    i=1
    while [ "$i" -le "$n" ]; do
      echo "  x$i = add(mul(x$((i - 1)), 0.999), 0.001)"; i=$((i + 1))
    done
    echo "  output y = x$n"; echo "end"
  } >"$tmp/chain$n.kg"
}
chain 1000

field() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

repeat=1000  # calls per process
run() {  # NAME FILE ARGS...
  name=$1; file=$2; shift 2
  : >"$tmp/c"; : >"$tmp/f"; : >"$tmp/m"
  for r in 1 2 3 4 5; do
    "$kiln" run "$file" "$@" --repeat "$repeat" --json >"$tmp/j"
    field compile_ms <"$tmp/j" >>"$tmp/c"
    field first_call_ms <"$tmp/j" >>"$tmp/f"
    field call_ms_median <"$tmp/j" >>"$tmp/m"
  done
  printf '| %s | %s | %s | %s |\n' "$name" "$(median <"$tmp/c")" \
    "$(median <"$tmp/f")" "$(median <"$tmp/m")"
}

echo "| model | compile (ms) | first call (ms) | median call (ms) |"
echo "|---|---|---|---|"
run "radon (interp)" "$src/examples/radon.kg" -i mu_a=1.5 -i log_sigma_a=-0.5 \
  -i a_t=0 -i b=-0.7 -i log_sigma_y=-0.3
run "eight schools (interp)" "$src/examples/eight_schools.kg" -i mu=0 \
  -i log_tau=0 -i theta_t=0
run "chain of 1000 scalar kernels (interp)" "$tmp/chain1000.kg" -i x0=0.5

# ---- generated stress models: logp and the gradient with respect to every
# input (one grad statement), at --random-inputs 1.  One call runs
# thousands of kernels, so 100 calls per process.  A model kiln cannot
# load yet gets a row of "-" and a note on stderr.
gen="$build/tools/kiln-gen"
"$gen" pooled --groups 18 --shared 24 --likelihood gamma -o "$tmp" >/dev/null
"$gen" pooled --groups 96 --shared 128 --likelihood lognormal -o "$tmp" >/dev/null
"$gen" additive --components 320 -o "$tmp" >/dev/null
"$gen" join --n 1000 -o "$tmp" >/dev/null
"$gen" join --n 10000 -o "$tmp" >/dev/null
"$gen" dense --size 1024 -o "$tmp" >/dev/null
repeat=100
gen_run() {  # NAME FILE
  if "$kiln" check "$2" >/dev/null 2>"$tmp/e"; then
    run "$1" "$2" --random-inputs 1
  else
    echo "bench/run.sh: $1 skipped: $(head -n 1 "$tmp/e")" >&2
    printf '| %s | - | - | - |\n' "$1"
  fi
}
gen_run "pooled 18/24 gamma + grad (interp)" "$tmp/pooled_g18_p24_gamma.kg"
gen_run "pooled 96/128 lognormal + grad (interp)" "$tmp/pooled_g96_p128_lognormal.kg"
gen_run "additive 320 + grad (interp)" "$tmp/additive_c320.kg"
gen_run "join 1000 + grad (interp)" "$tmp/join_n1000.kg"
gen_run "join 10000 + grad (interp)" "$tmp/join_n10000.kg"
gen_run "dense 1024 + grad (interp)" "$tmp/dense_n1024.kg"
