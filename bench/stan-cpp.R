# Stan's C++ for one posteriordb model and its data as an R dump: the only
# use of R in `make bench-stan` (bench/stan.py; issue 27).
# Usage: Rscript bench/stan-cpp.R MODEL DATA OUT.hpp OUT.data.R
#   MODEL, DATA: posteriordb names (models/MODEL.stan, data/DATA.json under
#   $POSTERIORDB, default ../shared/posteriordb; see tools/stan-common.R,
#   which also rewrites the Stan >= 2.26 array syntax for rstan 2.21's stanc).
# Writes OUT.hpp = rstan::stanc(...)$cppcode (defines `stan_model`) and
# OUT.data.R = the data in the R dump format that stan::io::dump reads.
args <- commandArgs(trailingOnly = TRUE)
if (length(args) != 4) stop("usage: stan-cpp.R MODEL DATA OUT.hpp OUT.data.R")
self <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])
srcdir <- normalizePath(file.path(dirname(self), ".."))
Sys.setenv(KILN_SRCDIR = srcdir)
source(file.path(srcdir, "tools", "stan-common.R"))
model <- args[1]
src <- readLines(file.path(pdb_root(), "models", paste0(model, ".stan")))
tf <- tempfile(fileext = ".stan")
writeLines(old_array_syntax(src), tf)
tr <- stanc(file = tf, model_name = model, obfuscate_model_name = FALSE)
writeLines(tr$cppcode, args[3])
data <- read_data(args[2])
env <- list2env(data)
stan_rdump(names(data), file = args[4], envir = env)
