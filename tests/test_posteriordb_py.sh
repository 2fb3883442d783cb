#!/bin/sh
# test_posteriordb_py.sh — the posteriordb corpus against an independent
# implementation: tests/posteriordb_ref.py computes each model's log density
# (every constant, Jacobian on) and its complex-step gradient in NumPy from
# the Stan programs, at three points, in the form of Stan's references;
# tests/test_posteriordb then holds kiln to them (KILN_POSTERIORDB_REFDIR)
# under every backend.  All posteriors of CORPUS but the larger radon_all
# ones (777 parameters, a minute of complex steps; radon_all-radon_pooled
# stays), whose models are checked on radon_mn.  TAP output; skips without
# /usr/bin/python3 and numpy.
src=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
python=/usr/bin/python3
skip_all() {
  echo "1..0 # SKIP $1"
  exit 0
}
[ -x "$python" ] || skip_all "no $python"
"$python" -c 'import numpy' 2>/dev/null || skip_all "no numpy for $python"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln_pdb.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
names=$(grep -v '^#' "$src/examples/posteriordb/CORPUS" |
        grep -v '^radon_all-' ; echo radon_all-radon_pooled)
"$python" "$src/tests/posteriordb_ref.py" "$src" "$tmp" $names \
  >"$tmp/written" 2>"$tmp/skipped" || {
  echo "1..1"; echo "not ok 1 - posteriordb_ref.py failed"
  sed 's/^/# /' "$tmp/skipped"; exit 0
}
sed 's/^/# NumPy reference: /' "$tmp/skipped"
KILN_POSTERIORDB_REFDIR=$tmp "$build/tests/test_posteriordb" $(cat "$tmp/written")
