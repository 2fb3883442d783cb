#!/bin/sh
# test_python.sh — the Python package's tests (tests/python/*.py, pytest)
# as TAP: tests/python/conftest.py writes one TAP line per test to fd 3,
# pytest's own report goes to stderr (the log).  Runs the package from the
# source tree (PYTHONPATH=$srcdir/python) over this build's libkiln
# (KILN_LIBRARY).  SKIPs without /usr/bin/python3 (or $KILN_PYTHON), numpy
# or pytest, and in sanitizer builds (python cannot load their libraries
# without LD_PRELOAD of the runtime).
src=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
python=${KILN_PYTHON:-/usr/bin/python3}

skip_all() {
  echo "1..0 # SKIP $1"
  exit 0
}

[ -z "$SAN_CFLAGS" ] ||
  skip_all "sanitizer build (SAN_CFLAGS='$SAN_CFLAGS'): its libkiln cannot be loaded into python"
[ -x "$python" ] || skip_all "no $python"
"$python" -c 'import numpy' 2>/dev/null || skip_all "no numpy for $python (python3-numpy)"
"$python" -c 'import pytest' 2>/dev/null || skip_all "no pytest for $python (python3-pytest)"
[ -f "$build/.libs/libkiln.so" ] || skip_all "no $build/.libs/libkiln.so"

KILN_LIBRARY="$build/.libs/libkiln.so"
PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
KILN_TAP_FD=3
PYTHONDONTWRITEBYTECODE=1
export KILN_LIBRARY PYTHONPATH KILN_TAP_FD PYTHONDONTWRITEBYTECODE
# pytest's exit status is not the verdict (the TAP lines are); its report
# goes to stderr, which the TAP driver logs
exec 3>&1
"$python" -m pytest -p no:cacheprovider -q -rs \
  -W error::pytest.PytestUnraisableExceptionWarning "$src/tests/python" "$@" >&2
exit 0
