#!/bin/sh
# test_emit_c.sh — `kiln emit-c` is deterministic: the C generated for
# every kernel of every corpus graph is byte-identical in two processes
# (no addresses, counters or other per-process state in the source), and
# every unit compiles with the system C compiler (-std=c11 -Wall -Werror,
# no headers), which checks that the source is self-contained.  It shows
# the kernels `kiln run` compiles: the graph after the rewrite passes and
# fusion chosen by --passes, $KILN_PASSES and the policy (same count as
# `kiln run`, same index and label as `kiln explain`'s rows); --passes none
# is the graph lowered as written; a bad pass list fails cleanly.
set -u
src=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
kiln="$build/tools/kiln"
unset KILN_PASSES KILN_POLICY   # the default passes and policy
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
# every unit of one model compiles on its own with cc (fused kernels with
# the default passes, the unfused ones with --passes none)
f="$src/examples/radon.kg"
for p in all none; do
  rm -f "$tmp"/unit*.c
  "$kiln" emit-c "$f" --passes $p | awk -v d="$tmp" '/^\/\* ==== kernel /{k++; next} {print > (d "/unit" k ".c")}'
  ok=0
  for u in "$tmp"/unit*.c; do
    ${CC:-cc} -std=c11 -Wall -Werror -Wno-unused-function -fsyntax-only "$u" 2>>"$tmp/cc.err" || ok=1
  done
  t $ok "radon --passes $p: every generated unit ($(ls "$tmp"/unit*.c | wc -l)) compiles with ${CC:-cc} -std=c11 -Wall -Werror and no headers"
  [ $ok = 0 ] || head -20 "$tmp/cc.err"
done

# SCAN kernels (issue 25) compile on their own as well, every dtype
f="$src/tests/graphs/scan_check.kg"
rm -f "$tmp"/unit*.c
"$kiln" emit-c "$f" --passes none | awk -v d="$tmp" '/^\/\* ==== kernel /{k++; next} {print > (d "/unit" k ".c")}'
ok=0
for u in "$tmp"/unit*.c; do
  ${CC:-cc} -std=c11 -Wall -Werror -Wno-unused-function -fsyntax-only "$u" 2>>"$tmp/cc.err" || ok=1
done
grep -q '^/\* kiln scan kernel' "$tmp"/unit*.c || ok=1
t $ok "scan_check: every generated unit, scans included ($(grep -l '^/\* kiln scan kernel' "$tmp"/unit*.c | wc -l)), compiles with ${CC:-cc}"
[ $ok = 0 ] || head -20 "$tmp/cc.err"

# the kernels are those kiln run compiles (after the passes and fusion)
kernels() { grep -c '^/\* ==== kernel [0-9]* of [0-9]*: ' "$1"; }
# "index label" of every kernel header, and of every `kiln explain --json` row
heads() { sed -n 's|^/\* ==== kernel \([0-9]*\) of [0-9]*: \([^,]*\), node .*|\1 \2|p' "$1"; }
rows() { grep -o '"label": *"[^"]*"' "$1" | sed 's/"label": *"\(.*\)"/\1/' | awk '{print NR - 1, $0}'; }
# (the timing line; the tier report may follow it)
runk() { sed -n 's/^compile: .*(1 call, \([0-9]*\) kernels*)$/\1/p' "$1"; }
es="$src/examples/eight_schools.kg"
"$kiln" emit-c "$es" >"$tmp/es.c" 2>"$tmp/err"; r=$?
"$kiln" run "$es" --random-inputs 1 >"$tmp/es.run" 2>>"$tmp/err"
nk=$(kernels "$tmp/es.c"); nr=$(runk "$tmp/es.run")
[ $r = 0 ] && [ -n "$nr" ] && [ "$nk" = "$nr" ] && [ "$nk" -lt 65 ]
t $? "eight_schools: emit-c shows as many kernels as kiln run compiles ($nk, run: $nr)"
"$kiln" explain "$es" --json >"$tmp/es.json" 2>>"$tmp/err"
heads "$tmp/es.c" >"$tmp/es.heads"; rows "$tmp/es.json" >"$tmp/es.rows"
[ -s "$tmp/es.heads" ] && cmp -s "$tmp/es.heads" "$tmp/es.rows"
t $? "eight_schools: kernel headers (index, label) match kiln explain's rows"
grep -q '^/\* ==== kernel [0-9]* of [0-9]*: fused' "$tmp/es.c"
t $? "eight_schools: fused kernels appear with the default passes ($(grep -c '^/\* ==== kernel [0-9]* of [0-9]*: fused' "$tmp/es.c"))"
"$kiln" emit-c "$es" --passes all | cmp -s - "$tmp/es.c"
t $? "--passes all gives the default output"

# --passes none: the graph lowered as written (65 kernels, no fusion), as
# before emit-c applied the passes; the same with $KILN_PASSES and with a
# policy's passes: []
"$kiln" emit-c "$es" --passes none >"$tmp/none.c" 2>>"$tmp/err"; r=$?
"$kiln" run "$es" --random-inputs 1 --passes none >"$tmp/none.run" 2>>"$tmp/err"
[ $r = 0 ] && [ "$(kernels "$tmp/none.c")" = 65 ] && [ "$(runk "$tmp/none.run")" = 65 ]
t $? "eight_schools --passes none: 65 kernels, as kiln run --passes none"
! grep -q '^/\* ==== kernel [0-9]* of [0-9]*: fused' "$tmp/none.c"
t $? "eight_schools --passes none: no fused kernel"
KILN_PASSES=none "$kiln" emit-c "$es" >"$tmp/env.c" 2>>"$tmp/err"
cmp -s "$tmp/env.c" "$tmp/none.c"
t $? "KILN_PASSES=none gives the --passes none output"
KILN_PASSES=none "$kiln" emit-c "$es" --passes all | cmp -s - "$tmp/es.c"
t $? "--passes overrides KILN_PASSES"
KILN_PASSES=none "$kiln" explain "$es" --json >"$tmp/none.json" 2>>"$tmp/err"
heads "$tmp/none.c" >"$tmp/none.heads"; rows "$tmp/none.json" >"$tmp/none.rows"
cmp -s "$tmp/none.heads" "$tmp/none.rows"
t $? "--passes none: kernel headers match kiln explain's rows under KILN_PASSES=none"
printf 'kiln_policy: 1\nbackends: [interp]\ndefault: interp\npasses: []\n' >"$tmp/nopass.yaml"
"$kiln" emit-c "$es" --policy "$tmp/nopass.yaml" | cmp -s - "$tmp/none.c"
t $? "--policy with passes: [] gives the --passes none output"
cp "$es" "$tmp/m.kg"; cp "$tmp/nopass.yaml" "$tmp/m.policy.yaml"
"$kiln" emit-c "$tmp/m.kg" | cmp -s - "$tmp/none.c"
t $? "FILE.policy.yaml next to the model is honoured, as by kiln run"
# the policy's fusion caps: max_width 0 is no fusion (= --passes -fuse)
printf 'kiln_policy: 1\nbackends: [interp]\ndefault: interp\nfusion:\n  max_width: 0\n' >"$tmp/nofuse.yaml"
"$kiln" emit-c "$es" --policy "$tmp/nofuse.yaml" >"$tmp/nofuse.c" 2>>"$tmp/err"
# (emit-c lowers without hoisting: compare with kiln run's without it)
KILN_PASSES=-hoist "$kiln" run "$es" --random-inputs 1 --policy "$tmp/nofuse.yaml" >"$tmp/nofuse.run" 2>>"$tmp/err"
"$kiln" emit-c "$es" --passes -fuse | cmp -s - "$tmp/nofuse.c" &&
  [ "$(kernels "$tmp/nofuse.c")" = "$(runk "$tmp/nofuse.run")" ] &&
  ! grep -q ': fused' "$tmp/nofuse.c"
t $? "the policy's fusion: caps apply ($(kernels "$tmp/nofuse.c") kernels, as kiln run with that policy)"

# errors: a bad pass list is a message and exit status 1, nothing printed
"$kiln" emit-c "$es" --passes bogus >"$tmp/out" 2>"$tmp/msg"; r=$?
[ $r = 1 ] && [ ! -s "$tmp/out" ] && grep -q "unknown pass 'bogus'" "$tmp/msg"
t $? "--passes bogus: exit 1 and '$(head -c 40 "$tmp/msg")...'"
KILN_PASSES=bogus "$kiln" emit-c "$es" >"$tmp/out" 2>"$tmp/msg"; r=$?
[ $r = 1 ] && [ ! -s "$tmp/out" ] && grep -q "KILN_PASSES: unknown pass 'bogus'" "$tmp/msg"
t $? "KILN_PASSES=bogus: exit 1 with a message"
"$kiln" emit-c "$es" --policy "$tmp/missing.yaml" >"$tmp/out" 2>"$tmp/msg"; r=$?
[ $r = 1 ] && [ ! -s "$tmp/out" ] && [ -s "$tmp/msg" ]
t $? "--policy of a missing file: exit 1 with a message"
"$kiln" emit-c "$es" --passes >/dev/null 2>&1; [ $? = 2 ]
t $? "--passes without a list is a usage error (exit 2)"
"$kiln" emit-c "$es" --opt 2 >/dev/null 2>&1; [ $? = 2 ]
t $? "emit-c rejects an unknown option (exit 2)"
"$kiln" emit-c "$src/tests/graphs/nonexistent.kg" >/dev/null 2>&1
t $((! $?)) "emit-c of a missing file fails"
echo "1..$n"
exit $fail
