#!/bin/sh
# bench/bridgestan.sh — per-call bs_log_density_gradient of kiln's
# BridgeStan libraries from C (bench/bench_bridgestan.c, through dlopen)
# and from the BridgeStan Python client (bench/bridgestan_client.py), against
# kiln_model_log_density and kiln's own logp callback on the hand-written
# models, for eight schools and radon (make bench-bridgestan;
# docs/performance.md, "BridgeStan").  Prints a Markdown table.
# Usage: sh bench/bridgestan.sh [BUILDDIR]
# Environment:
#   KILN_BENCH_BS_BACKENDS  backends to time each model with, as
#                           $KILN_BACKEND ("interp llvm"; those not built
#                           are left out)
#   KILN_BENCH_BS_CALLS     calls per round from C (100000); Python makes
#                           a tenth of them
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${KILN_BUILDDIR:-$src}}
kiln="$build/tools/kiln"
bb="$build/bench/bench_bridgestan"
py=/usr/bin/python3
clients="$src/../shared/clients"
backends=${KILN_BENCH_BS_BACKENDS:-interp llvm}
calls=${KILN_BENCH_BS_CALLS:-100000}
[ -x "$bb" ] || { echo "bench/bridgestan.sh: $bb not found (make bench/bench_bridgestan)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
KILN_CACHE_DIR="$tmp/cache"; export KILN_CACHE_DIR
have_py=no
if [ -x "$py" ] && [ -d "$clients/bridgestan" ] && "$py" -c 'import numpy' 2>/dev/null; then
  have_py=yes
fi
pdb="$src/examples/data/posteriordb"
echo "$("$kiln" --version | head -1), $(nproc) CPUs, $(uname -m); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| model | backend | kiln callback (hand-written .kg) | kiln_model_log_density | bs_log_density_gradient from C | shim overhead | Python client | client overhead | ctypes alone |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
for m in eight radon; do
  case $m in
    eight) kg="$src/examples/eight_schools_noncentered.kg"; data="$pdb/eight_schools.json"
           native="$src/examples/eight_schools.kg" ;;
    radon) kg="$src/examples/radon_variable_intercept_noncentered.kg"; data="$pdb/radon_mn.json"
           native="$src/examples/radon.kg" ;;
  esac
  "$kiln" bridgestan "$kg" -o "$tmp/$m.so" >/dev/null
  for b in $backends; do
    # a backend this build lacks: skip it
    KILN_BACKEND=$b "$kiln" run "$native" --random-inputs 1 --quiet >/dev/null 2>&1 || continue
    line=$(KILN_BACKEND=$b "$bb" "$tmp/$m.so" "$data" "$kg" "$native" "$calls")
    get() { echo "$line" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
    py_ns=- ov_py=- ct_ns=-
    if [ $have_py = yes ]; then
      pl=$(KILN_BACKEND=$b PYTHONPATH="$clients" "$py" "$src/bench/bridgestan_client.py" \
             "$tmp/$m.so" "$data" $((calls / 10)))
      py_ns=$(echo "$pl" | sed -n 's/.*py_ns=\([^ ]*\).*/\1/p')
      ct_ns=$(echo "$pl" | sed -n 's/.*ctypes_ns=\([^ ]*\).*/\1/p')
      ov_py=$(awk -v a="$py_ns" -v b="$(get bs_ns)" 'BEGIN { printf "%.0f", a - b }')
    fi
    echo "| $m ($(get dim) unconstrained) | $b | $(get callback_ns) | $(get model_ns) | $(get bs_ns) | $(get overhead_ns) | $py_ns | $ov_py | $ct_ns |"
  done
done
echo
echo "ns per call, medians of 7 rounds; overheads are differences of medians (bs - kiln_model; Python client - bs from C)."
