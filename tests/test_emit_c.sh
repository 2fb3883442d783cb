#!/bin/sh
# test_emit_c.sh — `kiln emit-c` is deterministic: the C generated for
# every kernel of every corpus graph is byte-identical in two processes
# (no addresses, counters or other per-process state in the source), and
# every unit compiles with the system C compiler (-std=c11 -Wall -Werror,
# no headers), which checks that the source is self-contained.
set -u
src=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
kiln="$build/tools/kiln"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fail=0
t() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
for f in "$src"/tests/graphs/*.kg "$src"/examples/radon.kg "$src"/examples/eight_schools.kg; do
  b=$(basename "$f" .kg)
  "$kiln" emit-c "$f" >"$tmp/$b.1.c" 2>"$tmp/err"; r1=$?
  "$kiln" emit-c "$f" >"$tmp/$b.2.c" 2>>"$tmp/err"; r2=$?
  [ $r1 = 0 ] && [ $r2 = 0 ] && cmp -s "$tmp/$b.1.c" "$tmp/$b.2.c"
  t $? "$b: emit-c twice, in two processes, gives identical C ($(wc -c <"$tmp/$b.1.c") bytes)"
done
# every unit of one model compiles on its own with cc
f="$src/examples/radon.kg"
"$kiln" emit-c "$f" | awk -v d="$tmp" '/^\/\* ==== kernel /{k++; next} {print > (d "/unit" k ".c")}'
ok=0
for u in "$tmp"/unit*.c; do
  ${CC:-cc} -std=c11 -Wall -Werror -Wno-unused-function -fsyntax-only "$u" 2>>"$tmp/cc.err" || ok=1
done
t $ok "radon: every generated unit compiles with ${CC:-cc} -std=c11 -Wall -Werror and no headers"
[ $ok = 0 ] || head -20 "$tmp/cc.err"
"$kiln" emit-c "$src/tests/graphs/nonexistent.kg" >/dev/null 2>&1
t $((! $?)) "emit-c of a missing file fails"
echo "1..$n"
exit $fail
