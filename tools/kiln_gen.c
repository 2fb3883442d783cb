/*
 * kiln_gen.c — `kiln-gen`: writes the stress models reported from the
 * field as `.kg` files with their `.npy` data (docs/models.md):
 *
 *   pooled    G groups sharing P scalar coefficients, Gamma or LogNormal
 *             likelihood with per-group coefficient of variation
 *   additive  y ~ Normal(sum_k beta_k sin(k x), sigma), N components
 *   join      N scalar inputs joined into one vector
 *   dense     tanh(W x) with a large inline constant W (N x N)
 *
 * Every model outputs `logp` and, through one `grad` statement, the
 * gradient with respect to every input (`d_<input>`).  Every parameter is
 * a separate scalar input, as in PyMC models with many scalar random
 * variables: that is what makes the gradients' kernels wide.
 *
 * Deterministic: the same arguments give byte-identical files.  The
 * random numbers come from splitmix64 (no rand()); the coefficients
 * written into the `.kg` text are decimal numbers with few digits
 * (integer / 10^k, exact on every machine); the synthetic data go
 * through exp/log/sin/cos of the C library, so they are identical for one
 * build and may differ in the last bit between C libraries.
 *
 * Exit status: 0 done, 1 a file could not be written (or -o DIR does not
 * exist), 2 bad arguments.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/io.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GEN_VERSION "1"

/* log(2 pi) / 2, the Normal density's constant */
#define LOG_SQRT_2PI "0.91893853320467274"

/* terms per statement in long sums: keeps expressions far from the
 * parser's nesting limit whatever the size */
#define SUM_CHUNK 16

static const char *usage_text =
    "usage: kiln-gen pooled --groups G --shared P --likelihood gamma|lognormal\n"
    "                [--obs N] [--seed S] -o DIR\n"
    "       kiln-gen additive --components N [--obs N] [--seed S] -o DIR\n"
    "       kiln-gen join --n N [--seed S] -o DIR\n"
    "       kiln-gen dense --size N [--seed S] -o DIR\n"
    "       kiln-gen --help | --version\n";

static const char *help_text =
    "NAME\n"
    "    kiln-gen - generate kiln stress models (.kg files with .npy data)\n"
    "\n"
    "SYNOPSIS\n"
    "    kiln-gen pooled --groups G --shared P --likelihood gamma|lognormal\n"
    "             [--obs N] [--seed S] -o DIR\n"
    "    kiln-gen additive --components N [--obs N] [--seed S] -o DIR\n"
    "    kiln-gen join --n N [--seed S] -o DIR\n"
    "    kiln-gen dense --size N [--seed S] -o DIR\n"
    "    kiln-gen --help | --version\n"
    "\n"
    "DESCRIPTION\n"
    "    Writes DIR/NAME.kg, the .npy files it reads with npy(\"...\") (paths\n"
    "    relative to DIR), and DIR/NAME_ref_*.npy: values inlined in the\n"
    "    model, for an independent evaluation.  NAME encodes the arguments\n"
    "    (pooled_g6_p8_gamma, additive_c20, join_n50, dense_n64; _o<N> and\n"
    "    _s<S> are appended when --obs or --seed differ from the default).\n"
    "    Prints the path of the .kg file.  Every model outputs logp and,\n"
    "    from one grad statement, d_<input> for every input.  The same\n"
    "    arguments give byte-identical files.  The models' math is in\n"
    "    docs/models.md.\n"
    "\n"
    "MODELS\n"
    "    pooled    inputs s_1..s_P ~ Normal(0, 1) shared by all groups and\n"
    "              log_cv_1..log_cv_G ~ Normal(-1, 0.5); group g has mean\n"
    "              mu_g = exp(sum_k w_gk s_k) (w_gk inline literals), cv_g =\n"
    "              exp(log_cv_g) and N observations y_g (shared, NAME_y<g>.npy)\n"
    "              with a Gamma or LogNormal likelihood of mean mu_g and\n"
    "              coefficient of variation cv_g.  Reference: NAME_ref_w.npy\n"
    "              (G x P).  Default --obs 20.\n"
    "    additive  inputs beta_1..beta_N ~ Normal(0, 1) and log_sigma\n"
    "              (sigma = exp(log_sigma) ~ HalfNormal(5), with the log\n"
    "              Jacobian); y ~ Normal(sum_k beta_k sin(k x), sigma) with\n"
    "              shared x, y (NAME_x.npy, NAME_y.npy).  Default --obs 200.\n"
    "    join      inputs x_1..x_N; v = join(0, reshape(x_i, shape=[1])...);\n"
    "              logp = sum Normal(v | loc, scale) with inline constant\n"
    "              vectors loc and scale (NAME_ref_loc.npy, NAME_ref_scale.npy).\n"
    "    dense     input x: f64[N]; inline constant W: f64[N, N];\n"
    "              logp = -0.5 sum(tanh(W x)^2) - 0.5 sum(x^2).\n"
    "              Reference: NAME_ref_W.npy.  N = 1024 is 8 MB of weights.\n"
    "\n"
    "OPTIONS\n"
    "    -o DIR, --output DIR   output directory (must exist)\n"
    "    --seed S               random seed, an unsigned integer (default 1)\n"
    "    --obs N                observations (per group for pooled)\n"
    "\n"
    "EXIT STATUS\n"
    "    0 done; 1 a file could not be written or DIR does not exist;\n"
    "    2 bad arguments (usage).\n"
    "\n"
    "EXAMPLES\n"
    "    kiln-gen pooled --groups 6 --shared 8 --likelihood gamma -o models\n"
    "    kiln run models/pooled_g6_p8_gamma.kg --random-inputs 1\n";

/* ---- random numbers: splitmix64 -------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* An independent stream per purpose, so that one model's numbers do not
 * shift when another purpose draws more. */
static rng rng_stream(uint64_t seed, uint64_t stream)
{
    rng r = {seed};
    r.s = rng_next(&r) ^ (stream * 0xd1b54a32d192ed03ull);
    (void)rng_next(&r);
    return r;
}

/* uniform in [0, 1), 53 bits */
static double rng_unif(rng *r)
{
    return (double)(rng_next(r) >> 11) / 9007199254740992.0;
}

/* an integer uniform in [lo, hi] (hi - lo < 2^32) */
static int64_t rng_int(rng *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)(hi - lo) + 1;
    return lo + (int64_t)(((rng_next(r) >> 32) * span) >> 32);
}

/* a standard normal draw (Box-Muller, one of the pair) */
static double rng_normal(rng *r)
{
    double u1 = 1.0 - rng_unif(r); /* (0, 1] */
    double u2 = rng_unif(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* m / 10^digits for a random integer m in [lo, hi]: a short decimal that
 * is the same double on every machine */
static double rng_decimal(rng *r, int64_t lo, int64_t hi, int digits)
{
    double scale = 1;
    for (int i = 0; i < digits; i++)
        scale *= 10;
    return (double)rng_int(r, lo, hi) / scale;
}

/* ---- a growing text buffer ------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_reserve(sbuf *b, size_t extra)
{
    if (b->oom || b->n + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0) {
        b->oom = 1;
        return;
    }
    sb_reserve(b, (size_t)len);
    if (b->oom)
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)len + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)len;
}

static void sb_puts(sbuf *b, const char *s)
{
    size_t len = strlen(s);
    sb_reserve(b, len);
    if (b->oom)
        return;
    memcpy(b->p + b->n, s, len + 1);
    b->n += len;
}

/* The shortest of %.15g, %.16g, %.17g that reads back to the same double
 * (the C locale is never changed, so the point is '.'). */
static void fmt_num(char *out, size_t size, double v)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, size, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

static void sb_num(sbuf *b, double v)
{
    char s[40];
    fmt_num(s, sizeof s, v);
    sb_puts(b, s);
}

/* ---- writing files ---------------------------------------------------- */

typedef struct gen {
    const char *dir;
    char name[256];
    int failed;
} gen;

static void path_of(const gen *G, const char *suffix, char *out, size_t size)
{
    snprintf(out, size, "%s/%s%s", G->dir, G->name, suffix);
}

/* write `b` to DIR/NAME.kg: a temporary file renamed into place */
static void write_kg(gen *G, const sbuf *b)
{
    char path[4096], tmp[4200];
    path_of(G, ".kg", path, sizeof path);
    if (b->oom) {
        fprintf(stderr, "kiln-gen: %s: out of memory\n", path);
        G->failed = 1;
        return;
    }
    snprintf(tmp, sizeof tmp, "%s/.kiln-gen-%ld.tmp", G->dir, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        fprintf(stderr, "kiln-gen: %s: %s\n", tmp, strerror(errno));
        G->failed = 1;
        return;
    }
    int bad = fwrite(b->p, 1, b->n, f) != b->n;
    bad |= fflush(f) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        fprintf(stderr, "kiln-gen: %s: %s\n", path, strerror(errno));
        remove(tmp);
        G->failed = 1;
        return;
    }
    printf("%s\n", path);
}

/* write DIR/NAME<suffix> (suffix includes ".npy") */
static void write_npy(gen *G, const char *suffix, int rank,
                      const int64_t *shape, const double *data)
{
    if (G->failed)
        return;
    char path[4096];
    path_of(G, suffix, path, sizeof path);
    kiln_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = KILN_F64;
    t.rank = rank;
    for (int i = 0; i < rank; i++)
        t.shape[i] = shape[i];
    t.data = (void *)data;
    kiln_err err = {0, ""};
    if (kiln_npy_write(path, &t, &err) != 0) {
        fprintf(stderr, "kiln-gen: %s\n", err.message);
        G->failed = 1;
    }
}

/* ---- .kg pieces ------------------------------------------------------- */

/* One term of a long sum, appended to b. */
typedef void (*term_fn)(sbuf *b, int i, const void *ctx);

/* `name = t_0 + ... + t_{n-1}` (n >= 1) as nested add() calls, at most
 * SUM_CHUNK terms per statement: name_p1 = add(t0, add(t1, ...)),
 * name_p2 = add(name_p1, add(...)), ..., the last one named `name`. */
static void emit_sum(sbuf *b, const char *name, int n, term_fn term,
                     const void *ctx)
{
    int nchunks = (n + SUM_CHUNK - 1) / SUM_CHUNK;
    for (int c = 0; c < nchunks; c++) {
        int lo = c * SUM_CHUNK;
        int hi = lo + SUM_CHUNK < n ? lo + SUM_CHUNK : n;
        if (c == nchunks - 1)
            sb_printf(b, "  %s = ", name);
        else
            sb_printf(b, "  %s_p%d = ", name, c + 1);
        int count = hi - lo + (c > 0);
        int open = 0;
        for (int j = 0; j < count; j++) {
            if (j < count - 1) {
                sb_puts(b, "add(");
                open++;
            }
            if (c > 0 && j == 0)
                sb_printf(b, "%s_p%d", name, c);
            else
                term(b, lo + j - (c > 0), ctx);
            if (j < count - 1)
                sb_puts(b, ", ");
        }
        for (int j = 0; j < open; j++)
            sb_puts(b, ")");
        sb_puts(b, "\n");
    }
}

typedef struct names {
    int n;
    const char *prefix;   /* name i is prefix + (i+1), or `last` */
    const char *last;     /* when not NULL: the name of element n-1 */
    int n_pre;            /* a second family: elements [n_pre, n) */
    const char *prefix2;
} names;

static void name_of(sbuf *b, const names *nm, int i)
{
    if (nm->last && i == nm->n - 1)
        sb_puts(b, nm->last);
    else if (nm->prefix2 && i >= nm->n_pre)
        sb_printf(b, "%s%d", nm->prefix2, i - nm->n_pre + 1);
    else
        sb_printf(b, "%s%d", nm->prefix, i + 1);
}

/* `output logp`, then one grad statement for every input and the
 * d_<input> outputs */
static void emit_grad(sbuf *b, const names *nm)
{
    sb_puts(b, "  output logp\n  ");
    for (int i = 0; i < nm->n; i++) {
        sb_puts(b, i ? ", d_" : "d_");
        name_of(b, nm, i);
    }
    sb_puts(b, " = grad(logp");
    for (int i = 0; i < nm->n; i++) {
        sb_puts(b, ", ");
        name_of(b, nm, i);
    }
    sb_puts(b, ")\n");
    for (int i = 0; i < nm->n; i++) {
        sb_puts(b, "  output d_");
        name_of(b, nm, i);
        sb_puts(b, "\n");
    }
    sb_puts(b, "end\n");
}

/* the first lines: the format version and the arguments in canonical
 * order (never the output directory), so that the text depends only on
 * what the model is */
static void emit_header(sbuf *b, const char *model, const char *params,
                        uint64_t seed)
{
    sb_printf(b, "kiln 1\n# generated by kiln-gen (model format %s): "
                 "kiln-gen %s %s --seed %llu\n"
                 "# the model's math: docs/models.md\n",
              GEN_VERSION, model, params, (unsigned long long)seed);
}

/* ---- arguments ---------------------------------------------------------- */

typedef struct args {
    const char *model;
    const char *out;
    long groups, shared, obs, components, n, size;
    const char *likelihood;
    uint64_t seed;
    int has_seed;
} args;

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("kiln-gen: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\n", stderr);
    va_end(ap);
    fputs(usage_text, stderr);
    return 2;
}

/* a positive integer <= max; -1 when malformed or out of range */
static long parse_count(const char *s, long max)
{
    if (!*s)
        return -1;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
        if (v > max)
            return -1;
    }
    return v >= 1 ? v : -1;
}

static int parse_seed(const char *s, uint64_t *out)
{
    if (!*s)
        return -1;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

typedef struct count_opt {
    const char *flag;
    long max;
    size_t off;
} count_opt;

static const count_opt count_opts[] = {
    {"--groups", 100000, offsetof(args, groups)},
    {"--shared", 100000, offsetof(args, shared)},
    {"--obs", 10000000, offsetof(args, obs)},
    {"--components", 100000, offsetof(args, components)},
    {"--n", 1000000, offsetof(args, n)},
    {"--size", 4096, offsetof(args, size)},
};

/* 0, or 2 after a usage message */
static int parse_args(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    a->seed = 1;
    a->model = argv[1];
    if (strcmp(a->model, "pooled") && strcmp(a->model, "additive") &&
        strcmp(a->model, "join") && strcmp(a->model, "dense"))
        return usage_error("unknown model '%s' (pooled, additive, join, "
                           "dense)", a->model);
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i];
        if (i + 1 >= argc)
            return usage_error("%s needs a value", f);
        const char *v = argv[++i];
        if (strcmp(f, "-o") == 0 || strcmp(f, "--output") == 0) {
            a->out = v;
        } else if (strcmp(f, "--likelihood") == 0) {
            if (strcmp(v, "gamma") && strcmp(v, "lognormal"))
                return usage_error("--likelihood must be gamma or lognormal, "
                                   "not '%s'", v);
            a->likelihood = v;
        } else if (strcmp(f, "--seed") == 0) {
            if (parse_seed(v, &a->seed))
                return usage_error("--seed takes an unsigned 64-bit integer, "
                                   "not '%s'", v);
            a->has_seed = 1;
        } else {
            size_t k;
            for (k = 0; k < sizeof count_opts / sizeof *count_opts; k++)
                if (strcmp(f, count_opts[k].flag) == 0)
                    break;
            if (k == sizeof count_opts / sizeof *count_opts)
                return usage_error("unknown option '%s'", f);
            long c = parse_count(v, count_opts[k].max);
            if (c < 0)
                return usage_error("%s takes an integer from 1 to %ld, not "
                                   "'%s'", f, count_opts[k].max, v);
            *(long *)((char *)a + count_opts[k].off) = c;
        }
    }
    /* which options each model takes */
    int pooled = !strcmp(a->model, "pooled");
    int additive = !strcmp(a->model, "additive");
    int join = !strcmp(a->model, "join");
    int dense = !strcmp(a->model, "dense");
    struct {
        const char *flag;
        int given, allowed, required;
    } rule[] = {
        {"--groups", a->groups > 0, pooled, pooled},
        {"--shared", a->shared > 0, pooled, pooled},
        {"--likelihood", a->likelihood != NULL, pooled, pooled},
        {"--obs", a->obs > 0, pooled || additive, 0},
        {"--components", a->components > 0, additive, additive},
        {"--n", a->n > 0, join, join},
        {"--size", a->size > 0, dense, dense},
        {"-o", a->out != NULL, 1, 1},
    };
    for (size_t k = 0; k < sizeof rule / sizeof *rule; k++) {
        if (rule[k].given && !rule[k].allowed)
            return usage_error("%s does not apply to the %s model",
                               rule[k].flag, a->model);
        if (!rule[k].given && rule[k].required)
            return usage_error("the %s model needs %s", a->model,
                               rule[k].flag);
    }
    if (!*a->out)
        return usage_error("-o needs a directory");
    return 0;
}

/* "_o<obs>" and "_s<seed>" when they differ from the defaults */
static void name_suffix(char *out, size_t size, const args *a, long obs_def)
{
    char o[32] = "", s[40] = "";
    if (a->obs > 0 && a->obs != obs_def)
        snprintf(o, sizeof o, "_o%ld", a->obs);
    if (a->seed != 1)
        snprintf(s, sizeof s, "_s%llu", (unsigned long long)a->seed);
    snprintf(out, size, "%s%s", o, s);
}

/* ---- model 1: pooled-scale groups -------------------------------------- */

typedef struct pooled_ctx {
    long G, P;
    const double *w; /* G x P */
    long g;          /* the group of eta terms */
} pooled_ctx;

static void term_prior_s(sbuf *b, int k, const void *ctx)
{
    (void)ctx;
    sb_printf(b, "sub(mul(-0.5, square(s_%d)), " LOG_SQRT_2PI ")", k + 1);
}

/* Normal(-1, 0.5): -2 (x + 1)^2 - log 0.5 - log(2 pi) / 2 */
static void term_prior_cv(sbuf *b, int g, const void *ctx)
{
    (void)ctx;
    sb_printf(b, "sub(mul(-2.0, square(add(log_cv_%d, 1.0))), "
                 "0.22579135264472743)", g + 1);
}

static void term_eta(sbuf *b, int k, const void *ctx)
{
    const pooled_ctx *c = ctx;
    sb_puts(b, "mul(");
    sb_num(b, c->w[c->g * c->P + k]);
    sb_printf(b, ", s_%d)", k + 1);
}

static void term_logp_pooled(sbuf *b, int i, const void *ctx)
{
    (void)ctx;
    if (i == 0)
        sb_puts(b, "lp_s");
    else if (i == 1)
        sb_puts(b, "lp_cv");
    else
        sb_printf(b, "ll_%d", i - 1);
}

static int gen_pooled(gen *G, const args *a)
{
    long ng = a->groups, np = a->shared, nobs = a->obs > 0 ? a->obs : 20;
    int gamma = strcmp(a->likelihood, "gamma") == 0;
    char suf[80];
    name_suffix(suf, sizeof suf, a, 20);
    snprintf(G->name, sizeof G->name, "pooled_g%ld_p%ld_%s%s", ng, np,
             a->likelihood, suf);

    double *w = malloc(sizeof *w * (size_t)(ng * np));
    double *s_true = malloc(sizeof *s_true * (size_t)np);
    double *y = malloc(sizeof *y * (size_t)nobs);
    if (!w || !s_true || !y) {
        free(w), free(s_true), free(y);
        fprintf(stderr, "kiln-gen: out of memory\n");
        return 1;
    }
    /* weights: multiples of 0.001, spread so that sum_k w_gk s_k has a
     * standard deviation of about 0.6 for s ~ Normal(0, 1) */
    rng rw = rng_stream(a->seed, 1);
    int64_t wmax = (int64_t)(1000.0 / sqrt((double)np) + 0.5);
    if (wmax < 1)
        wmax = 1;
    for (long i = 0; i < ng * np; i++)
        w[i] = rng_decimal(&rw, -wmax, wmax, 3);
    int64_t wshape[2] = {ng, np};
    write_npy(G, "_ref_w.npy", 2, wshape, w);

    /* data: a "true" parameter draw, y lognormal with that group's mean
     * and coefficient of variation (positive for both likelihoods) */
    rng rt = rng_stream(a->seed, 2), ry = rng_stream(a->seed, 3);
    for (long k = 0; k < np; k++)
        s_true[k] = rng_normal(&rt);
    for (long g = 0; g < ng && !G->failed; g++) {
        double eta = 0;
        for (long k = 0; k < np; k++)
            eta += w[g * np + k] * s_true[k];
        double mu = exp(eta), cv = exp(-1.0 + 0.5 * rng_normal(&rt));
        double sl = sqrt(log1p(cv * cv));
        for (long i = 0; i < nobs; i++)
            y[i] = mu * exp(sl * rng_normal(&ry) - 0.5 * sl * sl);
        char suffix[64];
        snprintf(suffix, sizeof suffix, "_y%ld.npy", g + 1);
        int64_t yshape[1] = {nobs};
        write_npy(G, suffix, 1, yshape, y);
    }

    sbuf b = {0};
    char params[160];
    snprintf(params, sizeof params, "--groups %ld --shared %ld --likelihood %s "
             "--obs %ld", ng, np, a->likelihood, nobs);
    emit_header(&b, "pooled", params, a->seed);
    sb_printf(&b, "# %ld groups, %ld shared coefficients, %ld observations "
                  "per group, %s likelihood\n", ng, np, nobs,
              gamma ? "Gamma" : "LogNormal");
    sb_printf(&b, "graph %s\n", G->name);
    for (long k = 0; k < np; k++)
        sb_printf(&b, "  input s_%ld: f64\n", k + 1);
    for (long g = 0; g < ng; g++)
        sb_printf(&b, "  input log_cv_%ld: f64\n", g + 1);
    for (long g = 0; g < ng; g++)
        sb_printf(&b, "  shared y_%ld: f64[%ld] = npy(\"%s_y%ld.npy\")\n",
                  g + 1, nobs, G->name, g + 1);
    sb_puts(&b, "  # priors: s_k ~ Normal(0, 1), log_cv_g ~ Normal(-1, 0.5)\n");
    pooled_ctx c = {ng, np, w, 0};
    emit_sum(&b, "lp_s", (int)np, term_prior_s, &c);
    emit_sum(&b, "lp_cv", (int)ng, term_prior_cv, &c);
    for (long g = 0; g < ng; g++) {
        long i = g + 1;
        sb_printf(&b, "  # group %ld\n", i);
        c.g = g;
        char eta[32];
        snprintf(eta, sizeof eta, "eta_%ld", i);
        emit_sum(&b, eta, (int)np, term_eta, &c);
        sb_printf(&b, "  mu_%ld = exp(eta_%ld)\n", i, i);
        sb_printf(&b, "  cv_%ld = exp(log_cv_%ld)\n", i, i);
        sb_printf(&b, "  log_y_%ld = log(y_%ld)\n", i, i);
        if (gamma) {
            sb_printf(&b, "  a_%ld = true_div(1.0, square(cv_%ld))\n", i, i);
            sb_printf(&b, "  b_%ld = true_div(a_%ld, mu_%ld)\n", i, i, i);
            sb_printf(&b,
                      "  ll_%ld = sum(sub(add(sub(mul(a_%ld, log(b_%ld)), "
                      "gammaln(a_%ld)), mul(sub(a_%ld, 1.0), log_y_%ld)), "
                      "mul(b_%ld, y_%ld)))\n",
                      i, i, i, i, i, i, i, i);
        } else {
            sb_printf(&b, "  sigma_%ld = sqrt(log1p(square(cv_%ld)))\n", i,
                      i);
            sb_printf(&b,
                      "  m_%ld = sub(log(mu_%ld), mul(0.5, "
                      "square(sigma_%ld)))\n", i, i, i);
            sb_printf(&b,
                      "  ll_%ld = sum(sub(sub(sub(neg(log_y_%ld), "
                      "log(sigma_%ld)), " LOG_SQRT_2PI "), "
                      "true_div(square(sub(log_y_%ld, m_%ld)), "
                      "mul(2.0, square(sigma_%ld)))))\n",
                      i, i, i, i, i, i);
        }
    }
    emit_sum(&b, "logp", (int)(ng + 2), term_logp_pooled, &c);
    names nm = {(int)(np + ng), "s_", NULL, (int)np, "log_cv_"};
    emit_grad(&b, &nm);
    if (!G->failed)
        write_kg(G, &b);
    free(b.p);
    free(w), free(s_true), free(y);
    return G->failed;
}

/* ---- model 2: additive ---------------------------------------------------- */

static void term_mu_add(sbuf *b, int k, const void *ctx)
{
    (void)ctx;
    sb_printf(b, "mul(beta_%d, sin(mul(%d, x)))", k + 1, k + 1);
}

static void term_prior_beta(sbuf *b, int k, const void *ctx)
{
    (void)ctx;
    sb_printf(b, "sub(mul(-0.5, square(beta_%d)), " LOG_SQRT_2PI ")", k + 1);
}

static int gen_additive(gen *G, const args *a)
{
    long nc = a->components, nobs = a->obs > 0 ? a->obs : 200;
    char suf[80];
    name_suffix(suf, sizeof suf, a, 200);
    snprintf(G->name, sizeof G->name, "additive_c%ld%s", nc, suf);

    double *x = malloc(sizeof *x * (size_t)nobs);
    double *y = malloc(sizeof *y * (size_t)nobs);
    double *beta = malloc(sizeof *beta * (size_t)nc);
    if (!x || !y || !beta) {
        free(x), free(y), free(beta);
        fprintf(stderr, "kiln-gen: out of memory\n");
        return 1;
    }
    /* x: multiples of 0.0001 in [-3.1415, 3.1415]; y from a "true"
     * draw with decaying coefficients and sigma = 0.3 */
    rng rx = rng_stream(a->seed, 11), rt = rng_stream(a->seed, 12),
        ry = rng_stream(a->seed, 13);
    for (long i = 0; i < nobs; i++)
        x[i] = rng_decimal(&rx, -31415, 31415, 4);
    for (long k = 0; k < nc; k++)
        beta[k] = rng_normal(&rt) / sqrt((double)(k + 1));
    for (long i = 0; i < nobs; i++) {
        double mu = 0;
        for (long k = 0; k < nc; k++)
            mu += beta[k] * sin((double)(k + 1) * x[i]);
        y[i] = mu + 0.3 * rng_normal(&ry);
    }
    int64_t shape[1] = {nobs};
    write_npy(G, "_x.npy", 1, shape, x);
    write_npy(G, "_y.npy", 1, shape, y);

    sbuf b = {0};
    char params[96];
    snprintf(params, sizeof params, "--components %ld --obs %ld", nc, nobs);
    emit_header(&b, "additive", params, a->seed);
    sb_printf(&b, "# y ~ Normal(sum_k beta_k sin(k x), sigma): %ld "
                  "components, %ld observations\n", nc, nobs);
    sb_printf(&b, "graph %s\n", G->name);
    for (long k = 0; k < nc; k++)
        sb_printf(&b, "  input beta_%ld: f64\n", k + 1);
    sb_puts(&b, "  input log_sigma: f64\n");
    sb_printf(&b, "  shared x: f64[%ld] = npy(\"%s_x.npy\")\n", nobs, G->name);
    sb_printf(&b, "  shared y: f64[%ld] = npy(\"%s_y.npy\")\n", nobs, G->name);
    sb_puts(&b, "  sigma = exp(log_sigma)\n");
    emit_sum(&b, "mu", (int)nc, term_mu_add, NULL);
    sb_puts(&b, "  ll = sum(sub(mul(-0.5, square(true_div(sub(y, mu), "
                "sigma))), add(log_sigma, " LOG_SQRT_2PI ")))\n");
    sb_puts(&b, "  # priors: beta_k ~ Normal(0, 1); sigma ~ HalfNormal(5), "
                "plus log_sigma for the Jacobian of exp\n");
    emit_sum(&b, "lp_beta", (int)nc, term_prior_beta, NULL);
    /* log 2 - log 5 - log(2 pi) / 2 - sigma^2 / 50 */
    sb_puts(&b, "  lp_sigma = add(sub(mul(-0.02, square(sigma)), "
                "1.8352292650788277), log_sigma)\n");
    sb_puts(&b, "  logp = add(ll, add(lp_beta, lp_sigma))\n");
    names nm = {(int)(nc + 1), "beta_", "log_sigma", 0, NULL};
    emit_grad(&b, &nm);
    if (!G->failed)
        write_kg(G, &b);
    free(b.p);
    free(x), free(y), free(beta);
    return G->failed;
}

/* ---- model 3: wide join ------------------------------------------------ */

static void sb_vector(sbuf *b, const double *v, long n)
{
    sb_puts(b, "[");
    for (long i = 0; i < n; i++) {
        if (i)
            sb_puts(b, i % 16 ? ", " : ",\n    ");
        sb_num(b, v[i]);
    }
    sb_puts(b, "]");
}

static int gen_join(gen *G, const args *a)
{
    long n = a->n;
    char suf[80];
    name_suffix(suf, sizeof suf, a, 0);
    snprintf(G->name, sizeof G->name, "join_n%ld%s", n, suf);
    double *loc = malloc(sizeof *loc * (size_t)n);
    double *scale = malloc(sizeof *scale * (size_t)n);
    if (!loc || !scale) {
        free(loc), free(scale);
        fprintf(stderr, "kiln-gen: out of memory\n");
        return 1;
    }
    rng r = rng_stream(a->seed, 21);
    for (long i = 0; i < n; i++) {
        loc[i] = rng_decimal(&r, -200, 200, 2);  /* [-2, 2] */
        scale[i] = rng_decimal(&r, 50, 200, 2);  /* [0.5, 2] */
    }
    int64_t shape[1] = {n};
    write_npy(G, "_ref_loc.npy", 1, shape, loc);
    write_npy(G, "_ref_scale.npy", 1, shape, scale);

    sbuf b = {0};
    char params[48];
    snprintf(params, sizeof params, "--n %ld", n);
    emit_header(&b, "join", params, a->seed);
    sb_printf(&b, "# %ld scalar inputs joined into one vector, "
                  "v ~ Normal(loc, scale)\n", n);
    sb_printf(&b, "graph %s\n", G->name);
    for (long i = 0; i < n; i++)
        sb_printf(&b, "  input x_%ld: f64\n", i + 1);
    sb_printf(&b, "  const loc: f64[%ld] = ", n);
    sb_vector(&b, loc, n);
    sb_printf(&b, "\n  const scale: f64[%ld] = ", n);
    sb_vector(&b, scale, n);
    sb_puts(&b, "\n  v = join(0");
    for (long i = 0; i < n; i++)
        sb_printf(&b, ",%sreshape(x_%ld, shape=[1])", i % 4 ? " " : "\n    ",
                  i + 1);
    sb_puts(&b, ")\n");
    sb_puts(&b, "  z = true_div(sub(v, loc), scale)\n");
    sb_puts(&b, "  logp = sum(sub(mul(-0.5, square(z)), add(log(scale), "
                LOG_SQRT_2PI ")))\n");
    names nm = {(int)n, "x_", NULL, 0, NULL};
    emit_grad(&b, &nm);
    if (!G->failed)
        write_kg(G, &b);
    free(b.p);
    free(loc), free(scale);
    return G->failed;
}

/* ---- model 4: dense layer with a large constant ------------------------ */

static int gen_dense(gen *G, const args *a)
{
    long n = a->size;
    char suf[80];
    name_suffix(suf, sizeof suf, a, 0);
    snprintf(G->name, sizeof G->name, "dense_n%ld%s", n, suf);
    double *W = malloc(sizeof *W * (size_t)(n * n));
    if (!W) {
        fprintf(stderr, "kiln-gen: out of memory\n");
        return 1;
    }
    /* multiples of 0.0001 with a spread of about 1/sqrt(n) per row, so
     * that W x stays in tanh's non-saturated range for x ~ Normal(0, 1) */
    rng r = rng_stream(a->seed, 31);
    int64_t wmax = (int64_t)(17320.0 / sqrt((double)n) + 0.5);
    for (long i = 0; i < n * n; i++)
        W[i] = rng_decimal(&r, -wmax, wmax, 4);
    int64_t shape[2] = {n, n};
    write_npy(G, "_ref_W.npy", 2, shape, W);

    sbuf b = {0};
    char params[48];
    snprintf(params, sizeof params, "--size %ld", n);
    emit_header(&b, "dense", params, a->seed);
    sb_printf(&b, "# logp = -0.5 sum(tanh(W x)^2) - 0.5 sum(x^2), "
                  "W an inline %ld x %ld constant\n", n, n);
    sb_printf(&b, "graph %s\n", G->name);
    sb_printf(&b, "  input x: f64[%ld]\n", n);
    sb_printf(&b, "  const W: f64[%ld, %ld] = [", n, n);
    char s[40];
    for (long i = 0; i < n; i++) {
        sb_puts(&b, i ? ",\n    [" : "\n    [");
        for (long j = 0; j < n; j++) {
            fmt_num(s, sizeof s, W[i * n + j]);
            if (j)
                sb_puts(&b, ",");
            sb_puts(&b, s);
        }
        sb_puts(&b, "]");
    }
    sb_puts(&b, "]\n");
    sb_puts(&b, "  h = tanh(dot(W, x))\n");
    sb_puts(&b, "  logp = add(mul(-0.5, sum(square(h))), "
                "mul(-0.5, sum(square(x))))\n");
    names nm = {1, "x", "x", 0, NULL};
    emit_grad(&b, &nm);
    if (!G->failed)
        write_kg(G, &b);
    free(b.p);
    free(W);
    return G->failed;
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage_error("no model given");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(help_text, stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("kiln-gen %s (kiln %s, model format %s)\n", KILN_VERSION_STRING,
               KILN_VERSION_STRING, GEN_VERSION);
        return 0;
    }
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    struct stat st;
    if (stat(a.out, &st) != 0) {
        fprintf(stderr, "kiln-gen: %s: %s\n", a.out, strerror(errno));
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "kiln-gen: %s: not a directory\n", a.out);
        return 1;
    }
    gen G = {a.out, "", 0};
    if (!strcmp(a.model, "pooled"))
        rc = gen_pooled(&G, &a);
    else if (!strcmp(a.model, "additive"))
        rc = gen_additive(&G, &a);
    else if (!strcmp(a.model, "join"))
        rc = gen_join(&G, &a);
    else
        rc = gen_dense(&G, &a);
    return rc ? 1 : 0;
}
