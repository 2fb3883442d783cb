#!/bin/sh
# run.sh — PyTensor's numba backend tests against kiln's KILN mode
# (tests/pytensor_conformance/kiln_conformance.py substitutes the tests'
# compare helper; docs/pytensor-conformance.md).
#
#   run.sh SRCDIR BUILDDIR RESULTS.jsonl [pytest args...]
#
# SRCDIR: kiln's source tree, BUILDDIR: its build tree (.libs/libkiln.so).
# PyTensor comes from $KILN_SHARED_PYTHON (default SRCDIR/../shared/python);
# pytest runs from its PyTensor source root, so `tests` is importable, with
# the plugin loaded by -p.  The pytest args name the test modules relative to
# that root (default: every module of tests/link/numba).  Exit status 77 when
# something needed is missing (the reason on stderr), else pytest's.
src=$1
build=$2
out=$3
shift 3
python=${KILN_PYTHON:-/usr/bin/python3}
shared=${KILN_SHARED_PYTHON:-$src/../shared/python}

missing() {
  echo "$1" >&2
  exit 77
}

[ -x "$python" ] || missing "no $python"
[ -f "$shared/pytensor-2.27.1/tests/link/numba/test_basic.py" ] ||
  missing "no PyTensor source tree in $shared (set KILN_SHARED_PYTHON)"
[ -f "$build/.libs/libkiln.so" ] || missing "no $build/.libs/libkiln.so"
"$python" -c 'import numpy, scipy, pytest, numba' 2>/dev/null ||
  missing "no numpy/scipy/pytest/numba for $python"

src=$(cd "$src" && pwd)
build=$(cd "$build" && pwd)
shared=$(cd "$shared" && pwd)
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
root=$shared/pytensor-2.27.1
KILN_LIBRARY=$build/.libs/libkiln.so
PYTHONPATH=$src/tests/pytensor_conformance:$src/python:$root:$shared/site
KILN_CONFORMANCE_JSON=$out
PYTHONDONTWRITEBYTECODE=1
# PyTensor's compile cache out of $HOME, and no C compiles (pure-Python
# thunks for the reference mode)
PYTENSOR_FLAGS=${PYTENSOR_FLAGS:-base_compiledir=${TMPDIR:-/tmp}/pt-conformance,cxx=}
NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-${TMPDIR:-/tmp}/pt-conformance/numba}
export KILN_LIBRARY PYTHONPATH KILN_CONFORMANCE_JSON \
  PYTHONDONTWRITEBYTECODE PYTENSOR_FLAGS NUMBA_CACHE_DIR
[ $# -gt 0 ] || set -- tests/link/numba
cd "$root" || exit 77
# PyTensor's pytest settings (its pyproject.toml: xfail_strict, its
# conftest.py) without its addopts (--doctest-modules, --durations);
# -p no:xdist: one process
exec "$python" -m pytest -o addopts= -p no:cacheprovider \
  -p no:xdist -p kiln_conformance -q -k "not Benchmark and not benchmark" "$@"
