#!/bin/sh
# bench/gen_models.sh — generate the standard sizes of the stress models
# (docs/models.md) with tools/kiln-gen.
# Usage: bench/gen_models.sh DIR [BUILDDIR]
#   DIR is created if needed; BUILDDIR defaults to $KILN_BUILDDIR, else the
#   source tree.  Prints the path of each .kg file written.
#   pooled    G/P = 6/8, 12/16, 18/24, 48/64, 96/128; gamma and lognormal
#   additive  20, 80, 320 components
#   join      10, 100, 1000, 10000 inputs
#   dense     1024 (an 8 MB inline weight matrix)
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: bench/gen_models.sh DIR [BUILDDIR]" >&2
  exit 2
fi
src=$(cd "$(dirname "$0")/.." && pwd)
out=$1
build=${2:-${KILN_BUILDDIR:-$src}}
gen="$build/tools/kiln-gen"
if [ ! -x "$gen" ]; then
  echo "bench/gen_models.sh: $gen not found (build first, or pass BUILDDIR)" >&2
  exit 1
fi
mkdir -p "$out"

for gp in 6/8 12/16 18/24 48/64 96/128; do
  for lik in gamma lognormal; do
    "$gen" pooled --groups "${gp%/*}" --shared "${gp#*/}" --likelihood "$lik" -o "$out"
  done
done
for c in 20 80 320; do
  "$gen" additive --components "$c" -o "$out"
done
for n in 10 100 1000 10000; do
  "$gen" join --n "$n" -o "$out"
done
"$gen" dense --size 1024 -o "$out"
