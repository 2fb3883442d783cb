#!/bin/sh
# test_blas.sh — the BLAS kiln runs and its threads (docs/backends.md
# "BLAS"): `kiln --version` names the library behind cblas_dgemm; with
# OpenBLAS, kiln runs BLAS on the calling thread (openblas_set_num_threads(1)
# found with dlsym) unless OPENBLAS_NUM_THREADS / OMP_NUM_THREADS is set;
# and the dot tests (tests/test_dot: every rank combination, both
# transposes, each `blas.gemv` path on every backend) pass on OpenBLAS as on
# the BLAS this tree was linked with.  The OpenBLAS part runs when libkiln
# links libblas.so.3 (Debian's BLAS alternatives) and Debian's OpenBLAS is
# installed (libopenblas0-pthread), loaded with LD_LIBRARY_PATH so the
# system's choice is left alone; else it is skipped.
set -u
build=${KILN_BUILDDIR:-.}
kiln="$build/tools/kiln"
n=0
failed=0
ok() {
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$kiln" --version >"$tmp/v" 2>&1
ok $? "kiln --version exits 0"
grep -qE '^BLAS: /.+' "$tmp/v"; ok $? "it names the BLAS library: $(sed -n 2p "$tmp/v")"
grep -qE '^matrix-vector loop: A x of [0-9]+ to [0-9]+ columns' "$tmp/v"
ok $? "and the loop's columns: $(sed -n 3p "$tmp/v")"

lib=$(ldd "$build/.libs/libkiln.so" 2>/dev/null | awk '/libblas\.so\.3/ {print $3}')
dir=""
for d in /usr/lib/x86_64-linux-gnu/openblas-pthread /usr/lib/aarch64-linux-gnu/openblas-pthread \
         /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/aarch64-linux-gnu/openblas-openmp; do
  [ -e "$d/libblas.so.3" ] && { dir=$d; break; }
done
if [ -z "$lib" ] || [ -z "$dir" ]; then
  why="libkiln does not link libblas.so.3"
  [ -n "$lib" ] && why="Debian's OpenBLAS (libopenblas0-pthread) is not installed"
  for t in 1 2 3 4; do skip "$why"; done
else
  env -u OPENBLAS_NUM_THREADS -u GOTO_NUM_THREADS -u OMP_NUM_THREADS \
    LD_LIBRARY_PATH="$dir" "$kiln" --version >"$tmp/o" 2>&1
  grep -q '^BLAS: .*(OpenBLAS: .*; 1 thread, set by kiln)' "$tmp/o"
  ok $? "OpenBLAS found at run time, one thread set by kiln: $(sed -n 2p "$tmp/o")"
  grep -qE '^matrix-vector loop: A x of 4 to 64 columns, A\^T y of 4 to 64' "$tmp/o"
  ok $? "OpenBLAS's table: the loop from 4 to 64 columns"
  env -u GOTO_NUM_THREADS -u OMP_NUM_THREADS OPENBLAS_NUM_THREADS=2 \
    LD_LIBRARY_PATH="$dir" "$kiln" --version >"$tmp/o2" 2>&1
  grep -q '^BLAS: .*(OpenBLAS: .*; 2 threads)$' "$tmp/o2"
  ok $? "OPENBLAS_NUM_THREADS=2 is left alone: $(sed -n 2p "$tmp/o2")"
  LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$build/tests/test_dot" >"$tmp/dot" 2>&1
  rc=$?
  nok=$(grep -c '^ok' "$tmp/dot")
  bad=$(grep -c '^not ok' "$tmp/dot")
  [ "$rc" = 0 ] && [ "$bad" = 0 ] && [ "$nok" -gt 200 ]
  ok $? "tests/test_dot on OpenBLAS: $nok ok, $bad not ok (exit $rc)"
  grep '^not ok' "$tmp/dot" | head -5 | sed 's/^/# /'
fi
echo "1..$n"
[ "$failed" = 0 ]
