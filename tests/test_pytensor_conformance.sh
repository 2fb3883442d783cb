#!/bin/sh
# test_pytensor_conformance.sh — the fast part of PyTensor's own backend
# tests run against kiln's KILN mode (tests/pytensor_conformance/; the
# whole run is `make check-pytensor`, docs/pytensor-conformance.md).  One
# TAP line a test: a test kiln passes is ok; one that ran partly in
# PyTensor's VM because kiln lacks an op, or that tests numba internals, is
# ok # SKIP naming why; a different result or an error is not ok (unless
# tests/pytensor_conformance/known-failures.txt lists it: not ok # TODO).
# SKIPs without the shared PyTensor copy ($KILN_SHARED_PYTHON, default
# $KILN_SRCDIR/../shared/python), numpy/scipy/pytest/numba for
# /usr/bin/python3 ($KILN_PYTHON), and in sanitizer builds.
src=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
python=${KILN_PYTHON:-/usr/bin/python3}

skip_all() {
  echo "1..0 # SKIP $1"
  exit 0
}

[ -z "$SAN_CFLAGS" ] ||
  skip_all "sanitizer build (SAN_CFLAGS='$SAN_CFLAGS'): its libkiln cannot be loaded into python"
shared=${KILN_SHARED_PYTHON:-$src/../shared/python}
[ -f "$shared/pytensor-2.27.1/tests/link/numba/test_basic.py" ] ||
  skip_all "no PyTensor source tree in $shared (set KILN_SHARED_PYTHON)"
[ -x "$python" ] || skip_all "no $python"
"$python" -c 'import numpy, scipy, pytest, numba' 2>/dev/null ||
  skip_all "no numpy/scipy/pytest/numba for $python"
[ -f "$build/.libs/libkiln.so" ] || skip_all "no $build/.libs/libkiln.so"

KILN_TAP_FD=3
KILN_CONFORMANCE_KNOWN=$(cd "$src" && pwd)/tests/pytensor_conformance/known-failures.txt
PYTENSOR_FLAGS=base_compiledir=$(pwd)/tests/pytensor-conformance-cache,cxx=
NUMBA_CACHE_DIR=$(pwd)/tests/pytensor-conformance-cache/numba
export KILN_TAP_FD KILN_CONFORMANCE_KNOWN PYTENSOR_FLAGS NUMBA_CACHE_DIR
exec 3>&1
# pytest's report goes to stderr (the log); the TAP lines are the verdict
sh "$src/tests/pytensor_conformance/run.sh" "$src" "$build" \
  "$(pwd)/tests/pytensor-conformance.jsonl" \
  tests/link/numba/test_scalar.py tests/link/numba/test_tensor_basic.py >&2
rc=$?
[ $rc -ne 77 ] || skip_all "tests/pytensor_conformance/run.sh could not run (its log says why)"
exit 0
