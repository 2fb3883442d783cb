#!/bin/sh
# bench/rewrite.sh — what the rewrite passes buy (docs/rewrite.md,
# docs/performance.md "Rewrite passes"): cold compile time (no disk cache)
# and peak RSS of `kiln run` with all passes and with none, default policy,
# on the stress models of bench/gen_models.sh: pooled gamma/lognormal at
# 6/8 ... 96/128 groups/shared parameters, additive 20/80/320, join
# 10 ... 10000.
# Usage: bench/rewrite.sh [BUILDDIR]   (also: make bench-rewrite)
# Prints a Markdown table; medians over $REPEAT (default 3) processes.
# PASSES_OFF (default none) is the pass list of the "off" columns:
# PASSES_OFF=-fuse compares fusion on with fusion off.
# Never part of make check.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${KILN_BUILDDIR:-$src}}
kiln="$build/tools/kiln"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset KILN_BACKEND KILN_POLICY KILN_PASSES
repeat=${REPEAT:-3}

field() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# one row: MODEL-FILE PASSES -> "compile_ms rss_mb kernels"
measure() {
  : >"$tmp/c"; : >"$tmp/r"
  for r in $(seq "$repeat"); do
    /usr/bin/time -f '%M' -o "$tmp/t" env KILN_CACHE=off "$kiln" run "$1" \
      --random-inputs 1 --passes "$2" --json >"$tmp/j" 2>/dev/null || true
    field compile_ms <"$tmp/j" >>"$tmp/c"
    tail -1 "$tmp/t" | awk '{printf "%.1f\n", $1 / 1024}' >>"$tmp/r"
  done
  k=$(KILN_CACHE=off "$kiln" run "$1" --random-inputs 1 --passes "$2" \
        2>/dev/null | sed -n 's/.*(1 call, \([0-9]*\) kernels).*/\1/p')
  echo "$(median <"$tmp/c") $(median <"$tmp/r") $k"
}

gen() { "$build/tools/kiln-gen" "$@" -o "$tmp"; }

echo "| model | passes on: compile ms | RSS MB | kernels | passes off: compile ms | RSS MB | kernels |"
echo "|---|---:|---:|---:|---:|---:|---:|"
row() {  # LABEL FILE
  on=$(measure "$2" all); off=$(measure "$2" "${PASSES_OFF:-none}")
  set -- "$1" $on $off
  echo "| $1 | $2 | $3 | $4 | $5 | $6 | $7 |"
}
for gp in 6/8 12/16 18/24 48/64 96/128; do
  for lik in gamma lognormal; do
    f=$(gen pooled --groups "${gp%/*}" --shared "${gp#*/}" --likelihood "$lik")
    row "pooled $gp $lik" "$f"
  done
done
for c in 20 80 320; do
  row "additive $c" "$(gen additive --components "$c")"
done
for n in 10 100 1000 10000; do
  row "join $n" "$(gen join --n "$n")"
done
