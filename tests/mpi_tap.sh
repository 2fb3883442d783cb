# mpi_tap.sh — sourced by the MPI tests' wrappers (test_bridgestan_mpi.sh,
# test_pymc_mpi.sh): TAP numbering of every rank's unnumbered lines.
# Needs: mpirun (its path), tmp (a scratch directory); tmo (seconds,
# default 600) bounds each run.

n=0
failed=0
ok() { # ok STATUS WHAT
  n=$((n + 1))
  if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else
    echo "not ok $n - $2"; failed=1; fi
}
# number the unnumbered TAP lines of a run's output (file $1), label $2
lines() {
  while IFS= read -r l; do
    case $l in
      "ok - "*) ok 0 "$2: ${l#ok - }" ;;
      "not ok - "*) ok 1 "$2: ${l#not ok - }" ;;
      "#"*) echo "$l" ;;
      "") ;;
      *) echo "# $l" ;;
    esac
  done <"$1"
}
# run LABEL NP PROGRAM ARGS...: PROGRAM on NP ranks under mpirun; each
# rank's lines are read from its own file (mpirun may splice the ranks'
# lines together: a "not ok" could hide inside another rank's line) and
# numbered; the job's exit status is a test
run() {
  label=$1
  np=$2
  shift 2
  rm -rf "$tmp/of"
  timeout ${tmo:-600} "$mpirun" --oversubscribe --bind-to none \
    --output-filename "$tmp/of" -np "$np" "$@" >"$tmp/out" 2>&1
  st=$?
  for f in "$tmp"/of/*/rank.*/stdout; do
    [ -f "$f" ] && lines "$f" "$label"
  done
  if [ $st -ne 0 ]; then   # mpirun's and the ranks' messages
    sed 's/^/# /' "$tmp/out"
    cat "$tmp"/of/*/rank.*/stderr 2>/dev/null | sed 's/^/# /'
  fi
  ok $st "$label: exit status $st"
}
