#!/bin/sh
# test_hoist_cli.sh — `kiln explain` lists the values hoisting stores
# (computed when the data are bound) with their sizes, and those kept per
# call over the policy's hoist.max_size; `--passes -hoist` / KILN_PASSES
# turn hoisting off (docs/architecture.md, "Data-only values").
set -u
B=${KILN_BUILDDIR:-.}
KILN="$B/tools/kiln"
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
export KILN_CACHE_DIR="$T/cache"
n=0
fail=0
check() {  # check DESCRIPTION COMMAND...: ok when COMMAND succeeds
    n=$((n + 1))
    d=$1
    shift
    if "$@"; then echo "ok $n - $d"; else echo "not ok $n - $d"; fail=1; fi
}
cat > "$T/a.kg" <<'KG'
kiln 1
graph a
  input x: f64[3]
  const c: f64[2, 3] = [[1, 2, 3], [4, 5, 6]]
  e = exp(sum(c, axis=0))
  output y = mul(x, e)
end
KG
"$KILN" explain "$T/a.kg" > "$T/out" 2>&1
check "explain lists the hoisted value and its size" \
    grep -q "^      node 'e' (exp, .kg line 5) f64\[3\]  24 bytes$" "$T/out"
check "explain has a hoisted section" grep -q "^hoisted" "$T/out"
"$KILN" explain --json "$T/a.kg" > "$T/json" 2>&1
check "explain --json lists it" grep -q \
    '"hoisted": \[{"value": "node '"'"'e'"'"' (exp, .kg line 5) f64\[3\]", "bytes": 24, "stored": true}\]' \
    "$T/json"
KILN_PASSES=-hoist "$KILN" explain "$T/a.kg" > "$T/off" 2>&1
check "KILN_PASSES=-hoist: nothing hoisted" sh -c "! grep -q hoisted '$T/off'"
cat > "$T/cap.yaml" <<'YAML'
kiln_policy: 1
backends: [interp]
default: interp
hoist: {max_size: 16}
YAML
"$KILN" explain "$T/a.kg" --policy "$T/cap.yaml" > "$T/cap" 2>&1
"$KILN" run "$T/a.kg" -i 'x=[1,2,3]' --policy "$T/cap.yaml" \
    > /dev/null 2> "$T/caprun"
check "over the cap: one diagnostic line from kiln run" test \
    "$(grep -c "^kiln: hoist: node 'e' (exp, .kg line 5) f64\[3\] is 24 bytes, over hoist.max_size (16): computed at every call\$" "$T/caprun")" = 1
check "over the cap: explain says per call" grep -q \
    "24 bytes  (over hoist.max_size: computed at every call)" "$T/cap"
r1=$("$KILN" run "$T/a.kg" -i 'x=[1,2,3]' 2>/dev/null | grep '^y = ')
r2=$("$KILN" run "$T/a.kg" -i 'x=[1,2,3]' --passes -hoist 2>/dev/null |
     grep '^y = ')
check "kiln run: the same result with and without hoisting ($r1)" \
    test -n "$r1" -a "$r1" = "$r2"
echo "1..$n"
exit $fail
