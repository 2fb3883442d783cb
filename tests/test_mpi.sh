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
#     non-zero exit within KILN_MPI_TIMEOUT, never a hang.
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
finish
