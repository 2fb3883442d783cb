#!/bin/sh
# test_policy.sh — the CLI side of backend policies (docs/policy.md):
# kiln explain (text and --json), kiln policy check, kiln run --policy,
# $KILN_POLICY, a per-model FILE.policy.yaml, errors with file:line:column,
# and fallback when a plugin is missing.  TAP output.
src=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
kiln="$build/tools/kiln"
tmp=${TMPDIR:-/tmp}/kiln_policy_sh.$$
mkdir -p "$tmp/empty" || exit 1
trap 'rm -rf "$tmp"' EXIT
unset KILN_BACKEND KILN_POLICY
KILN_CACHE=off; export KILN_CACHE
n=0
fails=0
t() {  # t DESCRIPTION COMMAND...: ok when the command succeeds
    n=$((n + 1))
    desc=$1
    shift
    if "$@" >/dev/null 2>&1; then
        echo "ok $n - $desc"
    else
        echo "not ok $n - $desc"
        fails=$((fails + 1))
    fi
}
es="$src/examples/eight_schools.kg"
ins="-i mu=0 -i log_tau=0 -i theta_t=0"

# explain with the installed default (found from the source tree)
"$kiln" explain "$es" >"$tmp/explain.txt" 2>"$tmp/err.txt"
t "explain exits 0" test $? -eq 0
# the installed copy when kiln is installed (make check after make
# install), else the source tree's
t "explain names the default policy" grep -q "^policy: .*/default.yaml (default)" "$tmp/explain.txt"
# (less the hoisted values' section: a title and one line each)
t "explain has a row per kernel" test "$(grep -c '^[0-9]' "$tmp/explain.txt")" -eq "$(grep -v '^hoisted \|^      node ' "$tmp/explain.txt" | grep -vc '^      fused ' | awk '{print $1 - 3}')"
# fused kernels: a line under the row names the nodes (issue 14)
t "explain: a fused kernel lists its nodes (logp among them)" grep -Eq '^      fused [0-9]+ nodes: .*\blogp\b' "$tmp/explain.txt"
t "explain: every fused line follows a kernel row" awk '/^      fused /{ if (prev !~ /^[0-9]/) exit 1 } { prev = $0 }' "$tmp/explain.txt"
t "explain prints nothing on stderr" test ! -s "$tmp/err.txt"
"$kiln" explain "$es" --json >"$tmp/explain.json"
t "explain --json is JSON" python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['kernels'] and all('rule' in k and 'backend' in k and 'cost' in k for k in d['kernels'])" "$tmp/explain.json"
t "explain --json: fused_nodes, fused and split for every kernel" python3 -c "
import json,sys
ks = json.load(open(sys.argv[1]))['kernels']
assert all('fused_nodes' in k and 'fused' in k and 'split' in k for k in ks)
assert any(k['fused_nodes'] > 1 and 'logp' in k['fused'].split(', ') for k in ks)
assert all((k['fused'] is None) == (k['fused_nodes'] == 1) for k in ks)" "$tmp/explain.json"
# a region of 100 nodes: the table shows 64 names, --json all of them
{ echo 'kiln 1'; echo 'graph wide'; echo '  input x: f64'; echo '  v0 = mul(x, 1.5)'
  i=1; while [ $i -lt 100 ]; do echo "  v$i = mul(v$((i - 1)), x)"; i=$((i + 1)); done
  echo '  output y = v99'; echo 'end'; } >"$tmp/wide.kg"
"$kiln" explain "$tmp/wide.kg" >"$tmp/wide.txt"
t "explain: a 100-node region shows 64 names and how many more" grep -q 'fused 100 nodes: .*, \.\.\. (36 more)' "$tmp/wide.txt"
"$kiln" explain "$tmp/wide.kg" --json >"$tmp/wide.json"
t "explain --json: every member of the 100-node region" python3 -c "
import json,sys
ks = json.load(open(sys.argv[1]))['kernels']
assert any(k['fused_nodes'] == 100 for k in ks)
assert all(k['fused'] is None or len(k['fused'].split(', ')) == k['fused_nodes'] for k in ks)" "$tmp/wide.json"
# a cap splits a group, and explain says which cap
printf 'kiln_policy: 1\nbackends: [interp]\nfusion: {max_scalar_ops: 12}\n' >"$tmp/caps.yaml"
"$kiln" explain "$es" --policy "$tmp/caps.yaml" >"$tmp/caps.txt"
t "explain: a split names its cap" grep -q 'split at the instruction cap (fusion.max_scalar_ops)' "$tmp/caps.txt"

# --policy: every kernel by rule
cat >"$tmp/sums.yaml" <<'P'
kiln_policy: 1
backends: [interp]
rules:
  - name: sums
    when: {op: sum}
    use: interp
P
# unfused, so that eight schools keeps a plain sum kernel for the rule
KILN_PASSES=-fuse "$kiln" explain "$es" --policy "$tmp/sums.yaml" >"$tmp/e2.txt"
t "--policy: explain shows the rule" grep -q " sums  *interp  *interp" "$tmp/e2.txt"
t "--policy: source shown" grep -q "^policy: $tmp/sums.yaml (policy_file)" "$tmp/e2.txt"

# a rule name holding a newline stays on its row (found by an attack)
printf 'kiln_policy: 1\nbackends: [interp]\nrules:\n  - name: "two\\nlines"\n    use: interp\n' >"$tmp/nl.yaml"
"$kiln" explain "$es" --policy "$tmp/nl.yaml" >"$tmp/e5.txt"
t "explain: a control character in a rule name is shown as ?" grep -q " two?lines  *interp" "$tmp/e5.txt"
t "explain: one row per kernel with such a name" test "$(grep -c '^[0-9]' "$tmp/e5.txt")" -eq "$(grep -v '^hoisted \|^      node ' "$tmp/e5.txt" | grep -vc '^      fused ' | awk '{print $1 - 3}')"

# $KILN_POLICY, and --policy over it
KILN_POLICY="$tmp/sums.yaml" "$kiln" explain "$es" >"$tmp/e3.txt"
t "\$KILN_POLICY is used" grep -q "(KILN_POLICY)" "$tmp/e3.txt"
KILN_POLICY=/nonexistent.yaml "$kiln" explain "$es" --policy "$tmp/sums.yaml" >"$tmp/e4.txt"
t "--policy beats \$KILN_POLICY" grep -q "(policy_file)" "$tmp/e4.txt"

# a per-model policy next to the model
cp "$es" "$tmp/m.kg"
cp "$tmp/sums.yaml" "$tmp/m.policy.yaml"
"$kiln" explain "$tmp/m.kg" >"$tmp/e5.txt"
t "m.policy.yaml next to m.kg is picked up" grep -q "^policy: $tmp/m.policy.yaml (model)" "$tmp/e5.txt"
KILN_POLICY="$src/conf/fastest-start.yaml" "$kiln" explain "$tmp/m.kg" >"$tmp/e6.txt"
t "\$KILN_POLICY beats the per-model policy" grep -q "fastest-start.yaml (KILN_POLICY)" "$tmp/e6.txt"

# kiln run under policies gives the same numbers
want=$("$kiln" run "$es" $ins --backend interp | grep '^logp')
for p in default fastest-start fastest-runtime wide-models; do
    got=$("$kiln" run "$es" $ins --policy "$src/conf/$p.yaml" 2>/dev/null | grep '^logp')
    t "run --policy conf/$p.yaml: same logp" test "$got" = "$want"
done

# errors: file:line:column, exit 1, never a silent fallback
printf 'kiln_policy: 1\nrules:\n  - when: {width: {gt: lots}}\n    use: interp\n' >"$tmp/bad.yaml"
"$kiln" policy check "$tmp/bad.yaml" >/dev/null 2>"$tmp/err.txt"
t "policy check: a bad file exits 1" test $? -eq 1
t "policy check: file:line:column" grep -q "^kiln: $tmp/bad.yaml:3:24: gt: expected a number, got 'lots'" "$tmp/err.txt"
"$kiln" run "$es" $ins --policy "$tmp/bad.yaml" >/dev/null 2>"$tmp/err.txt"
t "run --policy BAD exits 1" test $? -eq 1
t "run --policy BAD: file:line:column" grep -q "bad.yaml:3:24:" "$tmp/err.txt"
"$kiln" explain "$es" --policy "$tmp/bad.yaml" >/dev/null 2>&1
t "explain --policy BAD exits 1" test $? -eq 1
t "policy check: conf/default.yaml" "$kiln" policy check "$src/conf/default.yaml"
# tiers: (issue 15): checked key by key, like every section
printf 'kiln_policy: 1\ntiers:\n  tier0: [interp, tcc]\n  tier1: tcc\n' >"$tmp/tiers.yaml"
"$kiln" policy check "$tmp/tiers.yaml" >/dev/null 2>"$tmp/err.txt"
t "policy check: tier1 in tier0 exits 1" test $? -eq 1
t "policy check: tier1 in tier0 at file:line:column" grep -q "^kiln: $tmp/tiers.yaml:4:10: tier1: 'tcc' is also in tier0" "$tmp/err.txt"
# issue 24: a misspelled tier backend was silent, and check said nothing
printf 'kiln_policy: 1\ntiers:\n  tier1: lvm\n' >"$tmp/tiers.yaml"
"$kiln" policy check "$tmp/tiers.yaml" >/dev/null 2>"$tmp/err.txt"
t "policy check: tier1 lvm exits 1" test $? -eq 1
t "policy check: tier1 lvm: line, did you mean llvm" grep -q "^kiln: $tmp/tiers.yaml:3:10: tier1: unknown backend 'lvm' (did you mean 'llvm'?" "$tmp/err.txt"
"$kiln" run "$es" $ins --policy "$tmp/tiers.yaml" >/dev/null 2>"$tmp/err.txt"
t "run --policy with tier1 lvm exits 1" test $? -eq 1
printf 'kiln_policy: 1\ntiers:\n  tier1: mybackend\n' >"$tmp/tiers.yaml"
"$kiln" policy check "$tmp/tiers.yaml" >"$tmp/out.txt" 2>&1
t "policy check: a plugin name far from kiln's is accepted" test $? -eq 0
t "policy check: ... with a note that it is not installed" grep -q "note: tier-1 backend 'mybackend' is not installed here" "$tmp/out.txt"
# a name one edit from kiln's own is no typo when such a plugin is
# installed (a third-party `cc`): the file's name is what counts here
mkdir -p "$tmp/ccdir"
for so in "$build"/plugins/example/.libs/example.so; do
  [ -f "$so" ] && { cp "$so" "$tmp/ccdir/cc.so"; break; }
done
printf 'kiln_policy: 1\ntiers:\n  tier1: cc\n' >"$tmp/tiers.yaml"
if [ -f "$tmp/ccdir/cc.so" ]; then
  KILN_PLUGIN_PATH="$tmp/ccdir" "$kiln" policy check "$tmp/tiers.yaml" >"$tmp/out.txt" 2>&1
  t "policy check: an installed plugin 'cc' is no typo of tcc" test $? -eq 0
else
  n=$((n + 1)); echo "ok $n # SKIP no example plugin built"
fi
KILN_PLUGIN_PATH="$tmp/empty" "$kiln" policy check "$tmp/tiers.yaml" >/dev/null 2>"$tmp/err.txt"
t "policy check: 'cc' with no such plugin is a typo of tcc" grep -q "did you mean 'tcc'" "$tmp/err.txt"
printf 'kiln_policy: 1\ntiers: {threads: "4"}\n' >"$tmp/tiers.yaml"
"$kiln" policy check "$tmp/tiers.yaml" >/dev/null 2>"$tmp/err.txt"
t "policy check: a quoted tiers.threads at file:line:column" grep -q "^kiln: $tmp/tiers.yaml:2:18: threads: expected a number, got a quoted string" "$tmp/err.txt"
printf 'kiln_policy: 1\ntiers: {tier0: interp, tier1: tcc, threads: 2, ratio: 1, min_gain_ns: 0, sample_every: 8}\n' >"$tmp/tiers.yaml"
t "policy check: a full tiers: section" "$kiln" policy check "$tmp/tiers.yaml"
"$kiln" policy check >"$tmp/out.txt" 2>&1
t "policy check with no file checks the installed default" grep -q "default.yaml: ok" "$tmp/out.txt"

# a missing plugin: one line, then interp; same numbers
printf 'kiln_policy: 1\nbackends: [absent, interp]\ndefault: absent\n' >"$tmp/absent.yaml"
got=$(KILN_PLUGIN_PATH="$tmp/empty" "$kiln" run "$es" $ins --policy "$tmp/absent.yaml" 2>"$tmp/err.txt" | grep '^logp')
t "missing plugin: same logp" test "$got" = "$want"
t "missing plugin: exactly one diagnostic line" test "$(wc -l <"$tmp/err.txt")" -eq 1
t "missing plugin: the line says why" grep -q "backend 'absent' not found.*; using interp" "$tmp/err.txt"
KILN_PLUGIN_PATH="$tmp/empty" "$kiln" explain "$es" --policy "$tmp/absent.yaml" >"$tmp/e7.txt"
t "explain shows the fallback" grep -q "absent  *interp .*(fallback: backend 'absent' not found" "$tmp/e7.txt"
"$kiln" policy check "$tmp/absent.yaml" >"$tmp/out.txt"
t "policy check notes a backend not installed" grep -q "backend 'absent' is not installed here" "$tmp/out.txt"

# --backend overrides the policy
"$kiln" run "$es" $ins --policy "$tmp/absent.yaml" --backend interp >/dev/null 2>"$tmp/err.txt"
t "--backend overrides --policy (no fallback line)" test ! -s "$tmp/err.txt"

echo "1..$n"
[ "$fails" -eq 0 ]
