/*
 * kiln_generate.c — `kiln generate`: text generation with a KV cache over
 * a decoder graph written by examples/smollm/gen_decoder.py (issue 29;
 * docs/decoder.md, docs/kiln.1).
 *
 *   kiln generate MODEL.kg --weights W.safetensors --prompt 1,2,3
 *                 --max-new N [--top-k K] [--temperature X] [--seed S]
 *                 [--backend B] [--tiers policy|off|baseline] [--quiet]
 *
 * The graph is compiled once; each call runs the new tokens after the
 * cached ones (inputs tokens, pos0, u, temperature, top_k and per layer
 * past_k_<l>/past_v_<l>, the caches' first t rows, passed in place) and
 * its outputs new_k_<l>/new_v_<l> are copied into the caches
 * [Smax][KVH][D] per layer.  Token ids go to stdout, one line; the
 * prefill's milliseconds and the decode's milliseconds per token to
 * stderr.  The uniforms are SplitMix64's (seed --seed), as
 * kiln.decoder.uniforms_from_seed draws them, so both give the same
 * tokens.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <errno.h>
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln_cli.h"
#include "ir.h"   /* the graph's top_k node: its k */

#define GEN_MAX_LAYERS 512
/* The most tokens a run holds (prompt + --max-new): the caches are
 * [GEN_MAX_TOKENS][KVH][D] f32 per layer at most (docs/kiln.1). */
#define GEN_MAX_TOKENS ((int64_t)1 << 20)
/* The smallest temperature other than 0: logits / T stays finite in f32
 * for logits up to ~3e8. */
#define GEN_MIN_TEMPERATURE 1e-30

static const char *gen_usage =
    "usage: kiln generate MODEL.kg --weights W.safetensors --prompt IDS\n"
    "                --max-new N [--top-k K] [--temperature X] [--seed S]\n"
    "                [--backend NAME] [--tiers policy|off|baseline] "
    "[--quiet]\n"
    "  IDS: token ids separated by commas (1,2,3); greedy without --top-k\n"
    "  (or with --top-k 1 or --temperature 0)\n";

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* SplitMix64 (Steele, Lea & Flood, OOPSLA 2014): the next uniform in
 * [0, 1), the output's top 24 bits over 2^24 (exact in f32). */
static float next_uniform(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

static int parse_i64(const char *s, int64_t lo, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo)
        return -1;
    *out = v;
    return 0;
}

/* "1,2,3" into a new array; NULL on a bad list. */
static int64_t *parse_ids(const char *s, int64_t *n)
{
    int64_t cap = 16, k = 0;
    int64_t *v = malloc(sizeof *v * (size_t)cap);
    const char *p = s;
    while (v) {
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (errno || end == p || x < 0 || (*end && *end != ',')) {
            free(v);
            return NULL;
        }
        if (k == cap) {
            int64_t *w = realloc(v, sizeof *v * (size_t)(cap *= 2));
            if (!w) {
                free(v);
                return NULL;
            }
            v = w;
        }
        v[k++] = x;
        if (!*end)
            break;
        p = end + 1;
    }
    *n = k;
    return v;
}

static int input_index(const kiln_function *f, const char *name)
{
    for (int i = 0; i < kiln_function_n_inputs(f); i++)
        if (strcmp(kiln_function_input_name(f, i), name) == 0)
            return i;
    return -1;
}

static int output_index(const kiln_function *f, const char *name)
{
    for (int i = 0; i < kiln_function_n_outputs(f); i++)
        if (strcmp(kiln_function_output_name(f, i), name) == 0)
            return i;
    return -1;
}

/* The k of the graph's top_k node (the most candidates it samples
 * from), or 0 when it has none. */
static int graph_top_k(const kiln_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == KILN_OP_TOP_K)
            return g->nodes[i].attrs->index;
    return 0;
}

/* The vocabulary size: rows of the table that `take` reads the input
 * `tokens` from (the embedding, bound), or -1 when there is none. */
static int64_t graph_vocab(const kiln_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = &g->nodes[i];
        if (n->op != KILN_OP_TAKE || n->n_in < 2)
            continue;
        const kiln_node *x = &g->nodes[n->in[0]], *ix = &g->nodes[n->in[1]];
        if (ix->op == KILN_OP_INPUT && ix->name &&
            strcmp(ix->name, "tokens") == 0 && x->op == KILN_OP_SHARED &&
            x->data && x->type.rank >= 1)
            return x->vshape[0];
    }
    return -1;
}

typedef struct gen_io {
    int tokens, pos0, u, temp, topk;       /* input indices */
    int logits, greedy, sampled;           /* output indices */
    int n_layers, kvh, hd;
    int pk[GEN_MAX_LAYERS], pv[GEN_MAX_LAYERS];
    int nk[GEN_MAX_LAYERS], nv[GEN_MAX_LAYERS];
} gen_io;

/* The decoder's interface (docs/decoder.md); 0, or 1 with a message. */
static int find_io(const kiln_function *f, gen_io *io)
{
    io->tokens = input_index(f, "tokens");
    io->pos0 = input_index(f, "pos0");
    io->u = input_index(f, "u");
    io->temp = input_index(f, "temperature");
    io->topk = input_index(f, "top_k");
    io->logits = output_index(f, "logits");
    io->greedy = output_index(f, "greedy");
    io->sampled = output_index(f, "sampled");
    if (io->tokens < 0 || io->pos0 < 0 || io->u < 0 || io->temp < 0 ||
        io->topk < 0 || io->greedy < 0 || io->sampled < 0) {
        fprintf(stderr, "kiln generate: the model is not a decoder of "
                "gen_decoder.py (inputs tokens, pos0, u, temperature, "
                "top_k, past_k_<l>, past_v_<l>; outputs greedy, sampled, "
                "new_k_<l>, new_v_<l>)\n");
        return 1;
    }
    int l = 0;
    for (;; l++) {
        char a[32], b[32], c[32], d[32];
        snprintf(a, sizeof a, "past_k_%d", l);
        snprintf(b, sizeof b, "past_v_%d", l);
        snprintf(c, sizeof c, "new_k_%d", l);
        snprintf(d, sizeof d, "new_v_%d", l);
        if (l == GEN_MAX_LAYERS || input_index(f, a) < 0)
            break;
        io->pk[l] = input_index(f, a);
        io->pv[l] = input_index(f, b);
        io->nk[l] = output_index(f, c);
        io->nv[l] = output_index(f, d);
        if (io->pv[l] < 0 || io->nk[l] < 0 || io->nv[l] < 0) {
            fprintf(stderr, "kiln generate: layer %d lacks past_v_%d, "
                    "new_k_%d or new_v_%d\n", l, l, l, l);
            return 1;
        }
    }
    kiln_dtype dt;
    int rank = 0;
    int64_t dims[KILN_MAX_RANK];
    if (l == 0 || kiln_function_input_type(f, io->pk[0], &dt, &rank, dims,
                                           NULL) || dt != KILN_F32 ||
        rank != 3 || dims[1] < 1 || dims[2] < 1) {
        fprintf(stderr, "kiln generate: no f32[t, KVH, D] input "
                "past_k_0\n");
        return 1;
    }
    if (dims[1] > INT32_MAX || dims[2] > INT32_MAX ||
        dims[1] * dims[2] > INT32_MAX) {
        fprintf(stderr, "kiln generate: past_k_0 is f32[t, %lld, %lld]: "
                "KVH * D above %d\n", (long long)dims[1],
                (long long)dims[2], INT32_MAX);
        return 1;
    }
    io->n_layers = l;
    io->kvh = (int)dims[1];
    io->hd = (int)dims[2];
    for (int j = 0; j < 2 * l; j++) {
        int idx = j % 2 ? io->pv[j / 2] : io->pk[j / 2];
        kiln_dtype dj;
        int rj = 0;
        int64_t dd[KILN_MAX_RANK];
        if (kiln_function_input_type(f, idx, &dj, &rj, dd, NULL) ||
            dj != KILN_F32 || rj != 3 || dd[1] != dims[1] ||
            dd[2] != dims[2]) {
            fprintf(stderr, "kiln generate: input %s is not f32[t, %d, %d] "
                    "as past_k_0\n", kiln_function_input_name(f, idx),
                    io->kvh, io->hd);
            return 1;
        }
    }
    return 0;
}

static void shape_str(const kiln_tensor *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", kiln_dtype_name(t->dtype));
    for (int d = 0; d < t->rank && d < KILN_MAX_RANK && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "",
                              (long long)t->shape[d]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* One output against the type the loop reads it as (rank -1: any
 * shape); 0, or 1 with a message. */
static int check_out(const kiln_function *f, const kiln_tensor *outs,
                     int idx, kiln_dtype dt, int rank, const int64_t *shape)
{
    const kiln_tensor *t = &outs[idx];
    int bad = t->dtype != dt || (rank >= 0 && (t->rank != rank || !t->data));
    for (int d = 0; !bad && rank > 0 && d < rank; d++)
        bad = t->shape[d] != shape[d];
    if (!bad)
        return 0;
    kiln_tensor want = {dt, rank < 0 ? 0 : rank, {0}, NULL};
    for (int d = 0; rank > 0 && d < rank; d++)
        want.shape[d] = shape[d];
    char got[160], exp[160];
    shape_str(t, got, sizeof got);
    shape_str(&want, exp, sizeof exp);
    fprintf(stderr, "kiln generate: output %s is %s, expected %s%s\n",
            kiln_function_output_name(f, idx), got, exp,
            rank < 0 ? " (any shape)" : "");
    return 1;
}

int kiln_cli_generate(int argc, char **argv)
{
    const char *model = NULL, *weights = NULL, *prompt = NULL;
    const char *backend = NULL, *tiers = NULL;
    int64_t max_new = -1, top_k = 0, seed = 0;
    double temperature = 1.0;
    int quiet = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "--weights") == 0 && v)
            weights = argv[++i];
        else if (strcmp(a, "--prompt") == 0 && v)
            prompt = argv[++i];
        else if (strcmp(a, "--max-new") == 0 && v)
            bad = parse_i64(argv[++i], 1, &max_new);
        else if (strcmp(a, "--top-k") == 0 && v)
            bad = parse_i64(argv[++i], 0, &top_k);
        else if (strcmp(a, "--seed") == 0 && v)
            bad = parse_i64(argv[++i], 0, &seed);
        else if (strcmp(a, "--temperature") == 0 && v) {
            char *end;
            temperature = strtod(argv[++i], &end);
            bad = *end || end == argv[i] || !(temperature == temperature);
            if (!bad && !(temperature >= 0 && temperature <= FLT_MAX)) {
                fprintf(stderr, "kiln generate: --temperature %s: expected "
                        "a finite f32 value >= 0 (0 for greedy)\n", argv[i]);
                return 2;
            }
            if (!bad && temperature > 0 &&
                temperature < GEN_MIN_TEMPERATURE) {
                fprintf(stderr, "kiln generate: --temperature %s is below "
                        "%g (logits / T would overflow); use --top-k 1 or "
                        "--temperature 0 for greedy\n", argv[i],
                        GEN_MIN_TEMPERATURE);
                return 2;
            }
        } else if (strcmp(a, "--backend") == 0 && v)
            backend = argv[++i];
        else if (strcmp(a, "--tiers") == 0 && v)
            tiers = argv[++i];
        else if (strcmp(a, "--quiet") == 0)
            quiet = 1;
        else if (a[0] != '-' && !model)
            model = a;
        else {
            fprintf(stderr, "kiln generate: unknown or incomplete argument "
                    "'%s'\n%s", a, gen_usage);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "kiln generate: bad value '%s' for %s\n",
                    argv[i], a);
            return 2;
        }
    }
    if (!model || !weights || !prompt || max_new < 0) {
        fprintf(stderr, "kiln generate: MODEL.kg, --weights, --prompt and "
                "--max-new are required\n%s", gen_usage);
        return 2;
    }
    int tmode = KILN_TIERS_POLICY;
    if (tiers && strcmp(tiers, "off") == 0)
        tmode = KILN_TIERS_OFF;
    else if (tiers && strcmp(tiers, "baseline") == 0)
        tmode = KILN_TIERS_BASELINE;
    else if (tiers && strcmp(tiers, "policy") != 0) {
        fprintf(stderr, "kiln generate: --tiers %s: expected policy, off or "
                "baseline\n", tiers);
        return 2;
    }
    int64_t np = 0;
    int64_t *ids = parse_ids(prompt, &np);
    if (!ids || np == 0) {
        fprintf(stderr, "kiln generate: --prompt '%s': expected token ids "
                "separated by commas (1,2,3)\n", prompt);
        free(ids);
        return 2;
    }
    if (np > GEN_MAX_TOKENS || max_new > GEN_MAX_TOKENS - np) {
        fprintf(stderr, "kiln generate: --max-new %lld: the prompt's %lld "
                "tokens plus --max-new exceed the limit of %lld tokens\n",
                (long long)max_new, (long long)np,
                (long long)GEN_MAX_TOKENS);
        free(ids);
        return 2;
    }
    if (backend && kiln_cli_require_backend(backend, quiet)) {
        free(ids);
        return 1;
    }
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_file(model, &err);
    int greedy = top_k <= 1 || temperature <= 0;
    int kmax = g ? graph_top_k(g) : 0;
    int rc = 1;
    kiln_function *f = NULL;
    float **kc = NULL;
    int nkc = 0;
    if (!g) {
        fprintf(stderr, "kiln: %s\n", err.message);
        goto out;
    }
    if (!greedy && top_k > kmax) {
        fprintf(stderr, "kiln generate: --top-k %lld is more than the %d "
                "candidates %s keeps (gen_decoder.py --top-k-max)\n",
                (long long)top_k, kmax, model);
        goto out;
    }
    double t0 = now_ms();
    if (kiln_graph_bind_safetensors(g, weights, &err)) {
        fprintf(stderr, "kiln generate: --weights: %s\n", err.message);
        goto out;
    }
    int64_t vocab = graph_vocab(g);
    for (int64_t i = 0; vocab > 0 && i < np; i++)
        if (ids[i] >= vocab) {
            fprintf(stderr, "kiln generate: --prompt: token %lld (position "
                    "%lld) is outside the vocabulary [0, %lld)\n",
                    (long long)ids[i], (long long)i, (long long)vocab);
            goto out;
        }
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.tiers = tmode;
    o.quiet = quiet;
    f = kiln_compile(g, &o, &err);
    if (!f) {
        fprintf(stderr, "kiln: %s\n", err.message);
        goto out;
    }
    double t_compile = now_ms() - t0;
    gen_io io;
    if (find_io(f, &io))
        goto out;
    int L = io.n_layers, nin = kiln_function_n_inputs(f);
    int64_t smax = np + max_new, row = (int64_t)io.kvh * io.hd;
    kc = calloc((size_t)(2 * L), sizeof *kc);
    nkc = kc ? 2 * L : 0;
    kiln_tensor *in = calloc((size_t)nin, sizeof *in);
    kiln_tensor *outs = calloc((size_t)kiln_function_n_outputs(f),
                               sizeof *outs);
    /* smax <= 2^20 and row <= 2^31 - 1: smax * row + 1 fits int64; the
     * bytes must fit size_t. */
    int short_of = !kc || !in || !outs ||
        (uint64_t)(smax * row + 1) > SIZE_MAX / sizeof(float);
    for (int l = 0; l < nkc; l++)
        if (!(kc[l] = malloc(sizeof(float) * (size_t)(smax * row + 1))))
            short_of = 1;
    if (short_of) {
        fprintf(stderr, "kiln generate: out of memory\n");
        free(in);
        free(outs);
        goto out;
    }
    int64_t pos = 0, cur_n = np, *cur = ids, tok = 0;
    int64_t k_in = greedy ? 1 : top_k;
    float u = 0, temp = greedy ? 1.0f : (float)temperature;
    uint64_t rng = (uint64_t)seed;
    double prefill = 0, decode = 0;
    in[io.tokens] = (kiln_tensor){KILN_I64, 1, {0}, NULL};
    in[io.pos0] = (kiln_tensor){KILN_I64, 0, {0}, &pos};
    in[io.u] = (kiln_tensor){KILN_F32, 0, {0}, &u};
    in[io.temp] = (kiln_tensor){KILN_F32, 0, {0}, &temp};
    in[io.topk] = (kiln_tensor){KILN_I64, 0, {0}, &k_in};
    for (int64_t i = 0; i < max_new; i++) {
        double c0 = now_ms();
        in[io.tokens].shape[0] = cur_n;
        in[io.tokens].data = cur;
        u = next_uniform(&rng);
        for (int l = 0; l < L; l++) {
            in[io.pk[l]] = (kiln_tensor){KILN_F32, 3, {pos, io.kvh, io.hd},
                                         kc[2 * l]};
            in[io.pv[l]] = (kiln_tensor){KILN_F32, 3, {pos, io.kvh, io.hd},
                                         kc[2 * l + 1]};
        }
        if (kiln_function_call(f, in, outs, &err)) {
            fprintf(stderr, "kiln generate: token %lld: %s\n",
                    (long long)i, err.message);
            free(in);
            free(outs);
            goto out;
        }
        int64_t kv_shape[3] = {cur_n, io.kvh, io.hd};
        int bad_out = io.logits >= 0 &&
            check_out(f, outs, io.logits, KILN_F32, -1, NULL);
        bad_out = bad_out || check_out(f, outs, greedy ? io.greedy :
                                       io.sampled, KILN_I64, 0, NULL);
        for (int l = 0; l < L && !bad_out; l++)
            bad_out = check_out(f, outs, io.nk[l], KILN_F32, 3, kv_shape) ||
                      check_out(f, outs, io.nv[l], KILN_F32, 3, kv_shape);
        if (bad_out) {
            free(in);
            free(outs);
            goto out;
        }
        for (int l = 0; l < L; l++) {
            memcpy(kc[2 * l] + pos * row, outs[io.nk[l]].data,
                   sizeof(float) * (size_t)(cur_n * row));
            memcpy(kc[2 * l + 1] + pos * row, outs[io.nv[l]].data,
                   sizeof(float) * (size_t)(cur_n * row));
        }
        pos += cur_n;
        tok = *(const int64_t *)outs[greedy ? io.greedy : io.sampled].data;
        double ms = now_ms() - c0;
        if (i == 0)
            prefill = ms;
        else
            decode += ms;
        printf("%s%lld", i ? " " : "", (long long)tok);
        fflush(stdout);
        cur = &tok;
        cur_n = 1;
    }
    printf("\n");
    fflush(stdout);
    fprintf(stderr, "kiln generate: compile %.1f ms; prefill %lld tokens "
            "%.3f ms; decode %lld tokens %.3f ms/token\n", t_compile,
            (long long)np, prefill, (long long)(max_new > 1 ? max_new - 1 : 0),
            max_new > 1 ? decode / (double)(max_new - 1) : 0.0);
    free(in);
    free(outs);
    rc = 0;
out:
    for (int l = 0; l < nkc; l++)
        free(kc[l]);
    free(kc);
    kiln_cli_function_free(f, rc);
    kiln_graph_free(g);
    free(ids);
    return rc;
}
