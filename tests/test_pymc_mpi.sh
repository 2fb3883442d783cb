#!/bin/sh
# test_pymc_mpi.sh — PyMC models split over MPI ranks (kiln.pymc's
# mpi_axis; docs/pymc.md, "Under MPI"): tests/test_pymc_mpi.py converts a
# regression, radon, a two-row model, a logistic and a Poisson regression
# with PyMC's parameter checks and a model whose check fails on one row
# (-inf) with their observation axis
# (PyMC's own logp/dlogp are the reference), then runs their MPI
# BridgeStan libraries under `mpirun --oversubscribe -np 1, 2, 3` with the
# real BridgeStan client against the serial libraries and PyMC.  Skips
# without MPI (configure --with-mpi, mpirun), ../shared/clients,
# ../shared/python (PyMC), numpy or /usr/bin/python3, and in sanitizer
# builds.
. "${KILN_SRCDIR:-.}/tests/bridgestan_env.sh"
[ -f "$build/tools/.libs/bridgestan-mpi.so" ] ||
  skip_all "kiln built without MPI (configure --with-mpi)"
mpirun=$(command -v mpirun) || skip_all "no mpirun"
shared_py=${KILN_SHARED_PYTHON:-$src/../shared/python}
[ -d "$shared_py/site/pymc" ] || skip_all "no PyMC in $shared_py (../shared/python)"
[ -f "$build/.libs/libkiln.so" ] || skip_all "no $build/.libs/libkiln.so"
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
KILN_MPI_TIMEOUT=${KILN_MPI_TIMEOUT:-120}
KILN_CACHE_DIR="$tmp/cache"
KILN_LIBRARY="$build/.libs/libkiln.so"
KILN_BIN="$kiln"
PYTHONPATH="$src/python:$src/tests:$PYTHONPATH"
PYTHONDONTWRITEBYTECODE=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM KILN_MPI_TIMEOUT \
  KILN_CACHE_DIR KILN_LIBRARY KILN_BIN PYTHONPATH PYTHONDONTWRITEBYTECODE
py="$src/tests/test_pymc_mpi.py"

. "$src/tests/mpi_tap.sh"

timeout 900 "$python" "$py" prepare "$tmp" >"$tmp/prep" 2>&1
st=$?
lines "$tmp/prep" prepare
ok $st "prepare: PyMC models converted with their axis (exit $st)"
[ $st -eq 0 ] || { echo "1..$n"; exit 1; }

for np in 1 2 3; do
  tmo=300 run "-np $np" $np "$python" "$py" run "$tmp"
done

# the command line on the files write_model wrote: `kiln run --mpi` (the
# declared axis) on 1, 2, 3 ranks prints the serial `kiln run`'s outputs
# (random inputs from one seed: the same on every rank)
for m in linreg radon; do
  "$kiln" run "$tmp/$m/model.kg" --random-inputs 7 --json \
    >"$tmp/$m/serial.json" 2>"$tmp/err"
  ok $? "$m: kiln run (serial)"
  for np in 1 2 3; do
    timeout 300 "$mpirun" --oversubscribe --bind-to none -np $np \
      "$kiln" run "$tmp/$m/model.kg" --mpi --random-inputs 7 --json \
      >"$tmp/$m/mpi.json" 2>"$tmp/err"
    st=$?
    [ $st -eq 0 ] || sed 's/^/# /' "$tmp/err"
    "$python" - "$tmp/$m/serial.json" "$tmp/$m/mpi.json" <<'PY'
import json, sys
a, b = (json.load(open(f))["outputs"] for f in sys.argv[1:3])
ok = a.keys() == b.keys()
for k in a:
    x, y = a[k]["value"], b[k]["value"]
    x, y = (v if isinstance(v, list) else [v] for v in (x, y))
    ok = ok and len(x) == len(y) and all(
        abs(p - q) <= 1e-12 * max(1.0, abs(p)) for p, q in zip(x, y))
print("# logp serial %r, MPI %r" % (a["logp"]["value"], b["logp"]["value"]))
sys.exit(0 if ok else 1)
PY
    ok $? "$m: kiln run --mpi -np $np (exit $st) = serial kiln run to 1e-12"
  done
done

echo "1..$n"
exit $failed
