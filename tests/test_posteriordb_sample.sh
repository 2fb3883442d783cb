#!/bin/sh
# test_posteriordb_sample.sh — sample posteriors of the posteriordb corpus
# through the BridgeStan Python client with emcee and compare with the
# reference posteriors (tests/test_posteriordb_sample.py).  Skips as
# test_bridgestan_emcee.sh does.  TAP output.
. "${KILN_SRCDIR:-.}/tests/bridgestan_env.sh"
"$python" -c 'import emcee' 2>/dev/null || skip_all "no emcee for $python (python3-emcee)"
"$python" "$src/tests/test_posteriordb_sample.py" "$kiln" "$src" "$tmp"
