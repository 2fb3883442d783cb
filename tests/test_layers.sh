#!/bin/sh
# test_layers.sh — dependencies point one way: tools/layercheck.py reads
# libkiln's built objects (nm) and fails on a use of a later stage folder
# of core/, a circle between folders or a circle between files
# (docs/architecture.md, "What each folder may use").  TAP output.
src=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
py=${PYTHON:-python3}
test "$py" = : && py=python3
if ! command -v nm >/dev/null 2>&1 || ! command -v "$py" >/dev/null 2>&1; then
    echo "1..0 # SKIP needs nm and python3"
    exit 0
fi
exec "$py" "$src/tools/layercheck.py" --builddir "$build"
