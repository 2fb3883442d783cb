#!/bin/sh
# test_exit_tierup.sh — exit at random moments of tier-up (issue 24, 2):
# tests/exit_tierup compiles eight schools or radon with the default
# tiered policy, calls it on eight threads (or on the main thread alone)
# and exits after a delay drawn from the run's seed, by returning from
# main, by exit() on another thread, or by fork() with the child
# exiting at once (it must not hang).  Every run
# must exit with status 0: an abort ("pure virtual method called"), any
# other signal or a non-zero status counts as a failure.
# KILN_EXIT_RUNS runs (default 40; `make check-exit` runs 300).
# TAP: one result.  Skips without the llvm backend.
b=${KILN_BUILDDIR:-.}
s=${KILN_SRCDIR:-.}
runs=${KILN_EXIT_RUNS:-40}
echo "1..2"
if [ ! -f "$b/backends/llvm/.libs/llvm_codegen.so" ]; then
  echo "ok 1 - # SKIP the llvm backend is not built"
  echo "ok 2 - # SKIP the llvm backend is not built"; exit 0
fi
# a process that exits mid-work leaves its function unfreed by design: no
# leak report (AddressSanitizer builds still check every access)
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
KILN_PLUGIN_PATH="$b/backends/interp/.libs:$b/backends/tcc/.libs:$b/backends/llvm/.libs"
export KILN_PLUGIN_PATH
err=$(mktemp)
fails=0 first=""
# exit() on a thread other than the main one: docs/backends.md, "Exit
# during tier-up", item 4 — such an exit has gates 1-3 only, and a compile
# in flight that creates one of libLLVM's function-local statics can still
# abort the process ("pure virtual method called").  Those aborts are
# counted apart, as a known, documented window (TAP TODO); any other
# failure of a thread-mode run (a hang, another status or message) fails.
tknown=0 tfirst=""
base=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
i=1
while [ "$i" -le "$runs" ]; do
  seed=$((base * 1000 + i))
  case $((i % 4)) in 0) mode=thread ;; 1) mode=return ;; 2) mode=main ;; *) mode=fork ;; esac
  # two models: radon's kernels reach LLVM code (and its function-local
  # statics) that eight schools' warm-up does not
  model=eight_schools
  [ $((i % 4)) -ge 2 ] && model=radon
  # a run that hangs is a failure (timeout's status 124), not a stuck suite
  timeout -k 10 120 "$b/libtool" --mode=execute "$b/tests/exit_tierup" \
    "$s/examples/$model.kg" "$seed" "$mode" >/dev/null 2>"$err"
  rc=$?
  if [ "$rc" = 134 ] && [ "$mode" = thread ] &&
     grep -q "pure virtual method called" "$err"; then
    tknown=$((tknown + 1))
    [ -z "$tfirst" ] && tfirst="$model seed $seed $mode: status $rc: $(head -c 300 "$err" | tr '\n' ' ')"
  elif [ "$rc" != 0 ]; then
    fails=$((fails + 1))
    [ -z "$first" ] && first="$model seed $seed $mode: status $rc: $(head -c 300 "$err" | tr '\n' ' ')"
  fi
  i=$((i + 1))
done
rm -f "$err"
if [ "$fails" = 0 ]; then
  echo "ok 1 - $runs processes exit during tier-up with status 0, but for test 2's (seeds from $((base * 1000 + 1)))"
else
  echo "not ok 1 - $fails of $runs processes exiting during tier-up failed"
  echo "# first: $first"
fi
if [ "$tknown" = 0 ]; then
  echo "ok 2 - no exit() on another thread hit the documented window"
else
  echo "not ok 2 - $tknown of $((runs / 4)) exit() calls on another thread aborted in libLLVM's statics # TODO the documented window: docs/backends.md, \"Exit during tier-up\", item 4"
  echo "# first: $tfirst"
fi
