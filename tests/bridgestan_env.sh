# bridgestan_env.sh — sourced by the BridgeStan Python tests' wrappers
# (tests/test_bridgestan.sh, tests/test_bridgestan_emcee.sh): decide
# whether the real Python client can run here, else print a TAP skip
# plan and exit.  Sets: src, build, kiln, python, clients, tmp (removed at
# exit), and exports PYTHONPATH for the client.
src=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
kiln="$build/tools/kiln"
python=/usr/bin/python3
clients="$src/../shared/clients"

skip_all() {
  echo "1..0 # SKIP $1"
  exit 0
}

# a sanitizer build's library needs its runtime loaded first (LD_PRELOAD),
# which python is not
[ -z "$SAN_CFLAGS" ] ||
  skip_all "sanitizer build (SAN_CFLAGS='$SAN_CFLAGS'): its libraries cannot be loaded into python"
[ -x "$python" ] || skip_all "no $python"
[ -f "$clients/bridgestan/__init__.py" ] ||
  skip_all "no BridgeStan Python client in $clients"
"$python" -c 'import numpy' 2>/dev/null || skip_all "no numpy for $python"
[ -x "$kiln" ] || skip_all "no $kiln"
PYTHONPATH="$clients${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln_bs.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

