#!/bin/sh
# test_bridgestan.sh — kiln's BridgeStan libraries through the real
# BridgeStan Python client (tests/test_bridgestan.py; docs/bridgestan.md).
# Skips without ../shared/clients, numpy or /usr/bin/python3, and in
# sanitizer builds.  TAP output.
. "${KILN_SRCDIR:-.}/tests/bridgestan_env.sh"
"$python" "$src/tests/test_bridgestan.py" "$kiln" "$src" "$tmp"
