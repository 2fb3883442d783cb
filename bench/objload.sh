#!/bin/sh
# bench/objload.sh BUILDDIR — per-kernel time to load a stored artifact
# (docs/performance.md, "Loading artifacts"): kiln's ELF loader
# (core/plugin/objload.c) against libtcc's in-memory linker and the llvm plugin's
# ORC LLJIT, on the kernels of radon and eight schools.  Also
# `make bench-objload`.  Needs the tcc backend; llvm rows are empty
# without the llvm backend.
set -e
b=$(cd "${1:-.}" && pwd)
s=$(cd "$(dirname "$0")/.." && pwd)
export KILN_BUILDDIR="$b"
[ -x "$b/bench/bench_objload" ] || (cd "$b" && make bench/bench_objload)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for m in radon eight_schools; do
  "$b/bench/bench_objload" "$s/examples/$m.kg"
  echo
done
