#!/bin/sh
# bench/policy.sh — the shipped policies compared (docs/policy.md,
# docs/performance.md "Backend policies"): cold compile, warm start (every
# kernel in the disk cache) and per-call time of radon, eight schools and a
# generated model under conf/fastest-start.yaml, conf/fastest-runtime.yaml
# and conf/default.yaml.
# Usage: bench/policy.sh [BUILDDIR]   (also: make bench-policy)
# Prints a Markdown table.  Medians over 3 processes of `kiln run --json`;
# never part of make check.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${KILN_BUILDDIR:-$src}}
kiln="$build/tools/kiln"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset KILN_BACKEND KILN_POLICY

field() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

"$build/tools/kiln-gen" dense --size 1024 -o "$tmp" >/dev/null
dense=$(ls "$tmp"/dense*.kg | head -1)

repeat=${REPEAT:-200}
run() {  # NAME POLICY FILE ARGS...
  name=$1; pol=$2; file=$3; shift 3
  : >"$tmp/c"; : >"$tmp/w"; : >"$tmp/m"
  for r in 1 2 3; do
    KILN_CACHE=off "$kiln" run "$file" "$@" --policy "$src/conf/$pol.yaml" \
      --repeat "$repeat" --json 2>/dev/null >"$tmp/j"
    field compile_ms <"$tmp/j" >>"$tmp/c"
    field call_ms_median <"$tmp/j" >>"$tmp/m"
  done
  # warm start: a fresh cache, filled by one run, then read by three
  rm -rf "$tmp/cache"
  KILN_CACHE_DIR="$tmp/cache" "$kiln" run "$file" "$@" \
    --policy "$src/conf/$pol.yaml" --repeat 1 --json >/dev/null 2>&1
  for r in 1 2 3; do
    KILN_CACHE_DIR="$tmp/cache" "$kiln" run "$file" "$@" \
      --policy "$src/conf/$pol.yaml" --repeat 1 --json 2>/dev/null >"$tmp/j"
    field compile_ms <"$tmp/j" >>"$tmp/w"
  done
  kernels=$("$kiln" explain "$file" --policy "$src/conf/$pol.yaml" 2>/dev/null |
            awk 'NR > 3 {n[$10]++} END {s=""; for (b in n) s = s b " " n[b] " "; print s}')
  printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "$pol" \
    "$(median <"$tmp/c")" "$(median <"$tmp/w")" "$(median <"$tmp/m")" \
    "$kernels"
}

echo "| model | policy | cold compile (ms) | warm start compile (ms) | median call (ms) | kernels per backend |"
echo "|---|---|---|---|---|---|"
for pol in fastest-start fastest-runtime default; do
  run "radon + grad" "$pol" "$src/examples/radon.kg" -i mu_a=1.5 \
    -i log_sigma_a=-0.5 -i a_t=0 -i b=-0.7 -i log_sigma_y=-0.3
done
for pol in fastest-start fastest-runtime default; do
  run "eight schools + grad" "$pol" "$src/examples/eight_schools.kg" -i mu=0 \
    -i log_tau=0 -i theta_t=0
done
for pol in fastest-start fastest-runtime default; do
  run "dense 1024 + grad (kiln-gen)" "$pol" "$dense" --random-inputs 1
done
