# Stan's per-gradient time and cold compile time per posteriordb posterior.
# Usage: Rscript bench/stan-times.R [NAME ...]   (see bench/stan-times.sh)
#
# Method (stated in bench/stan_times.json): rstan's model-instance method
# grad_log_prob(upars, adjust_transform = TRUE) -- which calls Stan's
# stan::model::log_prob_grad<true, true> on the stanc-generated C++ -- is
# called N times in an R loop at point 1 of the posterior's reference file;
# the same loop over a trivial compiled model (one real, x ~ normal(0, 1)) is
# timed just before each posterior and its per-call time (R -> Rcpp -> C++ call and copy overhead,
# plus that model's own ~tens-of-ns gradient) is subtracted.  Best of 5 reps.
args <- commandArgs(trailingOnly = TRUE)
self <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])
srcdir <- normalizePath(file.path(dirname(self), ".."))
Sys.setenv(KILN_SRCDIR = srcdir)
source(file.path(srcdir, "tools", "stan-common.R"))
refdir <- file.path(srcdir, "examples", "posteriordb", "references")
out <- Sys.getenv("STAN_TIMES_OUT", file.path(srcdir, "bench", "stan_times.json"))
names_ <- if (length(args)) args else sub("\\.json$", "", list.files(refdir, "\\.json$"))

time_grad <- function(inst, up, min_s = 0.5, max_n = 10000L, reps = 5L) {
  for (i in 1:20) inst$grad_log_prob(up, TRUE)               # warm up
  t <- system.time(for (i in 1:20) inst$grad_log_prob(up, TRUE))[["elapsed"]] / 20
  n <- as.integer(min(max_n, max(200, ceiling(min_s / max(t, 1e-7)))))
  best <- Inf
  for (r in seq_len(reps)) {
    el <- system.time(for (i in seq_len(n)) inst$grad_log_prob(up, TRUE))[["elapsed"]]
    best <- min(best, el / n)
  }
  list(s = best, n = n)
}

# trivial model: the per-call overhead of calling into C++ from R
trivial_code <- "parameters { real x; } model { x ~ normal(0, 1); }"
tf <- file.path(cache_dir(), "kiln_trivial.stan")
if (!file.exists(tf)) writeLines(trivial_code, tf)
flags_file <- file.path(cache_dir(), "kiln_trivial.compile.log")
if (!file.exists(sub("\\.stan$", ".rds", tf)) || !file.exists(flags_file)) {
  unlink(sub("\\.stan$", ".rds", tf))
  log <- capture.output(sm0 <- stan_model(file = tf, model_name = "kiln_trivial",
                                          auto_write = TRUE, verbose = TRUE))
  writeLines(log, flags_file)
} else sm0 <- stan_model(file = tf, model_name = "kiln_trivial", auto_write = TRUE)
cxx_line <- grep("^g\\+\\+ .* -c file", readLines(flags_file), value = TRUE)[1]
fit0 <- make_fit(sm0, list())
inst0 <- fit0@.MISC$stan_fit_instance
ov <- time_grad(inst0, 0.3, min_s = 1, max_n = 200000L)
cat(sprintf("overhead per call (trivial model): %.0f ns (n=%d)\n", ov$s * 1e9, ov$n))

write_doc <- function(res) {
  doc <- list(
    method = unbox(paste(
      "Stan per-gradient time = (time of N calls of rstan's stan_fit instance method",
      "grad_log_prob(upars, adjust_transform = TRUE), i.e. stan::model::log_prob_grad<true,true>",
      "on the stanc-generated C++, at point 1 of examples/posteriordb/references/NAME.json,",
      "in an R loop) / N minus the same per-call time for a trivial model (one real,",
      "x ~ normal(0,1)), timed just before each posterior (overhead_ns_per_call): the",
      "R->C++ call overhead. N = enough calls for >= 0.5 s (200..10000); best of 5",
      "repetitions for both. Machine shared with other builds: expect noise. Not a standalone C++ harness: the",
      "subtraction removes the mean overhead, so small models (a few us) carry the most error.",
      "cold_compile_s = wall time of rstan::stan_model (stanc + g++) for an uncached model,",
      "measured with 2 compiles in parallel on a shared 2-core machine.")),
    overhead_ns_per_call = unbox(round(ov$s * 1e9, 1)),
    compiler = unbox(system("g++ --version | head -1", intern = TRUE)),
    compile_command = unbox(if (is.na(cxx_line)) "not captured (R CMD SHLIB prints to the terminal): see the g++ line of a verbose stan_model()" else cxx_line),
    stan_version = unbox(stan_version()),
    rstan_version = unbox(as.character(packageVersion("rstan"))),
    stanheaders_version = unbox(as.character(packageVersion("StanHeaders"))),
    cpu = unbox(sub(".*: ", "", grep("model name", readLines("/proc/cpuinfo"), value = TRUE)[1])),
    date = unbox(format(Sys.time(), "%Y-%m-%d %H:%M:%S UTC", tz = "UTC")),
    posteriors = unname(res))
  writeLines(toJSON(doc, pretty = TRUE, auto_unbox = FALSE), out)
}
res <- list()
for (name in names_) {
  ref <- fromJSON(file.path(refdir, paste0(name, ".json")), simplifyVector = FALSE)
  cm <- compile_model(ref$model)
  fit <- make_fit(cm$sm, read_data(ref$data))
  inst <- fit@.MISC$stan_fit_instance
  up <- as.numeric(unlist(ref$points[[1]]$unc))
  g <- inst$grad_log_prob(up, TRUE)
  stopifnot(isTRUE(all.equal(as.numeric(g), as.numeric(unlist(ref$points[[1]]$grad)), tolerance = 1e-12)))
  ov1 <- time_grad(inst0, 0.3, min_s = 0.3, max_n = 100000L)   # overhead, measured next to it
  tg <- time_grad(inst, up)
  ns <- (tg$s - ov1$s) * 1e9
  res[[name]] <- list(posterior = unbox(name), model = unbox(ref$model),
                      parameters = unbox(length(up)),
                      stan_ns_per_grad = unbox(round(ns, 1)),
                      raw_ns_per_call = unbox(round(tg$s * 1e9, 1)),
                      overhead_ns_per_call = unbox(round(ov1$s * 1e9, 1)),
                      calls = unbox(tg$n),
                      cold_compile_s = unbox(round(cm$compile_s, 2)))
  cat(sprintf("%-55s P=%4d  %10.0f ns/grad (raw %10.0f, n=%d)  compile %.1f s\n",
              name, length(up), ns, tg$s * 1e9, tg$n, cm$compile_s))
  write_doc(res)   # after every posterior, so a partial run leaves its results
}
cat("wrote", out, "\n")
