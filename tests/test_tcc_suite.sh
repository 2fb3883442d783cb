#!/bin/sh
# test_tcc_suite.sh — the op, model, gradient, VM and sampler tests again
# with every kernel compiled by the tcc backend ($KILN_BACKEND=tcc is the
# default backend when the options name none).  Skipped when this build
# has no tcc backend.
set -u
build=${KILN_BUILDDIR:-.}
if [ ! -f "$build/backends/tcc/.libs/tcc.so" ]; then
  echo "1..0 # SKIP the tcc backend is not built"
  exit 0
fi
n=0
fail=0
for t in test_ops test_ops_new test_models test_grad test_gradcheck test_callback test_vm test_gen; do
  [ -x "$build/tests/$t" ] || continue
  n=$((n + 1))
  out=$(KILN_BACKEND=tcc "$build/tests/$t" 2>&1)
  rc=$?
  bad=$(printf '%s\n' "$out" | grep -c '^not ok')
  fb=$(printf '%s\n' "$out" | grep -c "backend 'tcc'.*using interp")
  good=$(printf '%s\n' "$out" | grep -c '^ok')
  if [ $rc = 0 ] && [ "$bad" = 0 ] && [ "$fb" = 0 ]; then
    echo "ok $n - $t under tcc: $good passed, no fallback"
  else
    echo "not ok $n - $t under tcc: rc $rc, $bad failed, $fb fallbacks"
    printf '%s\n' "$out" | grep -E '^not ok|using interp' | head -10 | sed 's/^/# /'
    fail=1
  fi
done
echo "1..$n"
exit $fail
