#!/bin/sh
# test_spack_recipe.sh — kiln's Spack recipe (tools/spack/) against
# `configure --help`: tests/test_spack_recipe.py loads the recipes against
# a small model of Spack's package DSL and checks, for every combination
# of the variants, that each configure flag is one configure lists, that
# the variants map to their flags and that the dependencies follow the
# variants (docs/hpc.md "Spack").  TAP output; SKIP without python3.
src=${KILN_SRCDIR:-.}
py=${PYTHON:-python3}
test "$py" = : && py=python3
if ! command -v "$py" >/dev/null 2>&1; then
    echo "1..0 # SKIP needs python3"
    exit 0
fi
exec "$py" "$src/tests/test_spack_recipe.py" "$src"
