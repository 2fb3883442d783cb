#!/bin/sh
# test_cli_help.sh — a CLI that tells the truth and helps (TAP; issue 24
# section 4, docs/kiln.1): a --backend that is not there is an error,
# "did you mean" for names the user got wrong, --random-inputs sized by
# the data, kiln model (the log density and gradient a sampler sees,
# checked against numbers computed here with awk) and --trace-nonfinite.
top=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
kiln="$build/tools/kiln"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0
ok() {  # ok COND-EXIT-STATUS DESCRIPTION
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
# close A B RTOL: |A - B| <= RTOL * max(1, |B|)
close() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; if (m < 1) m = 1; exit !(a != "" && d <= r * m) }'; }
lines() { wc -l <"$1" | tr -d ' '; }
unset KILN_BACKEND KILN_POLICY KILN_PASSES
export KILN_CACHE=off

cat >"$tmp/ok.kg" <<'EOF'
kiln 1
graph ok
  input x: f64
  output y = exp(x)
end
EOF

# --- 1. --backend NAME that kiln cannot provide: one line, exit 1 ---------
"$kiln" run "$tmp/ok.kg" -i x=1 --backend lvm >"$tmp/out" 2>"$tmp/err"
st=$?
[ $st = 1 ] && [ ! -s "$tmp/out" ] && [ "$(lines "$tmp/err")" = 1 ] &&
  grep -q "^kiln: --backend lvm: backend 'lvm' not found (searched .*(available: interp" "$tmp/err"
ok $? "--backend lvm: exit 1 ($st), one line: $(cat "$tmp/err")"
if [ -f "$build/backends/llvm/.libs/llvm.so" ]; then
  grep -q "did you mean 'llvm'?" "$tmp/err"; ok $? "--backend lvm: did you mean 'llvm'"
else
  echo "ok $((n = n + 1)) - # SKIP the llvm backend is not built"
fi
"$kiln" run "$tmp/ok.kg" -i x=1 --backend lvm --quiet >"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && [ "$(lines "$tmp/err")" = 1 ]
ok $? "--backend lvm --quiet: still the error and exit 1"
"$kiln" run "$tmp/ok.kg" -i x=1 --backend intrep >"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && grep -q "did you mean 'interp'?" "$tmp/err"
ok $? "--backend intrep: did you mean 'interp' ($(cat "$tmp/err"))"
"$kiln" model "$top/examples/eight_schools_noncentered.kg" \
  --data "$top/examples/data/posteriordb/eight_schools.json" --random-inputs 1 \
  --backend lvm >"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && grep -q "^kiln: --backend lvm: " "$tmp/err"
ok $? "kiln model --backend lvm: exit 1"
# a file refused on the way is still reported when the backend is found
# later on the path (here: the build tree's example plugin)
ex="$build/plugins/example/.libs/example.so"
if [ -f "$ex" ]; then
  mkdir "$tmp/gw"; chmod 755 "$tmp/gw"; cp "$ex" "$tmp/gw/example.so"; chmod 775 "$tmp/gw/example.so"
  KILN_PLUGIN_PATH="$tmp/gw" "$kiln" run "$tmp/ok.kg" -i x=1 --backend example >"$tmp/out" 2>"$tmp/err"
  [ $? = 0 ] && grep -q "refusing plugin $tmp/gw/example.so" "$tmp/err"
  ok $? "--backend example: the refused copy is named, the next one is used"
  KILN_PLUGIN_PATH="$tmp/gw" "$kiln" run "$tmp/ok.kg" -i x=1 --backend example --quiet >"$tmp/out" 2>"$tmp/err"
  [ $? = 0 ] && [ ! -s "$tmp/err" ]; ok $? "... and --quiet silences that line"
else
  echo "ok $((n = n + 1)) - # SKIP the example plugin is not built"
  echo "ok $((n = n + 1)) - # SKIP the example plugin is not built"
fi
# a policy, or $KILN_BACKEND, still falls back (with a line; exit 0)
KILN_BACKEND=lvm "$kiln" run "$tmp/ok.kg" -i x=1 >"$tmp/out" 2>"$tmp/err"
[ $? = 0 ] && grep -q '^y = 2.71828' "$tmp/out" && grep -q "backend 'lvm' not found" "$tmp/err"
ok $? "KILN_BACKEND=lvm falls back to the interpreter with a line"
"$kiln" run "$tmp/ok.kg" -i x=1 --backend interp >"$tmp/out" 2>"$tmp/err"
[ $? = 0 ] && [ ! -s "$tmp/err" ]; ok $? "--backend interp: no line"

# --- 2. --random-inputs takes sizes from the data -----------------------------
radon="$top/examples/posteriordb/radon_variable_intercept_centered.kg"
rdata="$top/examples/data/posteriordb/radon_mn.json"
"$kiln" run "$radon" --data "$rdata" --random-inputs 1 >"$tmp/out" 2>"$tmp/err"
st=$?
v=$(sed -n 's/^logp = //p' "$tmp/out")
[ $st = 0 ] && [ -n "$v" ] && close "$v" "$v" 0
ok $? "kiln run radon_variable_intercept_centered --data radon_mn.json --random-inputs 1: logp $v $(head -c 200 "$tmp/err")"
"$kiln" model "$radon" --data "$rdata" --random-inputs 1 --json >"$tmp/j" 2>"$tmp/err"
[ $? = 0 ] && [ "$(grep -o '"name": "alpha\.[0-9]*"' "$tmp/j" | wc -l | tr -d ' ')" = 85 ]
ok $? "kiln model on it: alpha has J = 85 elements (the data's integer J)"

# --- 3. did you mean ---------------------------------------------------------
printf 'kiln 1\ngraph g\n  input x: f64\n  output y = exq(x)\nend\n' >"$tmp/op.kg"
"$kiln" run "$tmp/op.kg" -i x=1 >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "op.kg:4:14: unknown op 'exq'; did you mean 'exp'?" "$tmp/err"
ok $? "unknown op: $(cat "$tmp/err")"
printf 'kiln 1\ngraph g\n  input x: f64\n  output y = normal_lpfd(x, 0, 1)\nend\n' >"$tmp/op2.kg"
"$kiln" check "$tmp/op2.kg" >/dev/null 2>"$tmp/err"
grep -q "unknown op 'normal_lpfd'; did you mean 'normal_lpdf'?" "$tmp/err"
ok $? "unknown op, a composite: $(cat "$tmp/err")"
printf 'kiln 1\ngraph g\n  input x: f64\n  output y = qwertyuiop(x)\nend\n' >"$tmp/op3.kg"
"$kiln" check "$tmp/op3.kg" >/dev/null 2>"$tmp/err"
grep -q "unknown op 'qwertyuiop'$" "$tmp/err"
ok $? "unknown op nothing is close to: no suggestion ($(cat "$tmp/err"))"
"$kiln" run "$tmp/ok.kg" -i X=1 >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "^kiln: -i X: the model has no input of that name; did you mean 'x'? (its inputs: x)$" "$tmp/err"
ok $? "unknown input: $(cat "$tmp/err")"
echo '{"X": 1}' >"$tmp/p.json"
"$kiln" run "$tmp/ok.kg" --inputs "$tmp/p.json" >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "^kiln: --inputs: .*p.json: the model has no input named 'X'; did you mean 'x'? (its inputs: x)$" "$tmp/err"
ok $? "unknown name in --inputs: $(cat "$tmp/err")"
"$kiln" run "$tmp/ok.kg" -i x=1 --passes cse,fsue >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "unknown pass 'fsue'; did you mean 'fuse'?" "$tmp/err"
ok $? "unknown pass: $(cat "$tmp/err")"
es="$top/examples/eight_schools_noncentered.kg"
esd="$top/examples/data/posteriordb/eight_schools.json"
echo '{"J": 8, "y": [28, 8, -3, 7, -1, 1, 18, 12], "Sigma": [15, 10, 16, 11, 9, 11, 10, 18]}' >"$tmp/bad.json"
"$kiln" run "$es" --data "$tmp/bad.json" --random-inputs 1 >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "^kiln: --data: shared value 'sigma': no variable 'sigma' in .*bad.json; did you mean 'Sigma'? (it has: J, y, Sigma)$" "$tmp/err"
ok $? "run --data without a variable: what the file has, the closest ($(cat "$tmp/err"))"
"$kiln" model "$es" --data "$tmp/bad.json" --random-inputs 1 >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "did you mean 'Sigma'? (it has: J, y, Sigma)" "$tmp/err"
ok $? "model --data without a variable: likewise ($(cat "$tmp/err"))"
"$kiln" run "$es" --data "$esd" --random-inputs 1 -i tau=1 >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "^kiln: -i tau: 'tau' is a bounded parameter; its input is the unconstrained 'tau_unc' (tau = 0 + exp(tau_unc))" "$tmp/err"
ok $? "-i tau=1 for a bounded parameter: $(cat "$tmp/err")"
"$kiln" run "$tmp/ok.kg" -i x= >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "^kiln: input 'x': the value is empty" "$tmp/err"
ok $? "-i x=: $(cat "$tmp/err")"
"$kiln" model "$es" --data "$esd" --random-inputs 1 -i Mu=1 >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "^kiln: -i Mu: the model has no parameter of that name; did you mean 'mu'?" "$tmp/err"
ok $? "kiln model -i Mu: $(cat "$tmp/err")"

# --- 4. kiln model against a density computed here -----------------------------
tt="0.1 -0.2 0.3 0 0.5 -1 1 0.25"
ys="28 8 -3 7 -1 1 18 12"
ss="15 10 16 11 9 11 10 18"
# the Stan program's density (every constant kept) + the log-Jacobian
# log(tau) of tau = exp(u); d/dmu and d/du = tau d/dtau + 1
ref=$(awk -v tt="$tt" -v ys="$ys" -v ss="$ss" -v mu=1.5 -v tau=2 'BEGIN {
  pi = atan2(0, -1); c = 0.5 * log(2 * pi)
  split(tt, t, " "); split(ys, y, " "); split(ss, s, " ")
  lp = 0; dmu = 0; dtau = 0
  for (j = 1; j <= 8; j++) {
    lp += -0.5 * t[j] ^ 2 - c
    th = t[j] * tau + mu; z = (y[j] - th) / s[j]
    lp += -0.5 * z ^ 2 - log(s[j]) - c
    dmu += z / s[j]; dtau += z / s[j] * t[j]
  }
  lp += -0.5 * (mu / 5) ^ 2 - log(5) - c; dmu += -mu / 25
  lp += -log(pi) - log(5) - log(1 + (tau / 5) ^ 2)
  dtau += -2 * tau / 25 / (1 + (tau / 5) ^ 2)
  printf "%.17g %.17g %.17g %.17g\n", lp + log(tau), lp, dmu, tau * dtau + 1
}')
set -- $ref
"$kiln" model "$es" --data "$esd" -i "theta_trans=[$(echo $tt | tr ' ' ,)]" \
  -i mu=1.5 -i tau=2 --check-grad >"$tmp/out" 2>"$tmp/err"
st=$?
lp=$(sed -n 's/^log density: \([^ ]*\) (with the log-Jacobian.*/\1/p' "$tmp/out")
[ $st = 0 ] && close "$lp" "$1" 1e-12
ok $? "eight schools nc: log density $lp = $1 (awk) $(cat "$tmp/err")"
g_mu=$(awk '$1 == "mu" { print $3 }' "$tmp/out")
g_tau=$(awk '$1 == "tau" { print $3 }' "$tmp/out")
u_tau=$(awk '$1 == "tau" { print $2 }' "$tmp/out")
c_tau=$(awk '$1 == "tau" { print $4 }' "$tmp/out")
close "$g_mu" "$3" 1e-10 && close "$g_tau" "$4" 1e-10
ok $? "gradient: d/dmu $g_mu = $3, d/dtau_unc $g_tau = $4"
close "$u_tau" 0.69314718055994531 1e-15 && close "$c_tau" 2 1e-15
ok $? "tau given constrained (2): unconstrained $u_tau = log 2"
grep -q '^check-grad: max error [0-9.e-]* at ' "$tmp/out"; ok $? "--check-grad line"
"$kiln" model "$es" --data "$esd" -i "theta_trans=[$(echo $tt | tr ' ' ,)]" \
  -i mu=1.5 -i tau_unc=0.69314718055994531 --no-jacobian >"$tmp/out" 2>"$tmp/err"
lp0=$(sed -n 's/^log density: \([^ ]*\) (without.*/\1/p' "$tmp/out")
g0=$(awk '$1 == "tau" { print $3 }' "$tmp/out")
close "$lp0" "$2" 1e-12 && close "$g0" "$(awk -v g="$4" 'BEGIN { printf "%.17g", g - 1 }')" 1e-10
ok $? "-i tau_unc=log 2 --no-jacobian: $lp0 = $2, gradient $g0 (one less)"
printf '{"theta_trans": [%s], "mu": 1.5, "tau_unc": 0.69314718055994531}' "$(echo $tt | tr ' ' ,)" >"$tmp/point.json"
"$kiln" model "$es" --data "$esd" --inputs "$tmp/point.json" >"$tmp/out" 2>"$tmp/err"
lpi=$(sed -n 's/^log density: \([^ ]*\) (with the log-Jacobian.*/\1/p' "$tmp/out")
close "$lpi" "$1" 1e-12; ok $? "--inputs with constrained and _unc names: $lpi $(cat "$tmp/err")"
"$kiln" model "$es" --data "$esd" --random-inputs 5 --json >"$tmp/j" 2>"$tmp/err"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["jacobian"] is True and len(d["parameters"]) == 10 and isinstance(d["log_density"], float), d' "$tmp/j"
ok $? "kiln model --json: 10 parameters"
"$kiln" model "$es" --data "$esd" -i mu=1 >"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && grep -q "^kiln: missing parameter values: theta_trans, tau " "$tmp/err"
ok $? "missing parameters are named: $(cat "$tmp/err")"
"$kiln" model "$es" --data "$esd" --random-inputs 1 -i tau=-1 >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "tau.* below its lower bound 0" "$tmp/err"
ok $? "a constrained value out of bounds: $(cat "$tmp/err")"
# a gradient that is wrong for finite differences: a step at x = 1
cat >"$tmp/step.kg" <<'EOF'
kiln 1
graph step
  param x: f64
  output logp = where(gt(x, 1.0), 10.0, 0.0)
end
EOF
"$kiln" model "$tmp/step.kg" -i x=1 --check-grad >"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && grep -q "^kiln: check-grad: the gradient differs from finite differences by .* (more than 0.0001) at x$" "$tmp/err"
ok $? "--check-grad fails above 1e-4: exit 1 ($(cat "$tmp/err"))"

# --- 5. --trace-nonfinite ------------------------------------------------------
cat >"$tmp/logzero.kg" <<'EOF'
kiln 1
graph logzero
  input x: f64[3]
  input s: f64

  a = mul(x, 2.0)
  b = log(a)
  c = sum(b)
  output lp = add(c, s)
end
EOF
"$kiln" run "$tmp/logzero.kg" -i x=[1,0,2] -i s=1 --trace-nonfinite >"$tmp/out" 2>"$tmp/err"
[ $? = 0 ] && grep -q '^lp = -inf$' "$tmp/out" &&
  grep -q "^trace-nonfinite: .*logzero.kg:7: 'b' = log(a) is -inf at \[1\]: f64\[3\]" "$tmp/out" &&
  grep -q "^trace-nonfinite:   operand 1 'a': f64\[3\] = \[2, 0, 4\]" "$tmp/out"
ok $? "log(0): the node, its line and its operand ($(grep trace "$tmp/out" | head -2 | tr '\n' ' '))"
"$kiln" run "$tmp/logzero.kg" -i x=[1,3,2] -i s=nan --trace-nonfinite >"$tmp/out" 2>&1
grep -q "^trace-nonfinite: .*logzero.kg:4: input 's' holds nan" "$tmp/out"
ok $? "a NaN input is named as such"
"$kiln" run "$tmp/logzero.kg" -i x=[1,3,2] -i s=1 --trace-nonfinite >"$tmp/out" 2>&1
grep -q "^trace-nonfinite: every value is finite$" "$tmp/out"; ok $? "all finite: one line"
"$kiln" run "$tmp/logzero.kg" -i x=[1,0,2] -i s=1 --trace-nonfinite --json >"$tmp/out" 2>"$tmp/err"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/out" &&
  grep -q "^trace-nonfinite: .*logzero.kg:7: 'b' = log(a)" "$tmp/err"
ok $? "--json: stdout stays JSON, the report goes to stderr"
cat >"$tmp/sqrtneg.kg" <<'EOF'
kiln 1
graph sqrtneg
  param mu: f64
  param sigma: f64 lower=0

  d = sub(mu, 3.0)
  r = sqrt(d)
  output logp = add(normal_lpdf(r, 0, sigma), 0.0)
end
EOF
"$kiln" model "$tmp/sqrtneg.kg" -i mu=1 -i sigma=1 --trace-nonfinite >"$tmp/out" 2>"$tmp/err"
[ $? = 0 ] && grep -q '^log density: nan ' "$tmp/out" &&
  grep -q "^trace-nonfinite: .*sqrtneg.kg:7: 'r' = sqrt(d) is nan at \[0\]" "$tmp/out" &&
  grep -q "^trace-nonfinite:   operand 1 'd': f64\[\] = -2$" "$tmp/out"
ok $? "kiln model, sqrt(-1 - 1): the node and line ($(grep trace "$tmp/out" | head -1))"

# --- 7. what a new user tries (the trial of issue 24) ----------------------
"$kiln" run --help >"$tmp/out" 2>"$tmp/err"
[ $? = 0 ] && grep -q '^usage: kiln run' "$tmp/out" && [ ! -s "$tmp/err" ]
ok $? "kiln run --help: the usage on stdout, exit 0"
"$kiln" compiel "$tmp/ok.kg" >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -q "^kiln: unknown command 'compiel'; did you mean 'compile'?" "$tmp/err"
ok $? "an unknown command: did you mean ($(head -1 "$tmp/err"))"
"$kiln" explain "$tmp/ok.kg" --data x.json >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -q "^kiln: explain: unknown or incomplete option '--data'" "$tmp/err"
ok $? "kiln explain names the option it does not take ($(head -1 "$tmp/err"))"
printf 'kiln 1\ngraph sh\n  input mu: f64\n  shared y: f64[N]\n  output logp = normal_lpdf(y, mu, 1)\nend\n' >"$tmp/sh.kg"
printf 'y\n1\n2\n' >"$tmp/y.csv"
"$kiln" run "$tmp/sh.kg" -i mu=0 --data "$tmp/y.csv" >"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && grep -q "^kiln: --data: .*(--data takes CmdStan JSON; a CSV column or .npy file is read in the model" "$tmp/err"
ok $? "--data FILE.csv says --data takes JSON and how CSV is read ($(head -c 160 "$tmp/err"))"
printf '{"y": [1, 2]}' >"$tmp/y.json"
"$kiln" run "$tmp/sh.kg" -i mu=0 -i y=3 --data "$tmp/y.json" >"$tmp/out" 2>"$tmp/err"
[ $? != 0 ] && grep -q "^kiln: -i y: 'y' is shared data, not an input: give it with --data" "$tmp/err"
ok $? "-i for shared data says it is data ($(head -1 "$tmp/err"))"

# --- 8. sizes from --data's integers for -i (a number fills; a list must fit)
printf 'kiln 1\ngraph h\n  param theta: f64[J]\n  shared g: i64[N]\n  shared y: f64[N]\n  output logp = normal_lpdf(y, theta[g], 1)\nend\n' >"$tmp/h.kg"
printf '{"J": 3, "N": 4, "g": [0, 1, 2, 2], "y": [1, 2, 3, 4]}' >"$tmp/h.json"
"$kiln" run "$tmp/h.kg" --data "$tmp/h.json" -i theta=2 >"$tmp/out" 2>"$tmp/err"
want=$(awk 'BEGIN { s = 0; split("1 2 3 4", y, " "); for (i = 1; i <= 4; i++) s += -0.5 * log(2 * 3.141592653589793) - 0.5 * (y[i] - 2) ^ 2; printf "%.12g", s }')
got=$(sed -n 's/^logp = //p' "$tmp/out")
close "$got" "$want" 1e-12; ok $? "-i theta=2 fills theta: f64[J] with J = 3 from --data ($got vs $want) $(cat "$tmp/err")"
"$kiln" run "$tmp/h.kg" --data "$tmp/h.json" -i 'theta=[1,2,3,4,5,6,7]' >"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && grep -q "^kiln: input 'theta': got 7 values along dim 0, but dim 0 is 'J', which is 3 from --data's integer of that name" "$tmp/err"
ok $? "-i theta of 7 values where --data's J is 3 is an error ($(head -1 "$tmp/err"))"

echo "1..$n"
[ "$failed" = 0 ]
