#!/bin/sh
# test_tiers_valgrind.sh — tests/test_tiers under valgrind's memcheck:
# freeing a function while its background tier-1 compiles run, forced
# tier-ups and four threads calling while kernels swap leak nothing and
# touch no freed or uninitialised memory (issue 15: "kiln_function_free
# while background compiles run returns promptly and leaks nothing").
# Skips without valgrind, and in sanitizer builds (ASan and valgrind do
# not mix).  TAP: one result for valgrind, then test_tiers' own count.
echo "1..1"
if ! command -v valgrind >/dev/null 2>&1; then
  echo "ok 1 - # SKIP valgrind is not installed"; exit 0
fi
if [ -n "${SAN_CFLAGS:-}" ]; then
  echo "ok 1 - # SKIP a sanitizer build ($SAN_CFLAGS)"; exit 0
fi
b=${KILN_BUILDDIR:-.}
out=$(mktemp)
KILN_TEST_UNDER_VALGRIND=1 "$b/libtool" --mode=execute valgrind -q --leak-check=full \
  --errors-for-leak-kinds=definite,possible --error-exitcode=9 \
  --suppressions="${KILN_SRCDIR:-.}/tests/valgrind.supp" \
  "$b/tests/test_tiers" >"$out" 2>&1
rc=$?
notok=$(grep -c '^not ok' "$out")
if [ "$rc" = 0 ] && [ "$notok" = 0 ]; then
  echo "ok 1 - test_tiers is clean under valgrind ($(grep -c '^ok' "$out") checks passed)"
else
  echo "not ok 1 - test_tiers under valgrind: exit $rc, $notok failed checks"
  sed 's/^/# /' "$out" | tail -n 60
fi
rm -f "$out"
