# Shared helpers for tools/stan-references.R and bench/stan-times.R.
# Compiles posteriordb Stan programs with rstan (Debian r-cran-rstan), caching
# the compiled models under $KILN_STAN_CACHE (default /tmp/kiln-stan-cache).
suppressPackageStartupMessages({ library(rstan); library(jsonlite) })
rstan_options(auto_write = TRUE)

pdb_root <- function() {
  r <- Sys.getenv("POSTERIORDB", "")
  if (r == "") {
    here <- Sys.getenv("KILN_SRCDIR", getwd())
    r <- normalizePath(file.path(here, "..", "shared", "posteriordb"), mustWork = FALSE)
    if (!dir.exists(r)) r <- "/work/shared/posteriordb"
  }
  r
}
cache_dir <- function() {
  d <- Sys.getenv("KILN_STAN_CACHE", "/tmp/kiln-stan-cache")
  dir.create(d, showWarnings = FALSE, recursive = TRUE)
  d
}

# posteriordb's programs use the Stan >= 2.26 array syntax
# (`array[N] int<lower=1> x;`); rstan 2.21 only knows the old one
# (`int<lower=1> x[N];`).  Rewrite declarations, and the unsized array
# types of function signatures (`array[] real f(array[] real z, ...)` is
# `real[] f(real[] z, ...)`, `array[,] real` is `real[,]`); nothing else
# is changed.
old_array_syntax <- function(lines) {
  lines <- gsub("array\\[(,*)\\]\\s+(data\\s+)?(real|int|vector|row_vector|matrix)\\b",
                "\\2\\3[\\1]", lines, perl = TRUE)
  re <- "^(\\s*)array\\[([^]]*)\\]\\s+([A-Za-z_][A-Za-z0-9_]*(<[^>]*>)?(\\[[^]]*\\])?)\\s+([A-Za-z_][A-Za-z0-9_]*)(.*)$"
  out <- lines
  hit <- grepl(re, lines, perl = TRUE)
  out[hit] <- sub(re, "\\1\\3 \\6[\\2]\\7", lines[hit], perl = TRUE)
  if (any(grepl("array\\[", out))) stop("array syntax left after rewrite")
  out
}

posterior_info <- function(name) {
  fromJSON(file.path(pdb_root(), "posteriors", paste0(name, ".json")))
}

# Returns list(sm = stanmodel, compile_s = seconds or NA if cached)
compile_model <- function(model) {
  src <- readLines(file.path(pdb_root(), "models", paste0(model, ".stan")))
  f <- file.path(cache_dir(), paste0(model, ".stan"))
  new <- old_array_syntax(src)
  if (!file.exists(f) || !identical(readLines(f), new)) writeLines(new, f)
  rds <- sub("\\.stan$", ".rds", f)
  cached <- file.exists(rds)
  t0 <- proc.time()[["elapsed"]]
  sm <- stan_model(file = f, model_name = model, auto_write = TRUE)
  el <- proc.time()[["elapsed"]] - t0
  tf <- file.path(cache_dir(), paste0(model, ".compile_s"))
  if (!cached) writeLines(format(el, digits = 6), tf)
  list(sm = sm, compile_s = if (file.exists(tf)) as.numeric(readLines(tf)) else NA,
       compile_s_this_run = el, was_cached = cached)
}

read_data <- function(data_name) {
  fromJSON(file.path(pdb_root(), "data", paste0(data_name, ".json")), simplifyVector = TRUE)
}

# stanfit without sampling: gives log_prob / grad_log_prob / (un)constrain_pars
make_fit <- function(sm, data) {
  suppressMessages(suppressWarnings(
    capture.output(fit <- sampling(sm, data = data, chains = 0))))
  fit
}
