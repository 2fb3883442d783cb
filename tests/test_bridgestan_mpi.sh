#!/bin/sh
# test_bridgestan_mpi.sh — kiln's BridgeStan library under MPI
# (bridgestan-mpi.so, `kiln bridgestan --mpi-axis N`; docs/bridgestan.md,
# "Under MPI"): the real BridgeStan Python client and the C API (dlopen)
# under `mpirun --oversubscribe --bind-to none -np 1, 2, 3`, against the
# serial library; bad input.  Skips without MPI (configure --with-mpi,
# mpirun), without ../shared/clients, numpy or /usr/bin/python3, and in
# sanitizer builds.
# TAP output: every rank's lines, numbered here.
. "${KILN_SRCDIR:-.}/tests/bridgestan_env.sh"
[ -f "$build/tools/.libs/bridgestan-mpi.so" ] ||
  skip_all "kiln built without MPI (configure --with-mpi)"
mpirun=$(command -v mpirun) || skip_all "no mpirun"
# Open MPI refuses root without these (CI runs as root)
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# a hung rank fails the test instead of hanging it
KILN_MPI_TIMEOUT=${KILN_MPI_TIMEOUT:-120}
KILN_CACHE_DIR="$tmp/cache"
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM KILN_MPI_TIMEOUT \
  KILN_CACHE_DIR
py="$src/tests/test_bridgestan_mpi.py"

. "$src/tests/mpi_tap.sh"

"$python" "$py" prepare "$kiln" "$src" "$tmp" >"$tmp/prep" 2>&1
st=$?
lines "$tmp/prep" prepare
ok $st "kiln bridgestan MODEL.kg (serial) and --mpi-axis N"
grep -q "under MPI, split along 'N'" "$tmp/prep"
ok $? "kiln bridgestan --mpi-axis N says the axis"

# the CLI's checks of the axis (no data needed)
for axis in G nope; do
  "$kiln" bridgestan "$tmp/reg.kg" --mpi-axis $axis -o "$tmp/x.so" \
    >"$tmp/cli" 2>&1
  st=$?
  sed 's/^/# /' "$tmp/cli"
  [ $st -eq 1 ] && grep -q "mpi-axis $axis" "$tmp/cli" && [ ! -e "$tmp/x.so" ]
  ok $? "kiln bridgestan --mpi-axis $axis: refused (exit $st), nothing written"
done
"$kiln" bridgestan "$tmp/reg.kg" --mpi -o "$tmp/x.so" >"$tmp/cli" 2>&1
st=$?
sed 's/^/# /' "$tmp/cli"
[ $st -eq 1 ] && grep -q "declares no observation axis" "$tmp/cli"
ok $? "kiln bridgestan --mpi without a declared axis: refused"
# bs_cli MODEL.kg OUT.so ARGS...: kiln bridgestan --mpi on MODEL with
# `partition N` added; st its exit status, its output in $tmp/cli
bs_cli() {
  sed 's/^end$/  partition N\nend/' "$1" >"$1.decl.kg"
  "$kiln" bridgestan "$1.decl.kg" --mpi -o "$2" >"$tmp/cli" 2>&1
  st=$?
  sed 's/^/# /' "$tmp/cli"
}
# a declared axis (`partition N`) is used by --mpi
bs_cli "$tmp/reg.kg" "$tmp/decl.so"
[ $st -eq 0 ] && grep -q "split along 'N'" "$tmp/cli"
ok $? "kiln bridgestan --mpi takes the model's declared axis"

# a transformed parameter / generated quantity that depends on the axis:
# refused when the library is built, naming it (it was refused only at
# param_constrain time); one that does not depend on it is kept
for kind in gq tp; do
  sed "s/^  output logp = /  output $kind ssr = sum(square(z))\n  output logp = /" \
    "$tmp/reg.kg" >"$tmp/dep.kg"
  rm -f "$tmp/x.so"
  "$kiln" bridgestan "$tmp/dep.kg" --mpi-axis N -o "$tmp/x.so" >"$tmp/cli" 2>&1
  st=$?
  sed 's/^/# /' "$tmp/cli"
  what="generated quantity"
  [ $kind = tp ] && what="transformed parameter"
  [ $st -eq 1 ] && [ ! -e "$tmp/x.so" ] && [ "$(grep -c '^kiln: ' "$tmp/cli")" = 1 ] &&
    grep -q "^kiln: bridgestan: --mpi-axis N: .*dep.kg: $what 'ssr' depends on the axis 'N'" "$tmp/cli"
  ok $? "kiln bridgestan --mpi-axis N: a $what that depends on N refused at build time (exit $st)"
  # the serial library takes it
  "$kiln" bridgestan "$tmp/dep.kg" -o "$tmp/x.so" >"$tmp/cli" 2>&1
  ok $? "... the serial library takes it"
done
bs_cli "$tmp/dep.kg" "$tmp/x.so"
[ $st -eq 1 ] && grep -q "^kiln: bridgestan: --mpi: .*'ssr' depends on the axis 'N'" "$tmp/cli"
ok $? "kiln bridgestan --mpi: the refusal names --mpi, not --mpi-axis (exit $st)"

for np in 1 2 3; do
  run "python -np $np" $np "$python" "$py" values "$tmp"
done
for np in 2 3; do
  run "C dlopen -np $np" $np "$build/tests/test_bridgestan_mpi_dlopen" \
    "$tmp/mpi.so" "$tmp/serial.so" "$tmp/data.json"
done
run "2 observations -np 3" 3 "$python" "$py" empty "$tmp"
run "bound data -np 2" 2 "$python" "$py" bound "$tmp"
tmo=120 run "no bs_model_destruct -np 3" 3 "$python" "$py" nodestroy "$tmp"
run "disagreeing data -np 2" 2 "$python" "$py" disagree "$tmp"
run "bad axis -np 2" 2 "$python" "$py" badaxis "$tmp"

echo "1..$n"
exit $failed
