# Stan's own log density and gradient at 3 points per posteriordb posterior.
# Usage: Rscript tools/stan-references.R [--out DIR] [NAME ...]
# See tools/stan-references.sh and examples/posteriordb/references/README.md.
args <- commandArgs(trailingOnly = TRUE)
self <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])
srcdir <- normalizePath(file.path(dirname(self), ".."))
Sys.setenv(KILN_SRCDIR = srcdir)
source(file.path(srcdir, "tools", "stan-common.R"))

out_dir <- file.path(srcdir, "examples", "posteriordb", "references")
if (length(args) >= 2 && args[1] == "--out") { out_dir <- args[2]; args <- args[-(1:2)] }
default_names <- c(
  "diamonds-diamonds", "earnings-earn_height", "earnings-log10earn_height",
  "earnings-logearn_height", "earnings-logearn_height_male",
  "earnings-logearn_interaction", "earnings-logearn_logheight_male",
  "eight_schools-eight_schools_noncentered", "kidiq-kidscore_interaction",
  "kidiq-kidscore_momhs", "kidiq-kidscore_momhsiq", "kidiq-kidscore_momiq",
  "kilpisjarvi_mod-kilpisjarvi", "mesquite-logmesquite", "mesquite-logmesquite_logva",
  "mesquite-logmesquite_logvas", "mesquite-logmesquite_logvolume", "mesquite-mesquite",
  paste0("nes", seq(1972, 1996, 4), "-nes"), "sblrc-blr",
  as.vector(outer(c("radon_mn-", "radon_all-"), c(
    "radon_county_intercept", "radon_hierarchical_intercept_centered",
    "radon_hierarchical_intercept_noncentered", "radon_partially_pooled_centered",
    "radon_partially_pooled_noncentered", "radon_pooled",
    "radon_variable_intercept_centered", "radon_variable_intercept_noncentered",
    "radon_variable_intercept_slope_centered", "radon_variable_intercept_slope_noncentered",
    "radon_variable_slope_centered", "radon_variable_slope_noncentered"), paste0)))
names_ <- args
if (length(names_) == 0) {
  corpus <- file.path(srcdir, "examples", "posteriordb", "CORPUS")
  names_ <- if (file.exists(corpus)) {
    l <- trimws(sub("#.*", "", readLines(corpus))); l[l != ""]
  } else default_names
}
dir.create(out_dir, showWarnings = FALSE, recursive = TRUE)

# "theta.1" / "z.2.3" (Stan) -> "theta[1]" / "z[2,3]" (posteriordb draws)
bracket <- function(n) {
  has <- grepl(".", n, fixed = TRUE)
  b <- sub(".", "[", n[has], fixed = TRUE)
  n[has] <- paste0(gsub(".", ",", b, fixed = TRUE), "]")
  n
}
# element names of an R array/vector with dims d, in column-major order
elem_names <- function(base, d) {
  if (length(d) == 0) return(base)
  idx <- arrayInd(seq_len(prod(d)), d)
  paste0(base, "[", apply(idx, 1, paste, collapse = ","), "]")
}
read_draws <- function(name) {
  z <- file.path(pdb_root(), "reference_draws", paste0(name, ".json.zip"))
  if (!file.exists(z)) return(NULL)
  inner <- unzip(z, list = TRUE)$Name[1]
  con <- unz(z, inner); on.exit(close(con))
  fromJSON(paste(readLines(con, warn = FALSE), collapse = ""), simplifyVector = FALSE)
}

# Parameters absent from posteriordb's draws, recovered from what they hold
recover_param <- function(model, b, nm, ch, k) {
  g <- function(x) as.numeric(ch[[x]][[k]])
  if (model == "eight_schools_noncentered" && b == "theta_trans")
    # theta = theta_trans * tau + mu
    return(vapply(sub("theta_trans", "theta", nm), function(x) (g(x) - g("mu")) / g("tau"), 0))
  if (model == "gp_pois_regr" && b == "f_tilde") {
    # f = L f_tilde, L = cholesky(gp_exp_quad_cov(x, alpha, rho) + 1e-10 I)
    x <- read_data("gp_pois_regr")$x
    K <- g("alpha")^2 * exp(-outer(x, x, "-")^2 / (2 * g("rho")^2)) +
      diag(1e-10, length(x))
    f <- vapply(sub("f_tilde", "f", nm), g, 0)
    return(forwardsolve(t(chol(K)), f))
  }
  stop(sprintf("%s: parameter %s not in the reference draws", model, b))
}

# jsonlite prints at most 15 significant digits; write numbers with %.17g
# (round-trips every double) and hand them to toJSON verbatim.
g17 <- function(x) {
  x <- as.numeric(x)
  out <- sprintf("%.17g", x)
  out[!is.finite(x)] <- "null"
  out
}
jnum <- function(x) structure(g17(x), class = "json")
jvec <- function(x) structure(paste0("[", paste(g17(x), collapse = ","), "]"), class = "json")

# The solver tolerances of a program's ODE solve (integrate_ode_rk45/bdf/
# adams), or NULL: the 8th and 9th arguments when given, else Stan 2.21's
# defaults (rk45 1e-6, 1e-6; bdf and adams 1e-10, 1e-10).  Recorded in the
# reference as ode_rtol / ode_atol: Stan's solution, and so lp and grad,
# are exact only to them, and the tests derive their tolerances from them.
ode_tolerances <- function(model) {
  src <- paste(readLines(file.path(pdb_root(), "models", paste0(model, ".stan"))),
               collapse = "\n")
  at <- regexpr("integrate_ode_(rk45|bdf|adams)\\s*\\(", src, perl = TRUE)
  if (at < 0) return(NULL)
  kind <- sub("integrate_ode_([a-z0-9]+).*", "\\1",
              substr(src, at, at + attr(at, "match.length")))
  ch <- strsplit(substr(src, at + attr(at, "match.length"), nchar(src)), "")[[1]]
  depth <- 0; cur <- ""; args <- character(0)
  for (c in ch) {
    if (c %in% c("(", "{", "[")) depth <- depth + 1
    if (c %in% c(")", "}", "]")) {
      if (depth == 0) { args <- c(args, cur); break }
      depth <- depth - 1
    }
    if (c == "," && depth == 0) { args <- c(args, cur); cur <- "" } else cur <- paste0(cur, c)
  }
  if (length(args) >= 9) return(as.numeric(trimws(args[8:9])))
  if (kind == "rk45") c(1e-6, 1e-6) else c(1e-10, 1e-10)
}

models <- list()
for (name in names_) {
  info <- posterior_info(name)
  t0 <- proc.time()[["elapsed"]]
  if (is.null(models[[info$model_name]])) models[[info$model_name]] <- compile_model(info$model_name)
  cm <- models[[info$model_name]]
  fit <- make_fit(cm$sm, read_data(info$data_name))
  inst <- fit@.MISC$stan_fit_instance
  par_base <- unique(sub("\\..*$", "", inst$constrained_param_names(FALSE, FALSE)))
  unc_names <- bracket(inst$unconstrained_param_names(FALSE, FALSE))
  P <- get_num_upars(fit)
  stopifnot(length(unc_names) == P)
  draws <- read_draws(name)
  upts <- list()
  if (!is.null(draws)) {
    how <- "draws 1, 2, 3 of chain 1 of posteriordb's reference draws, mapped with unconstrain_pars"
    ch <- draws[[1]]
    for (k in 1:3) {
      init <- list()
      for (b in par_base) {
        d <- fit@par_dims[[b]]
        nm <- elem_names(b, d)
        v <- if (all(nm %in% names(ch))) vapply(nm, function(x) as.numeric(ch[[x]][[k]]), 0)
             else recover_param(info$model_name, b, nm, ch, k)
        init[[b]] <- if (length(d) == 0) v[[1]] else if (length(d) == 1) as.vector(v) else array(v, dim = d)
      }
      upts[[k]] <- unconstrain_pars(fit, init)
    }
  } else {
    how <- "no reference draws: set.seed(17); u <- runif(3 * P, -1, 1); point k = u[(k - 1) * P + 1:P] (unconstrained scale)"
    set.seed(17)
    u <- runif(3 * P, -1, 1)
    for (k in 1:3) upts[[k]] <- u[(k - 1) * P + seq_len(P)]
  }
  pts <- lapply(upts, function(up) {
    lp <- log_prob(fit, up, adjust_transform = TRUE, gradient = FALSE)
    g <- grad_log_prob(fit, up, adjust_transform = TRUE)
    cp <- constrain_pars(fit, up)
    cons <- list()
    for (nm in names(cp)) {
      x <- cp[[nm]]; d <- fit@par_dims[[nm]]
      vals <- as.vector(x); en <- elem_names(nm, d)
      for (i in seq_along(vals)) cons[[en[i]]] <- jnum(vals[i])
    }
    list(unc = jvec(up), lp = jnum(lp), grad = jvec(g),
         constrained = cons)
  })
  ode_tol <- ode_tolerances(info$model_name)
  rec <- list(
    posterior = unbox(name), model = unbox(info$model_name), data = unbox(info$data_name),
    stan_version = unbox(stan_version()),
    rstan_version = unbox(as.character(packageVersion("rstan"))),
    stanheaders_version = unbox(as.character(packageVersion("StanHeaders"))),
    note = unbox(paste(
      "lp is rstan log_prob(upars, adjust_transform = TRUE): the log density on the",
      "unconstrained scale with the Jacobian of the constraining transforms, but with the",
      "constant terms of `~` statements dropped, so only differences of lp between points",
      "are comparable with a density that keeps every constant. grad is grad_log_prob(upars,",
      "adjust_transform = TRUE), exact. unc is the point on the unconstrained scale, in the",
      "order of unconstrained_names (Stan's: parameters in declaration order, each",
      "container flattened column-major / first index fastest). constrained holds",
      "constrain_pars(upars) (parameters, transformed parameters, generated quantities)",
      "named like posteriordb's draws.")),
    points_from = unbox(how),
    num_unconstrained = unbox(P),
    ode_rtol = if (is.null(ode_tol)) NULL else jnum(ode_tol[1]),
    ode_atol = if (is.null(ode_tol)) NULL else jnum(ode_tol[2]),
    unconstrained_names = unc_names,
    points = pts)
  rec <- rec[!vapply(rec, is.null, TRUE)]
  writeLines(toJSON(rec, json_verbatim = TRUE, pretty = FALSE),
             file.path(out_dir, paste0(name, ".json")))
  cat(sprintf("%s: P=%d lp=%s  (%.1f s, compile %s)\n", name, P,
              paste(sapply(pts, function(p) unclass(p$lp)), collapse = " "),
              proc.time()[["elapsed"]] - t0,
              if (cm$was_cached) "cached" else sprintf("%.1f s", cm$compile_s_this_run)))
}
