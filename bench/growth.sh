#!/bin/sh
# bench/growth.sh — is compile time linear in the model's size?  Counted in
# instructions, which do not depend on what else the machine is running:
# valgrind's cachegrind without cache simulation counts every instruction
# `kiln run MODEL --random-inputs 1` executes (parse, gradient, passes,
# lowering, kernel compile, one call), for each model of a growing family,
# with all passes and with none.  Prints a Markdown table with the input
# graph's node count (`kiln explain --passes`, line `== input: N nodes`),
# instructions, instructions per node, and the growth exponent
# log(I2/I1) / log(n2/n1) against the previous size (1 = linear).
# Wall time adds cache misses and page faults on top; bench/rewrite.sh
# measures those.  Slow (valgrind: ~50x; the largest model ~1 min).
# Usage: bench/growth.sh [BUILDDIR]   (also: make bench-growth)
# FAMILIES (default "pooled pooled-lognormal join additive") picks the
# families; the two pooled ones give the LogNormal/Gamma ratio in
# instructions.
# Never part of make check.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${KILN_BUILDDIR:-$src}}
kiln="$build/tools/kiln"
libtool="$build/libtool"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset KILN_BACKEND KILN_POLICY KILN_PASSES
command -v valgrind >/dev/null || { echo "growth.sh: needs valgrind" >&2; exit 1; }

gen() { "$build/tools/kiln-gen" "$@" -o "$tmp"; }

nodes() {
  "$kiln" explain "$1" --passes 2>/dev/null |
    sed -n 's/^== input: \([0-9]*\) nodes$/\1/p'
}

# instructions of one cold run: MODEL PASSES -> count, or "fail"
instr() {
  KILN_CACHE=off "$libtool" --mode=execute valgrind --tool=cachegrind \
    --cache-sim=no --cachegrind-out-file=/dev/null "$kiln" run "$1" \
    --random-inputs 1 --passes "$2" >/dev/null 2>"$tmp/vg" || true
  n=$(sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' "$tmp/vg" | tr -d ,)
  echo "${n:-fail}"
}

echo "| model | input nodes | passes | instructions | per node | exponent |"
echo "|---|---:|---|---:|---:|---:|"
family() {  # LABEL, then one kiln-gen argument list per line on stdin
  label=$1
  prev_on=""; prev_off=""; prev_n=""
  while read -r args; do
    # shellcheck disable=SC2086
    f=$(gen "$label" $args)
    n=$(nodes "$f")
    for p in all none; do
      i=$(instr "$f" "$p")
      if [ "$p" = all ]; then prev=$prev_on; else prev=$prev_off; fi
      row=$(awk -v i="$i" -v n="$n" -v pi="$prev" -v pn="$prev_n" 'BEGIN {
        if (i == "fail" || n == "") { print "fail | fail"; exit }
        per = sprintf("%.0f", i / n)
        e = ""
        if (pi != "" && pi != "fail" && pn != "" && n != pn)
          e = sprintf("%.2f", log(i / pi) / log(n / pn))
        print per " | " e }')
      echo "| $label $args | ${n:-fail} | $p | $i | $row |"
      if [ "$p" = all ]; then prev_on=$i; else prev_off=$i; fi
    done
    prev_n=$n
  done
}

for fam in ${FAMILIES:-pooled pooled-lognormal join additive}; do
  case $fam in
  pooled|pooled-lognormal)
          lik=gamma; [ "$fam" = pooled ] || lik=lognormal
          for gp in 12/16 24/32 48/64 96/128; do
            echo "--groups ${gp%/*} --shared ${gp#*/} --likelihood $lik"
          done | family pooled ;;
  join) printf '%s\n' "--n 1000" "--n 4000" "--n 16000" | family join ;;
  additive) printf '%s\n' "--components 80" "--components 320" \
              "--components 1280" | family additive ;;
  esac
done
