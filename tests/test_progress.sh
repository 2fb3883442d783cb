#!/bin/sh
# test_progress.sh — the progress line of a long compile (core/support/progress.c):
# on a terminal, a compile that runs longer than half a second rewrites
# "kiln: compiling kernels DONE/TOTAL, S s" in place and erases it at the
# end; --quiet and a standard error that is not a terminal show nothing.
# The terminal is script(1)'s pseudo-terminal; the long compile is
# pooled 18/24 with every kernel compiled by llvm before the first call.
# TAP; skips without script(1) or the llvm backend.
top=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
kiln="$build/tools/kiln"
gen="$build/tools/kiln-gen"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "1..4"
if ! command -v script >/dev/null 2>&1; then
  echo "ok 1 - # SKIP script(1) is not installed"
  echo "ok 2 - # SKIP"; echo "ok 3 - # SKIP"; echo "ok 4 - # SKIP"; exit 0
fi
if ! "$kiln" run "$top/examples/radon.kg" --random-inputs 1 --backend llvm \
     --no-cache --quiet >/dev/null 2>&1 ||
   [ ! -d "$build/backends/llvm" ]; then
  echo "ok 1 - # SKIP the llvm backend is not built"
  echo "ok 2 - # SKIP"; echo "ok 3 - # SKIP"; echo "ok 4 - # SKIP"; exit 0
fi
model=$("$gen" pooled --groups 18 --shared 24 --likelihood gamma -o "$tmp" | tail -n 1)
run="'$kiln' run '$model' --random-inputs 1 --backend llvm --no-cache --jobs 1"
# on a terminal: the line, with counts, and the erase at the end
script -qec "$run" "$tmp/tty.out" >/dev/null 2>&1
grep -q 'kiln: compiling kernels [0-9]*/[0-9]*, [0-9.]* s' "$tmp/tty.out"
r=$?; echo "$([ $r = 0 ] && echo ok || echo 'not ok') 1 - on a terminal a long compile shows 'kiln: compiling kernels N/M, S s'"
grep -q "$(printf '\r\033\\[K')" "$tmp/tty.out"
r=$?; echo "$([ $r = 0 ] && echo ok || echo 'not ok') 2 - the line is erased when the compile ends"
script -qec "$run --quiet" "$tmp/quiet.out" >/dev/null 2>&1
grep -q 'compiling kernels' "$tmp/quiet.out"
r=$?; echo "$([ $r != 0 ] && echo ok || echo 'not ok') 3 - --quiet shows no progress line"
sh -c "$run" >"$tmp/out" 2>"$tmp/err"
grep -q 'compiling kernels' "$tmp/err"
r=$?; echo "$([ $r != 0 ] && echo ok || echo 'not ok') 4 - no progress line when standard error is not a terminal"
