#!/bin/sh
# test_mpi.sh — kiln under MPI (issue 30; docs/mpi.md), TAP.
#   - `kiln run MODEL --data D --mpi-axis N` under `mpirun -np 1..4` prints
#     what the serial `kiln run` prints (every line but the timing line;
#     numbers equal to 1e-12 relative), from rank 0 alone;
#   - tests/test_mpi_api (libkiln-mpi's C API) under mpirun -np 1..4;
#   - one compile per job: on an empty cache, the job's compiles equal one
#     process's (kiln run --mpi-report, kiln_mpi_model_compiles);
#   - bad input: an axis that is no data dimension, ranks that disagree on
#     the data or the model, a rank whose data is missing, a rank that
#     hangs or dies (KILN_MPI_TEST_FAULT, a test-only knob): one line and a
#     non-zero exit within KILN_MPI_TIMEOUT, never a hang; rank 0 hanging
#     too; a bad argument on one rank of the C API, MPI_Finalize without
#     kiln_mpi_model_free, KILN_MPI_TIMEOUT garbage, a first compile
#     longer than the timeout (KILN_MPI_BUILD_TIMEOUT), --tier-wait's
#     compiles, the option named in errors and given once.
# Without `configure --with-mpi`: --mpi-axis says kiln was built without
# MPI, the rest is skipped.
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
skip() {  # skip COUNT REASON
  i=0
  while [ $i -lt "$1" ]; do n=$((n + 1)); i=$((i + 1)); echo "ok $n - # SKIP $2"; done
}
finish() { echo "1..$n"; [ $failed = 0 ]; exit $?; }

model="$top/tests/graphs/mpi/linreg.kg"
data="$top/tests/data/mpi_regression.json"
point="-i alpha=0.3 -i beta=[0.5,-0.2,0.1] -i log_sigma=-0.1"

if ! grep -q '^#define KILN_HAVE_MPI 1' "$build/config.h" 2>/dev/null; then
  # shellcheck disable=SC2086
  "$kiln" run "$model" --data "$data" $point --mpi-axis N >"$tmp/out" 2>"$tmp/err"
  st=$?
  [ $st = 2 ] && grep -qx 'kiln: --mpi-axis: kiln was built without MPI (configure --with-mpi)' "$tmp/err"
  ok $? "built without MPI: --mpi-axis says so (exit $st: $(cat "$tmp/err"))"
  skip 1 "kiln was built without MPI (configure --with-mpi)"
  finish
fi

# Open MPI as root (CI) and on this machine's cores: oversubscribed, no
# binding; shared memory between the ranks; ASan: Open MPI's own
# allocations are never freed (not kiln's leaks)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# (a deadlock would spin: every run is cut off after 3 minutes)
mpirun() { timeout 180 mpirun --oversubscribe --bind-to none "$@"; }
api="$build/tests/test_mpi_api"

# every line of $1 equals $2's, numbers to 1e-12 relative, but for the
# timing line ("compile: ... ms")
same_lines() {
  grep -v '^compile: ' "$1" >"$tmp/a.cmp"
  grep -v '^compile: ' "$2" >"$tmp/b.cmp"
  [ "$(wc -l <"$tmp/a.cmp")" = "$(wc -l <"$tmp/b.cmp")" ] || return 1
  [ -s "$tmp/a.cmp" ] || return 1
  paste -d '\n' "$tmp/a.cmp" "$tmp/b.cmp" | awk '
    function num(s) { return s ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/ }
    function abs(x) { return x < 0 ? -x : x }
    NR % 2 == 1 { a = $0; next }
    {
      na = split(a, A, /[][ ,=:{}"]+/); nb = split($0, B, /[][ ,=:{}"]+/)
      if (na != nb) { print "fields differ: " a " | " $0; bad = 1; next }
      for (i = 1; i <= na; i++) {
        if (num(A[i]) && num(B[i])) {
          m = abs(A[i]); if (abs(B[i]) > m) m = abs(B[i]); if (m < 1) m = 1
          if (abs(A[i] - B[i]) > 1e-12 * m) { print "differs: " A[i] " vs " B[i]; bad = 1 }
        } else if (A[i] != B[i]) { print "differs: " A[i] " vs " B[i]; bad = 1 }
      }
    }
    END { exit bad }' >"$tmp/cmp.out"
}

# --- kiln run --mpi-axis vs serial kiln run -------------------------------
# shellcheck disable=SC2086
"$kiln" run "$model" --data "$data" $point >"$tmp/serial" 2>"$tmp/serial.err"
ok $? "serial kiln run ($(head -c 300 "$tmp/serial.err"))"
for np in 1 2 3 4; do
  # shellcheck disable=SC2086
  mpirun -np $np "$kiln" run "$model" --data "$data" $point --mpi-axis N \
    >"$tmp/mpi$np" 2>"$tmp/mpi$np.err"
  st=$?
  [ $st = 0 ] && same_lines "$tmp/mpi$np" "$tmp/serial"
  ok $? "mpirun -np $np kiln run --mpi-axis N: serial's lines and numbers (exit $st; $(head -c 300 "$tmp/mpi$np.err") $(head -c 300 "$tmp/cmp.out"))"
  [ "$(grep -c '^logp = ' "$tmp/mpi$np")" = 1 ] &&
    [ "$(grep -c '^compile: ' "$tmp/mpi$np")" = 1 ]
  ok $? "-np $np: one rank prints ($(grep -c . "$tmp/mpi$np") lines)"
done
# --json: the same values
# shellcheck disable=SC2086
mpirun -np 3 "$kiln" run "$model" --data "$data" $point --mpi-axis N --json \
  >"$tmp/mpi.json" 2>"$tmp/mpi.json.err"
st=$?
# shellcheck disable=SC2086
"$kiln" run "$model" --data "$data" $point --json >"$tmp/serial.json" 2>/dev/null
[ $st = 0 ] && [ "$(wc -l <"$tmp/mpi.json")" = 1 ] &&
  sed 's/"timing".*//' "$tmp/mpi.json" | tr ',' '\n' >"$tmp/j1" &&
  sed 's/"timing".*//' "$tmp/serial.json" | tr ',' '\n' >"$tmp/j2" &&
  same_lines "$tmp/j1" "$tmp/j2"
ok $? "-np 3 --json: one line, serial's values (exit $st; $(head -c 300 "$tmp/mpi.json.err"))"

# outputs that share their bytes (two outputs of one value; a gradient
# asked twice): each summed once (they were summed once per output, so
# k aliased outputs on R ranks came out R^(k-1) times too large; found
# by a new user, issue 30); a bool output that does not depend on the
# axis stays bool (the mask made it i64)
cat >"$tmp/alias.kg" <<'EOF_KG'
kiln 1
graph alias
  shared X: f64[N, K]
  shared y: f64[N]
  input alpha: f64
  input beta: f64[K]
  input log_sigma: f64
  a = mul(sum(y), alpha)
  output a
  output b = mul(a, 1.0)
  output c = mul(a, 1.0)
  lp = add(normal_lpdf(y, add(alpha, dot(X, beta)), exp(log_sigma)), normal_lpdf(beta, 0, 5))
  output lp
  g = grad(lp, beta)
  output g
  output g2 = mul(g, 1.0)
  output pos = gt(alpha, 0)
end
EOF_KG
# shellcheck disable=SC2086
"$kiln" run "$tmp/alias.kg" --data "$data" $point >"$tmp/alias.serial" 2>"$tmp/alias.serial.err"
st0=$?
for np in 2 3; do
  # shellcheck disable=SC2086
  mpirun -np $np "$kiln" run "$tmp/alias.kg" --data "$data" $point --mpi-axis N \
    >"$tmp/alias$np" 2>"$tmp/alias$np.err"
  st=$?
  [ $st0 = 0 ] && [ $st = 0 ] && same_lines "$tmp/alias$np" "$tmp/alias.serial"
  ok $? "-np $np: outputs sharing their bytes summed once each (exit $st0/$st; $(head -c 300 "$tmp/alias.serial.err") $(head -c 300 "$tmp/alias$np.err") $(head -c 300 "$tmp/cmp.out"))"
done

# --mpi: the axis the model declares (`partition N`)
sed 's/^  input alpha: f64$/  partition N\n  input alpha: f64/' "$model" >"$tmp/declared.kg"
if "$kiln" check "$tmp/declared.kg" >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  mpirun -np 2 "$kiln" run "$tmp/declared.kg" --data "$data" $point --mpi \
    >"$tmp/decl" 2>"$tmp/decl.err"
  st=$?
  [ $st = 0 ] && same_lines "$tmp/decl" "$tmp/serial"
  ok $? "--mpi takes the declared axis (exit $st; $(head -c 300 "$tmp/decl.err"))"
else
  skip 1 "the parser does not take 'partition N' yet"
fi

# --- the C API ------------------------------------------------------------
for np in 1 2 3 4; do
  mpirun -np $np "$api" >"$tmp/api$np" 2>"$tmp/api$np.err"
  st=$?
  [ $st = 0 ] && grep -q '^ok ' "$tmp/api$np" && ! grep -q '^not ok' "$tmp/api$np"
  ok $? "mpirun -np $np test_mpi_api (exit $st)"
  [ $st = 0 ] || { sed 's/^/# /' "$tmp/api$np"; head -20 "$tmp/api$np.err" | sed 's/^/# /'; }
done

# docs/mpi.md's C API program: the doc's ```c block is
# tests/mpi_example.c, which runs on 1..3 ranks; lp and gradient at
# unc = 0.1 against numpy/scipy (an independent computation)
awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on' "$top/docs/mpi.md" >"$tmp/doc.c"
cmp -s "$tmp/doc.c" "$top/tests/mpi_example.c"
ok $? "docs/mpi.md's C API program is tests/mpi_example.c ($(diff "$tmp/doc.c" "$top/tests/mpi_example.c" | head -c 300))"
cat >"$tmp/chk.py" <<'EOF_PY'
import json, sys
import numpy as np
from scipy.stats import norm
d = json.load(open(sys.argv[1]))
X = np.array(d["X"]); y = np.array(d["y"])
alpha, beta, ls = 0.1, np.full(X.shape[1], 0.1), 0.1   # unc = 0.1 each
s = np.exp(ls)                                          # sigma lower=0
mu = alpha + X @ beta
lp = (norm.logpdf(alpha, 0, 2) + norm.logpdf(beta, 0, 2).sum() +
      norm.logpdf(s, 0, 1) + norm.logpdf(y, mu, s).sum() + ls)
r = (y - mu) / s**2
g = np.array([-alpha / 4 + r.sum()] + list(-beta / 4 + X.T @ r) +
             [s * (-s - len(y) / s + ((y - mu)**2).sum() / s**3) + 1])
out = open(sys.argv[2]).read().split("\n")
lp2 = float(out[0].split("=")[1])
g2 = np.array([float(v) for v in out[1].split("=")[1].split()])
good = abs(lp - lp2) <= 1e-12 * max(1, abs(lp)) and g2.shape == g.shape and \
    np.all(np.abs(g - g2) <= 1e-12 * max(1, np.max(np.abs(g))))
print("lp %.17g vs numpy %.17g" % (lp2, lp))
sys.exit(0 if good else 1)
EOF_PY
for np in 1 2 3; do
  mpirun -np $np "$build/tests/mpi_example" "$top/tests/graphs/mpi/linreg_model.kg" \
    "$data" N >"$tmp/ex$np" 2>"$tmp/ex$np.err"
  st=$?
  if /usr/bin/python3 -c 'import numpy, scipy' 2>/dev/null; then
    [ $st = 0 ] && /usr/bin/python3 "$tmp/chk.py" "$data" "$tmp/ex$np" >"$tmp/chk.out" 2>&1
    ok $? "mpi_example on $np rank(s): lp and gradient equal numpy's to 1e-12 (exit $st; $(head -c 200 "$tmp/chk.out") $(head -c 200 "$tmp/ex$np.err"))"
  else
    skip 1 "/usr/bin/python3 lacks numpy or scipy"
  fi
done

# --- one compile per job --------------------------------------------------
# the compiling backends too (the interpreter's kernels are not cached)
pp="$build/backends/interp/.libs"
for b in tcc llvm; do
  [ -d "$build/backends/$b/.libs" ] && pp="$pp:$build/backends/$b/.libs"
done
# a backend whose code the cache holds (tiers start small kernels on the
# interpreter, whose code is not cached: nothing to count)
be=interp
[ -d "$build/backends/llvm/.libs" ] && be=llvm
[ -d "$build/backends/tcc/.libs" ] && be=tcc
compiles() {  # compiles NP DIR: kiln run's job total on a fresh cache DIR
  rm -rf "$2"; mkdir -p "$2"
  # shellcheck disable=SC2086
  KILN_CACHE_DIR="$2" KILN_PLUGIN_PATH="$pp" mpirun -np "$1" "$kiln" run \
    "$model" --data "$data" $point --mpi-axis N --mpi-report --quiet \
    --backend $be \
    2>&1 >/dev/null | sed -n 's/^kiln: mpi: .*compiles: \([0-9]*\) in the job.*/\1/p'
}
c1=$(compiles 1 "$tmp/cache1")
c4=$(compiles 4 "$tmp/cache4")
[ -n "$c1" ] && [ "$c1" = "$c4" ]
ok $? "kiln run: 4 ranks on an empty cache compile what 1 does ($c4 vs $c1)"
[ -n "$c1" ] && [ "$c1" -gt 0 ]
st=$?
if [ $be != interp ]; then
  ok $st "and that is more than nothing ($c1 compiles)"
else
  skip 1 "no compiling backend built"
fi
apic() {  # the C API's job total on a fresh cache
  rm -rf "$2"; mkdir -p "$2"
  KILN_CACHE_DIR="$2" KILN_PLUGIN_PATH="$pp" KILN_MPI_TEST_BACKEND=$be \
    mpirun -np "$1" "$api" 2>/dev/null |
    sed -n 's/^# compiles: job \([0-9]*\),.*/\1/p'
}
a1=$(apic 1 "$tmp/cache5")
a3=$(apic 3 "$tmp/cache6")
[ -n "$a1" ] && [ "$a1" = "$a3" ] && { [ $be = interp ] || [ "$a1" -gt 0 ]; }
ok $? "kiln_mpi_model_new ($be): 3 ranks on an empty cache compile what 1 does ($a3 vs $a1)"
# blocks of rows (docs/mpi.md "Blocks"): 7 blocks a rank compile nothing
# more, and every check of test_mpi_api holds with them
a7=$(KILN_BLOCKS=7 apic 3 "$tmp/cache7")
[ -n "$a1" ] && [ "$a1" = "$a7" ]
ok $? "kiln_mpi_model_new ($be): 3 ranks of 7 blocks on an empty cache compile what 1 rank does ($a7 vs $a1)"
KILN_BLOCKS=4 mpirun -np 2 "$api" >"$tmp/apib" 2>"$tmp/apib.err"
st=$?
[ $st = 0 ] && grep -q '^ok ' "$tmp/apib" && ! grep -q '^not ok' "$tmp/apib"
ok $? "KILN_BLOCKS=4 mpirun -np 2 test_mpi_api (exit $st)"
[ $st = 0 ] || { grep '^not ok' "$tmp/apib" | sed 's/^/# /'; head -20 "$tmp/apib.err" | sed 's/^/# /'; }

# --- more ranks than rows: sum(y) * log(p) at p = 0 -------------------------
# an empty part computed 0 * -inf = NaN (an attack's find); it adds 0 now,
# so the job prints serial's -inf (and serial's finite value elsewhere)
printf 'kiln 1\ngraph sumlog\n  shared y: f64[N]\n  input p: f64\n  output logp = add(normal_lpdf(p, 1, 2), mul(sum(y), log(p)))\nend\n' >"$tmp/sumlog.kg"
printf '{"y": [1.5, 2]}\n' >"$tmp/sumlog.json"
for pv in 0 0.3; do
  "$kiln" run "$tmp/sumlog.kg" --data "$tmp/sumlog.json" -i p=$pv >"$tmp/serial" 2>/dev/null
  for np in 3 4; do
    mpirun -np $np "$kiln" run "$tmp/sumlog.kg" --data "$tmp/sumlog.json" -i p=$pv --mpi-axis N \
      >"$tmp/out" 2>"$tmp/err"
    st=$?
    [ $st = 0 ] && same_lines "$tmp/out" "$tmp/serial" &&
      { [ $pv != 0 ] || grep -q -- '-inf' "$tmp/serial"; }
    ok $? "sum(y) * log(p) at p = $pv, 2 rows over $np ranks: serial's $(grep '^logp' "$tmp/serial" | head -c 80) (got $(grep '^logp' "$tmp/out" | head -c 80), exit $st)"
  done
done

# --- bad input: one line on stderr, a non-zero exit -------------------------
one_line() {  # one_line ERRFILE PATTERN: exactly one kiln: line, matching
  [ "$(grep -c '^kiln: ' "$1")" = 1 ] && grep -q "^kiln: .*$2" "$1"
}
for ax in K Q; do
  # shellcheck disable=SC2086
  mpirun -np 2 "$kiln" run "$model" --data "$data" $point --mpi-axis $ax \
    >"$tmp/out" 2>"$tmp/err"
  st=$?
  [ $st != 0 ] && one_line "$tmp/err" "$ax" && ! grep -q '^logp' "$tmp/out"
  ok $? "--mpi-axis $ax (not a data dimension): one line, exit $st: $(grep '^kiln' "$tmp/err" | head -c 300)"
done
# rank-dependent files: the data, the model; a missing data file on rank 1
cp "$data" "$tmp/d0.json"
sed 's/0\.5/0.50001/' "$data" >"$tmp/d1.json"
cp "$model" "$tmp/m0.kg"
sed 's/normal_lpdf(log_sigma, 0, 1)/normal_lpdf(log_sigma, 0, 2)/' "$model" >"$tmp/m1.kg"
cmp -s "$tmp/d0.json" "$tmp/d1.json" && echo "# d1.json is d0.json"
export tmp model data point kiln
# shellcheck disable=SC2016
mpirun -np 2 sh -c '"$kiln" run "$model" --data "$tmp/d$OMPI_COMM_WORLD_RANK.json" $point --mpi-axis N' \
  >"$tmp/out" 2>"$tmp/err"
st=$?
[ $st != 0 ] && one_line "$tmp/err" "ranks disagree on the data: rank 1 differs from rank 0"
ok $? "data that differ on rank 1: one line, exit $st: $(grep '^kiln' "$tmp/err" | head -c 300)"
# inputs that differ on rank 1 (an -i of its own): refused, not summed
# into a wrong number (found by an attack)
# shellcheck disable=SC2016
mpirun -np 2 sh -c '"$kiln" run "$model" --data "$data" -i alpha=0.$((3 + OMPI_COMM_WORLD_RANK)) -i beta=[0.5,-0.2,0.1] -i log_sigma=-0.1 --mpi-axis N' \
  >"$tmp/out" 2>"$tmp/err"
st=$?
[ $st != 0 ] && one_line "$tmp/err" "ranks disagree on the inputs: rank 1 differs from rank 0"
ok $? "inputs that differ on rank 1: one line, exit $st: $(grep '^kiln' "$tmp/err" | head -c 300)"
# shellcheck disable=SC2016
mpirun -np 2 sh -c '"$kiln" run "$tmp/m$OMPI_COMM_WORLD_RANK.kg" --data "$data" $point --mpi-axis N' \
  >"$tmp/out" 2>"$tmp/err"
st=$?
[ $st != 0 ] && one_line "$tmp/err" "ranks disagree on the model: rank 1 differs from rank 0"
ok $? "a model that differs on rank 1: one line, exit $st: $(grep '^kiln' "$tmp/err" | head -c 300)"
# data bound inside the .kg (csv(), npy()) that differs per rank (node-
# local copies): refused on every rank, no number (it was summed into a
# wrong number: an attack's find); copies that differ only in whitespace
# (csv) or in whitespace and key order (--data JSON) give serial's lines
for r in 0 1; do
  mkdir -p "$tmp/r$r"
  printf 'kiln 1\ngraph files\n  shared y: f64[N] = csv("y.csv", "y")\n  shared w: f64[N] = npy("w.npy")\n  input mu: f64\n  output logp = add(normal_lpdf(y, mu, 1), normal_lpdf(w, mu, 2))\nend\n' >"$tmp/r$r/m.kg"
done
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
import numpy as np
t = sys.argv[1]
y = [0.5, -1.25, 2.0, 0.75, 1.5]
w = np.array([0.1, 0.2, -0.3, 0.4, 1.0])
def csv(path, ys, fmt):
    with open(path, "w") as f:
        f.write(fmt[0] + "y\n" + "".join(fmt[1] % v for v in ys))
csv(t + "/r0/y.csv", y, ("", "%r\n"))
np.save(t + "/r0/w.npy", w)
# what differs: one csv value, one npy value, csv whitespace only
csv(t + "/ycsv.csv", [0.5, -1.25, 2.0, 0.76, 1.5], ("", "%r\n"))
w2 = w.copy(); w2[2] = -0.30000000000000004
np.save(t + "/wnpy.npy", w2)
csv(t + "/yws.csv", y, ("", "  %r \r\n"))
d = json.load(open(sys.argv[1] + "/d0.json"))
json.dump(dict(reversed(list(d.items()))), open(t + "/dws.json", "w"),
          indent=3)
PY
cp "$tmp/r0/w.npy" "$tmp/r1/w.npy"
for case in csv npy ws; do
  cp "$tmp/r0/y.csv" "$tmp/r1/y.csv"
  cp "$tmp/r0/w.npy" "$tmp/r1/w.npy"
  case $case in
    csv) cp "$tmp/ycsv.csv" "$tmp/r1/y.csv" ;;
    npy) cp "$tmp/wnpy.npy" "$tmp/r1/w.npy" ;;
    ws) cp "$tmp/yws.csv" "$tmp/r1/y.csv" ;;
  esac
  cmp -s "$tmp/r0/y.csv" "$tmp/r1/y.csv" && cmp -s "$tmp/r0/w.npy" "$tmp/r1/w.npy" &&
    echo "# $case: rank 1's files are rank 0's"
  # shellcheck disable=SC2016
  mpirun -np 2 sh -c '"$kiln" run "$tmp/r$OMPI_COMM_WORLD_RANK/m.kg" -i mu=0.3 --mpi-axis N' \
    >"$tmp/out" 2>"$tmp/err"
  st=$?
  if [ $case = ws ]; then
    "$kiln" run "$tmp/r0/m.kg" -i mu=0.3 >"$tmp/serial" 2>/dev/null
    [ $st = 0 ] && same_lines "$tmp/out" "$tmp/serial"
    ok $? "csv() that differs on rank 1 in whitespace only: serial's lines (exit $st: $(head -c 300 "$tmp/err") $(head -c 200 "$tmp/cmp.out"))"
  else
    [ $st = 1 ] && one_line "$tmp/err" "ranks disagree on the data: rank 1 differs from rank 0" &&
      ! grep -q '^logp' "$tmp/out"
    ok $? "$case() in the .kg that differs on rank 1 in one value: one line, no number, exit $st: $(grep '^kiln' "$tmp/err" | head -c 300)"
  fi
done
# shellcheck disable=SC2016
mpirun -np 2 sh -c 'if [ $OMPI_COMM_WORLD_RANK = 0 ]; then d=d0; else d=dws; fi; "$kiln" run "$model" --data "$tmp/$d.json" $point --mpi-axis N' \
  >"$tmp/out" 2>"$tmp/err"
st=$?
# shellcheck disable=SC2086
"$kiln" run "$model" --data "$data" $point >"$tmp/serial" 2>/dev/null
[ $st = 0 ] && same_lines "$tmp/out" "$tmp/serial"
ok $? "--data JSON that differs on rank 1 in whitespace and key order only: serial's lines (exit $st: $(head -c 300 "$tmp/err") $(head -c 200 "$tmp/cmp.out"))"
rm -f "$tmp/d1.json"
# shellcheck disable=SC2016
mpirun -np 3 sh -c '"$kiln" run "$model" --data "$tmp/d$OMPI_COMM_WORLD_RANK.json" $point --mpi-axis N' \
  >"$tmp/out" 2>"$tmp/err"
st=$?
[ $st != 0 ] && one_line "$tmp/err" "mpi: rank 1 failed: --data: "
ok $? "rank 1's data file missing: rank 0 says so in one line, exit $st: $(grep '^kiln' "$tmp/err" | head -c 300)"

# a rank that hangs / dies: the job ends within the timeout
timed() {  # timed ENV=VALUE... COMMAND...: st (exit status), t (seconds);
  # stdout to $tmp/out, stderr to $tmp/err
  t0=$(date +%s)
  env "$@" >"$tmp/out" 2>"$tmp/err"
  st=$?
  t=$(( $(date +%s) - t0 ))
}
# shellcheck disable=SC2086
timed KILN_MPI_TEST_FAULT=hang:1 KILN_MPI_TIMEOUT=5 timeout 120 mpirun \
  --oversubscribe --bind-to none -np 3 "$kiln" run "$model" --data "$data" $point --mpi-axis N
[ $st != 0 ] && [ $st != 124 ] && [ $t -lt 60 ] &&
  one_line "$tmp/err" "mpi: no answer from every rank within 5 s: a rank died or is stuck"
ok $? "rank 1 hangs: the job fails in ${t}s with one kiln line (exit $st): $(grep '^kiln' "$tmp/err" | head -c 300)"
# shellcheck disable=SC2086
timed KILN_MPI_TEST_FAULT=die:2 KILN_MPI_TIMEOUT=5 timeout 120 mpirun \
  --oversubscribe --bind-to none -np 3 "$kiln" run "$model" --data "$data" $point --mpi-axis N
[ $st != 0 ] && [ $st != 124 ] && [ $t -lt 60 ] && [ "$(grep -c '^kiln: ' "$tmp/err")" -le 1 ]
ok $? "rank 2 dies: the job fails in ${t}s (exit $st), at most one kiln line"
timed KILN_MPI_TIMEOUT=3 timeout 120 mpirun --oversubscribe --bind-to none -np 2 "$api" hang
[ $st != 0 ] && [ $st != 124 ] && [ $t -lt 60 ] &&
  grep -q '^failed: mpi: no answer from every rank within 3 s' "$tmp/out"
ok $? "C API, rank 1 never answers: kiln_mpi_log_density fails in ${t}s: $(head -c 300 "$tmp/out")"

# rank 0 hangs: the others time out; their message went to their hidden
# stderr and the job ended with Open MPI's MPI_ABORT notice alone; now
# the lowest live rank prints one kiln line on the real stderr
# shellcheck disable=SC2086
timed KILN_MPI_TEST_FAULT=hang:0 KILN_MPI_TIMEOUT=3 timeout 120 mpirun \
  --oversubscribe --bind-to none -np 3 "$kiln" run "$model" --data "$data" $point --mpi-axis N
[ $st != 0 ] && [ $st != 124 ] && [ $t -lt 60 ] &&
  one_line "$tmp/err" "mpi: no answer from every rank within 3 s: a rank died or is stuck (rank 1"
ok $? "rank 0 hangs: the job fails in ${t}s with one kiln line (exit $st): $(grep '^kiln' "$tmp/err" | head -c 300)"

# a bad argument on one rank of kiln_mpi_model_new: the others waited in
# MPI_Comm_dup forever (test_mpi_api checks struct_size, the timeout and
# out NULL in-process); MPI_COMM_NULL on rank 1: the others time out
timed timeout 120 mpirun --oversubscribe --bind-to none -np 3 "$api" nullcomm
[ $st != 124 ] && [ $t -lt 60 ] &&
  grep -q '^rank 0: [0-9]* mpi: no answer from every rank within 2 s' "$tmp/out" &&
  grep -q '^rank 1: mpi: the communicator is MPI_COMM_NULL' "$tmp/out"
ok $? "C API, MPI_COMM_NULL on rank 1: it says so, the others time out in ${t}s: $(head -c 300 "$tmp/out")"

# MPI_Finalize on rank 0 without kiln_mpi_model_free: the serving ranks
# waited forever (MPI_COMM_SELF's delete callback stops them now); every
# rank without it (collective use) also ends
for mode in finalize finalize2; do
  timed timeout 60 mpirun --oversubscribe --bind-to none -np 3 "$api" $mode
  [ $st = 0 ] && grep -q '^finalized: ok' "$tmp/out"
  ok $? "C API $mode: MPI_Finalize without kiln_mpi_model_free ends the job in ${t}s (exit $st): $(head -c 300 "$tmp/out") $(head -c 300 "$tmp/err")"
done

# $KILN_MPI_TIMEOUT garbage: refused with one line naming it and its value
# (it fell back to 300 s, or 1e-9 s aborted a healthy job)
for v in abc -5 inf 1e-9 "" 0.5; do
  # shellcheck disable=SC2086
  timed KILN_MPI_TIMEOUT="$v" timeout 60 mpirun --oversubscribe --bind-to none \
    -np 2 "$kiln" run "$model" --data "$data" $point --mpi-axis N
  [ $st = 1 ] && one_line "$tmp/err" "mpi: KILN_MPI_TIMEOUT='$v' is not a number of seconds from 1 to 31536000" &&
    ! grep -q '^logp' "$tmp/out"
  ok $? "KILN_MPI_TIMEOUT='$v': one line, exit $st: $(grep '^kiln' "$tmp/err" | head -c 300)"
done
# shellcheck disable=SC2016
timed timeout 60 mpirun --oversubscribe --bind-to none -np 2 sh -c \
  'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export KILN_MPI_BUILD_TIMEOUT=x; fi; exec "$kiln" run "$model" --data "$data" $point --mpi-axis N'
[ $st = 1 ] && one_line "$tmp/err" "mpi: rank 1 failed: mpi: KILN_MPI_BUILD_TIMEOUT='x' is not"
ok $? "KILN_MPI_BUILD_TIMEOUT garbage on rank 1: rank 0 says so, exit $st: $(grep '^kiln' "$tmp/err" | head -c 300)"

# rank 0's first compile longer than the timeout: the others wait for a
# build under KILN_MPI_BUILD_TIMEOUT (default 3600 s), not the timeout
# (KILN_MPI_TEST_FAULT=slow-build:0:5: rank 0 sleeps 5 s before compiling)
# shellcheck disable=SC2086
timed KILN_MPI_TEST_FAULT=slow-build:0:5 KILN_MPI_TIMEOUT=2 timeout 120 mpirun \
  --oversubscribe --bind-to none -np 3 "$kiln" run "$model" --data "$data" $point --mpi-axis N
cp "$tmp/out" "$tmp/slow"
[ $st = 0 ] && same_lines "$tmp/slow" "$tmp/serial"
ok $? "rank 0 builds for 5 s, KILN_MPI_TIMEOUT=2: the job succeeds (exit $st, ${t}s): $(grep '^kiln' "$tmp/err" | head -c 300)"
# shellcheck disable=SC2086
timed KILN_MPI_TEST_FAULT=slow-build:0:8 KILN_MPI_TIMEOUT=2 KILN_MPI_BUILD_TIMEOUT=2 \
  timeout 120 mpirun --oversubscribe --bind-to none -np 2 "$kiln" run "$model" --data "$data" $point --mpi-axis N
[ $st != 0 ] && [ $st != 124 ] && [ $t -lt 60 ] &&
  one_line "$tmp/err" "mpi: no answer from every rank within 2 s: a rank died or is stuck (waiting for a build: KILN_MPI_BUILD_TIMEOUT)"
ok $? "... and with KILN_MPI_BUILD_TIMEOUT=2 it times out (exit $st, ${t}s): $(grep '^kiln' "$tmp/err" | head -c 300)"

# --tier-wait under the default policy: rank 0 tiers up before the others
# build, so the job compiles once (it compiled on every rank after the
# ranks met, and --mpi-report said 0)
tw() {  # tw NP DIR: kiln run --tier-wait's job total on a fresh cache DIR
  rm -rf "$2"; mkdir -p "$2"
  # shellcheck disable=SC2086
  KILN_CACHE_DIR="$2" KILN_PLUGIN_PATH="$pp" mpirun -np "$1" "$kiln" run \
    "$model" --data "$data" $point --mpi-axis N --mpi-report --quiet \
    --tier-wait 100 2>&1 >/dev/null |
    sed -n 's/^kiln: mpi: .*compiles: \([0-9]*\) in the job.*/\1/p'
}
t1=$(tw 1 "$tmp/cache7")
t4=$(tw 4 "$tmp/cache8")
if [ $be != interp ]; then
  [ -n "$t1" ] && [ "$t1" -gt 0 ] && [ "$t1" = "$t4" ]
  ok $? "--tier-wait (default policy): 4 ranks compile what 1 does, and more than nothing ($t4 vs $t1)"
else
  skip 1 "no compiling backend built"
fi

# the command line: the option given is the one named; each once
# shellcheck disable=SC2086
"$kiln" run "$model" --data "$data" $point --mpi >"$tmp/out" 2>"$tmp/err"
st=$?
[ $st = 1 ] && one_line "$tmp/err" "--mpi: partition: no axis named" && ! grep -q -- '--mpi-axis' "$tmp/err"
ok $? "--mpi on a model without 'partition': the error names --mpi (exit $st): $(head -c 300 "$tmp/err")"
# shellcheck disable=SC2086
"$kiln" run "$model" --data "$data" $point --mpi --check-grad >"$tmp/out" 2>"$tmp/err"
st=$?
[ $st = 2 ] && one_line "$tmp/err" "--check-grad is not available with --mpi "
ok $? "--mpi --check-grad names --mpi (exit $st): $(head -c 300 "$tmp/err")"
for twice in "--mpi-axis N --mpi-axis K" "--mpi --mpi" "--mpi --mpi-axis N"; do
  # shellcheck disable=SC2086
  "$kiln" run "$model" --data "$data" $point $twice >"$tmp/out" 2>"$tmp/err"
  st=$?
  [ $st = 2 ] && one_line "$tmp/err" "given" && ! grep -q '^logp' "$tmp/out"
  ok $? "$twice: refused (exit $st): $(head -c 300 "$tmp/err")"
done

# the 0-based index hint of an error (index == size: 1-based data) is
# kept when the failing rank is not 0
cat >"$tmp/idx.kg" <<'EOF_KG'
kiln 1
graph idx
  shared g: i64[N]
  shared y: f64[N]
  input a: f64[J]
  output s = sum(mul(take(a, g), y))
end
EOF_KG
echo '{"N": 6, "J": 3, "g": [0, 1, 2, 0, 1, 3], "y": [1, 2, 3, 4, 5, 6]}' >"$tmp/idx.json"
mpirun -np 2 "$kiln" run "$tmp/idx.kg" --data "$tmp/idx.json" -i 'a=[1,2,3]' --mpi-axis N \
  >"$tmp/out" 2>"$tmp/err"
st=$?
[ $st = 1 ] && one_line "$tmp/err" "mpi: rank 1 failed: .*index 3 is out of bounds for axis 0 with size 3 (kiln's indices are 0-based"
ok $? "an index error on rank 1 keeps the 0-based hint (exit $st): $(grep '^kiln' "$tmp/err" | head -c 400)"
finish
