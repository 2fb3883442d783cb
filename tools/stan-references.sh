#!/bin/sh
# Record Stan's own log density and gradient at 3 points per posteriordb
# posterior, for the kiln tests (which never need R):
#   tools/stan-references.sh [--out DIR] [NAME ...]
# NAME is a posteriordb posterior (e.g. eight_schools-eight_schools_noncentered);
# default: every NAME in examples/posteriordb/CORPUS if it exists, else the
# list in tools/stan-references.R.  Writes examples/posteriordb/references/NAME.json
# (format: examples/posteriordb/references/README.md).
# Needs R with rstan (Debian: apt-get install r-cran-rstan; then
#   ln -s /usr/include /usr/lib/R/site-library/BH/include
# because Debian's r-cran-bh ships its headers in /usr/include/boost only).
# POSTERIORDB overrides ../shared/posteriordb; compiled models are cached in
# $KILN_STAN_CACHE (default /tmp/kiln-stan-cache): about a minute per model cold.
here=$(cd "$(dirname "$0")/.." && pwd)
exec Rscript "$here/tools/stan-references.R" "$@"
