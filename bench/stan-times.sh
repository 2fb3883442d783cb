#!/bin/sh
# Stan's per-gradient and cold-compile times for the posteriordb corpus,
# written to bench/stan_times.json (see bench/stan-times.R for the method).
#   bench/stan-times.sh [NAME ...]     default: every examples/posteriordb/references/NAME.json
# Needs R with rstan (Debian: apt-get install r-cran-rstan; then
#   ln -s /usr/include /usr/lib/R/site-library/BH/include
# because Debian's r-cran-bh ships its headers in /usr/include/boost only).
# Compiled models are cached in $KILN_STAN_CACHE (default /tmp/kiln-stan-cache),
# shared with tools/stan-references.sh; POSTERIORDB points at posteriordb
# (default ../shared/posteriordb relative to the source tree).
here=$(cd "$(dirname "$0")/.." && pwd)
exec Rscript "$here/bench/stan-times.R" "$@"
