#!/bin/sh
# Make tests/data/stan_transforms.json (tools/stan-transforms.cpp) from
# rstan's StanHeaders 2.21: sh tools/stan-transforms.sh [R_SITE_LIBRARY]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
R=${1:-/usr/lib/R/site-library}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${CXX:-g++} -std=c++14 -O0 -w -I"$R/StanHeaders/include" \
    -I"$R/RcppEigen/include" -I"$R/BH/include" \
    "$src/tools/stan-transforms.cpp" -o "$tmp/gen"
"$tmp/gen" > "$src/tests/data/stan_transforms.json"
echo "wrote $src/tests/data/stan_transforms.json"
