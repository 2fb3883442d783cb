#!/bin/sh
# test_bridgestan_emcee.sh — sample posteriordb's eight schools through the
# BridgeStan Python client with emcee and compare with the reference
# posterior (tests/test_bridgestan_emcee.py).  Skips as test_bridgestan.sh
# does, and without python3-emcee.  TAP output.
. "${KILN_SRCDIR:-.}/tests/bridgestan_env.sh"
"$python" -c 'import emcee' 2>/dev/null || skip_all "no emcee for $python (python3-emcee)"
"$python" "$src/tests/test_bridgestan_emcee.py" "$kiln" "$src" "$tmp"
