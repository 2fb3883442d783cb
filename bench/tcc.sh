#!/bin/sh
# bench/tcc.sh — tcc backend benchmarks (make bench-tcc): per-model compile
# time tcc vs interp, compile time of 10- and 1000-statement kernels, the
# width sweep (one elementwise kernel summing N inputs, N = 8 ... 2048)
# with the fitted exponents of compile time and peak RSS, and tcc kernel
# runtime against cc -O2 of the same emitted C.
# Usage: bench/tcc.sh [BUILDDIR]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${KILN_BUILDDIR:-$src}}
kiln="$build/tools/kiln"
bt="$build/bench/bench_tcc"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
field() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

mkdir -p "$tmp/gen"
gen=$("$build/tools/kiln-gen" pooled --groups 48 --shared 64 --likelihood gamma -o "$tmp/gen")

echo "| model | kernels | interp compile (ms) | tcc compile (ms) | interp call (ms) | tcc call (ms) |"
echo "|---|---|---|---|---|---|"
for m in "radon:$src/examples/radon.kg:-i mu_a=1.5 -i log_sigma_a=-0.5 -i a_t=0 -i b=-0.7 -i log_sigma_y=-0.3" \
         "eight schools:$src/examples/eight_schools.kg:-i mu=0 -i log_tau=0 -i theta_t=0" \
         "pooled 48/64 gamma + grad:$gen:--random-inputs 1"; do
  name=${m%%:*}; rest=${m#*:}; file=${rest%%:*}; args=${rest#*:}
  row="| $name"
  for be in interp tcc; do
    : >"$tmp/c"; : >"$tmp/m"
    for r in 1 2 3 4 5; do
      # shellcheck disable=SC2086
      "$kiln" run "$file" $args --repeat 200 --backend $be --json >"$tmp/j"
      field compile_ms <"$tmp/j" >>"$tmp/c"; field call_ms_median <"$tmp/j" >>"$tmp/m"
    done
    eval "c_$be=\$(median <\"\$tmp/c\")"; eval "m_$be=\$(median <\"\$tmp/m\")"
  done
  # shellcheck disable=SC2086
  k=$("$kiln" run "$file" $args | sed -n 's/.*, \([0-9]*\) kernels*).*/\1/p')
  echo "$row | $k | $c_interp | $c_tcc | $m_interp | $m_tcc |"
done
echo
echo "kernel compile (supports + compile + load), median of 21:"
"$bt" stmts 10 | awk '{printf "  %d statements: %.3f ms\n", $1, $2}'
"$bt" stmts 1000 | awk '{printf "  %d statements: %.3f ms\n", $1, $2}'
echo
echo "| inputs | compile (ms) | source (bytes) | peak RSS growth (KiB) |"
echo "|---|---|---|---|"
for n in 8 16 32 64 128 256 512 1024 2048; do "$bt" width $n; done >"$tmp/w"
awk '{printf "| %d | %.3f | %d | %d |\n", $1, $2, $3, $4}' "$tmp/w"
awk '$1 >= 64 { x = log($1); n++; sx += x; sxx += x * x;
                y = log($2); sy += y; sxy += x * y;
                if ($4 > 0) { z = log($4); m++; tx += x; txx += x * x; tz += z; txz += x * z } }
     END { printf "\nfitted exponent (N >= 64): compile time ~ N^%.2f", (n * sxy - sx * sy) / (n * sxx - sx * sx);
           if (m > 1) printf ", peak RSS growth ~ N^%.2f", (m * txz - tx * tz) / (m * txx - tx * tx);
           printf "\n" }' "$tmp/w"
echo
echo "| elements | tcc (ns/elem) | ${CC:-cc} -O2 (ns/elem) | tcc / cc |"
echo "|---|---|---|---|"
for n in 1000 1000000; do "$bt" runtime $n "${CC:-cc}"; done | awk '{printf "| %d | %.2f | %.2f | %.2f |\n", $1, $2, $3, $4}'
