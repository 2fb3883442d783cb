#!/bin/sh
# test_llvm.sh — the llvm backend through the CLI: `kiln emit-llvm` shows
# vectorised IR of the kernels `kiln run` compiles (after the rewrite
# passes and fusion; --passes none: the graph as written); a generated
# model of more than 1000 kernels compiled on two threads (--jobs 2) gives
# exactly the results of one thread, and of the interpreter.  Skips when
# the llvm plugin was not built.
kiln="${KILN_BUILDDIR:-.}/tools/kiln"
gen="${KILN_BUILDDIR:-.}/tools/kiln-gen"
src="${KILN_SRCDIR:-.}"
n=0
fail=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
if [ ! -f "${KILN_BUILDDIR:-.}/backends/llvm/.libs/llvm.so" ]; then
  echo "1..1"
  echo "ok 1 # SKIP llvm backend not built"
  exit 0
fi
# plugins from the build tree
KILN_PLUGIN_PATH="${KILN_BUILDDIR:-.}/backends/llvm/.libs:${KILN_BUILDDIR:-.}/backends/interp/.libs"
export KILN_PLUGIN_PATH
unset KILN_PASSES KILN_POLICY   # the default passes and policy
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. emit-llvm: optimised IR, vector operations on doubles
"$kiln" emit-llvm "$src/examples/eight_schools.kg" >"$tmp/ir" 2>"$tmp/err"
ok $? "kiln emit-llvm eight_schools.kg"
grep -q '^define void @kiln_ec' "$tmp/ir"; ok $? "the IR defines the row functions"
grep -qE '<[0-9]+ x double>' "$tmp/ir"; ok $? "vector instructions: $(grep -oE '<[0-9]+ x double>' "$tmp/ir" | sort | uniq -c | sort -rn | head -1)"
"$kiln" emit-llvm "$src/examples/eight_schools.kg" --opt 3 >/dev/null 2>&1; ok $? "emit-llvm --opt 3"
"$kiln" emit-llvm --bogus x.kg >/dev/null 2>&1; [ $? = 2 ]; ok $? "emit-llvm rejects an unknown option"
# the kernels kiln run compiles (after the passes and fusion); --passes
# none: the graph as written; a bad pass list: exit 1 with a message
nk=$(grep -c '^; ==== kernel [0-9]* of [0-9]*: ' "$tmp/ir")
nr=$("$kiln" run "$src/examples/eight_schools.kg" --random-inputs 1 --backend llvm 2>/dev/null | tail -1 | sed -n 's/.*(1 call, \([0-9]*\) kernels*)$/\1/p')
[ -n "$nr" ] && [ "$nk" = "$nr" ] && grep -q '^; ==== kernel [0-9]* of [0-9]*: fused' "$tmp/ir"
ok $? "emit-llvm shows the $nk kernels kiln run compiles (run: $nr), fused ones among them"
"$kiln" emit-llvm "$src/examples/eight_schools.kg" --passes none >"$tmp/ir0" 2>/dev/null
[ "$(grep -c '^; ==== kernel [0-9]* of [0-9]*: ' "$tmp/ir0")" = 65 ] && ! grep -q '^; ==== kernel [0-9]* of [0-9]*: fused' "$tmp/ir0"
ok $? "emit-llvm --passes none: 65 kernels, none fused"
KILN_PASSES=none "$kiln" emit-llvm "$src/examples/eight_schools.kg" | cmp -s - "$tmp/ir0"
ok $? "emit-llvm honours KILN_PASSES"
"$kiln" emit-llvm "$src/examples/eight_schools.kg" --passes bogus >"$tmp/out" 2>"$tmp/msg"
[ $? = 1 ] && [ ! -s "$tmp/out" ] && grep -q "unknown pass 'bogus'" "$tmp/msg"
ok $? "emit-llvm --passes bogus: exit 1 with a message"

# 1b. --fast-math: a sum's loop becomes a vector reduction; without it the
# fold stays scalar (in order, bitwise equal to the interpreter)
cat >"$tmp/sum.kg" <<'EOF'
kiln 1
graph s
  input x: f64[n]
  input y: f64[n]
  output s = sum(mul(x, y))
end
EOF
"$kiln" emit-llvm "$tmp/sum.kg" >"$tmp/sum0" 2>/dev/null
"$kiln" emit-llvm "$tmp/sum.kg" --fast-math >"$tmp/sumf" 2>/dev/null
# (with the default passes the mul is fused into the sum: "fused_sum")
sed -n '/: \(fused_\)\{0,1\}sum, node/,$p' "$tmp/sum0" >"$tmp/red0"
sed -n '/: \(fused_\)\{0,1\}sum, node/,$p' "$tmp/sumf" >"$tmp/redf"
[ -s "$tmp/red0" ] && ! grep -q 'fadd <' "$tmp/red0"; ok $? "without --fast-math the sum is a scalar fold"
grep -qE 'fadd <[0-9]+ x double>|vector\.reduce\.fadd' "$tmp/redf"; ok $? "with --fast-math it is a vector reduction"

# 2. parallel compile of a 1000+-kernel model: --jobs 2 == --jobs 1 == interp
"$gen" pooled --groups 10 --shared 12 --likelihood gamma -o "$tmp" >/dev/null
m="$tmp/pooled_g10_p12_gamma.kg"
for j in 1 2; do
  "$kiln" run "$m" --random-inputs 3 --backend llvm --opt 1 --jobs $j >"$tmp/j$j" 2>"$tmp/e$j"
  ok $? "model compiled with --jobs $j ($(tail -1 "$tmp/j$j" | sed 's/.*(//; s/)//'))"
  [ ! -s "$tmp/e$j" ]; ok $? "no fallback diagnostics with --jobs $j"
done
"$kiln" run "$m" --random-inputs 3 --backend interp >"$tmp/ji" 2>/dev/null
sed '$d' "$tmp/j1" >"$tmp/o1"; sed '$d' "$tmp/j2" >"$tmp/o2"; sed '$d' "$tmp/ji" >"$tmp/oi"
cmp -s "$tmp/o1" "$tmp/o2"; ok $? "--jobs 2 gives the same outputs as --jobs 1"
cmp -s "$tmp/o1" "$tmp/oi"; ok $? "and the same as the interpreter"
"$kiln" run "$m" --jobs 0 >/dev/null 2>&1; [ $? = 2 ]; ok $? "--jobs 0 is refused"
echo "1..$n"
exit $fail
