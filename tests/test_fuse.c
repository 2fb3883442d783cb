/*
 * test_fuse.c — the fusion planning pass (core/lower/fuse.c) and what came
 * with it: scalar regions, the stage order, the caps, the per-signature view
 * cache of core/runtime/vm.c, the llvm backend's rank-0 call and the
 * interpreter's registers sized to the iteration space.
 *
 *  1. a model mixing rank-0 work over three stages (scalars -> vector
 *     work -> reductions -> more scalars -> outputs), several scalar
 *     outputs and scalar intermediates read by vector kernels: under
 *     every backend this build has, fusion on equals fusion off and the
 *     values computed here in plain C; its gradients equal finite
 *     differences (of the C model, and tests/gradcheck.h's of the
 *     compiled cost) with fusion on and off; the logp callback on
 *     alternating buffers equals C;
 *  2. kernel counts: a chain of scalar muls with many-use intermediates
 *     is one "fused_scalars" kernel (and one kernel per node without
 *     fusion); each cap (fusion.max_scalar_ops, max_width, max_outputs,
 *     through a policy) splits, every kernel keeps within the
 *     instruction and input caps, the split reason is the cap's, and the
 *     numbers do not change;
 *  3. the stage order: a scalar read by a reduction whose result a later
 *     scalar reads, in a node order interleaving the stages;
 *  4. the view cache: new input data of the same shapes, changed
 *     symbolic dims and back, views with offsets (a slice, a rank-0
 *     element, a transpose read in place by dot) and rebinding shared
 *     values — every result against plain C and a fresh compile;
 *  5. no allocation in steady-state calls of a scalar region of more than
 *     100 live values (every backend; not under ASan);
 *  6. a rank-0 kernel called through the plugin ABI with a call that does
 *     not match (dtype, rank, NULL data, counts) fails with a message
 *     (llvm's direct rank-0 path falls back to the checked path), and
 *     still runs right afterwards;
 *  7. a region of f64, f32, i64 and bool members (outputs of each dtype,
 *     one under two names) equals no passes exactly; a region of 300
 *     inputs (more views than llvm's direct rank-0 call takes) is right;
 *  8. loops (LOOP kernels): a gather model and its gradient (repeated and
 *     negative indices, n over one block, n changing between calls) has
 *     no GATHER or SCATTER kernel left, equals plain C and loops off
 *     under every backend, every kernel on that backend; an index out of
 *     range is an error naming it, and the next call is right; no
 *     allocation in steady state; values that must not share a pass
 *     (x - mean(x), a table of the loop's own space) stay right, with a
 *     2-D gather and partial sums; gradients against finite
 *     differences.
 *
 * The output cap is checked as documented: a part's outputs that are the
 * graph's keep within fusion.max_outputs; the others must be values a
 * later part reads (the soft overrun).
 */
#define _GNU_SOURCE
#include <kiln/backend.h>
#include <kiln/graph.h>
#include <kiln/kiln.h>
#include <kiln/policy.h>

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse.h"
#include "ir.h"
#include "lower.h"
#include "rewrite/rewrite.h"
#include "runtime.h"
#include "tap.h"
#include "found_backends.h"
#include "gradcheck.h"
#include "open_backend.h"

/* counting allocations: n_allocs, COUNT_ALLOCS */
#include "count_allocs.h"

/* ---- helpers ------------------------------------------------------------ */

static const char *backends[3];
static int n_backends;

static kiln_graph *parse(const char *body)
{
    size_t n = strlen(body) + 64;
    char *text = malloc(n);
    snprintf(text, n, "kiln 1\ngraph t\n%send\n", body);
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, &err);
    if (!g)
        diag("parse: %s", err.message);
    free(text);
    return g;
}

/* compile g with `backend`, `passes` and, when not NULL, the policy text
 * `pol` (its fusion knobs) */
static kiln_function *compile_with(const kiln_graph *g, const char *backend,
                                   const char *passes, const char *pol,
                                   kiln_err *err)
{
    kiln_policy *P = NULL;
    if (pol) {
        P = kiln_policy_load_string(pol, strlen(pol), NULL, err);
        if (!P)
            return NULL;
    }
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.passes = passes;
    o.policy = P;
    o.quiet = 1;
    o.jobs = 1;
    kiln_function *f = kiln_compile(g, &o, err);
    kiln_policy_free(P);
    return f;
}

static kiln_function *compile_body(const char *body, const char *backend,
                                   const char *passes, const char *pol)
{
    kiln_graph *g = parse(body);
    if (!g)
        return NULL;
    kiln_err err = {0, ""};
    kiln_function *f = compile_with(g, backend, passes, pol, &err);
    if (!f)
        diag("compile (%s, %s): %s", backend, passes, err.message);
    kiln_graph_free(g);
    return f;
}

#define MAX_OUT 64

#include "call_outs.h"

static int64_t numel_of(const kiln_tensor *t)
{
    int64_t n = 1;
    for (int k = 0; k < t->rank; k++)
        n *= t->shape[k];
    return n;
}

/* a and b agree: same outputs, f64 within rtol of the magnitude */
static int same_outs(const outs *a, const outs *b, double rtol, char *why,
                     size_t n)
{
    if (a->rc || b->rc) {
        snprintf(why, n, "rc %d (%.200s) vs %d (%.200s)", a->rc, a->msg, b->rc,
                 b->msg);
        return 0;
    }
    if (a->n != b->n) {
        snprintf(why, n, "%d outputs vs %d", a->n, b->n);
        return 0;
    }
    for (int i = 0; i < a->n; i++) {
        const kiln_tensor *x = &a->t[i], *y = &b->t[i];
        if (x->dtype != y->dtype || x->rank != y->rank ||
            memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->rank)) {
            snprintf(why, n, "output %d: type or shape differs", i);
            return 0;
        }
        for (int64_t k = 0; k < numel_of(x); k++) {
            double u = ((double *)x->data)[k], v = ((double *)y->data)[k];
            if (!tap_close(u, v, rtol) && fabs(u - v) > rtol) {
                snprintf(why, n, "output %d [%lld]: %.17g vs %.17g", i,
                         (long long)k, u, v);
                return 0;
            }
        }
    }
    return 1;
}

/* outputs o against want (flattened, in output order, `nw` doubles) */
static int outs_equal(const outs *o, const double *want, int nw, double rtol,
                      char *why, size_t n)
{
    if (o->rc) {
        snprintf(why, n, "call failed: %.300s", o->msg);
        return 0;
    }
    int j = 0;
    for (int i = 0; i < o->n; i++) {
        for (int64_t k = 0; k < numel_of(&o->t[i]); k++, j++) {
            double g = ((double *)o->t[i].data)[k];
            if (j >= nw) {
                snprintf(why, n, "more values than expected");
                return 0;
            }
            if (!tap_close(g, want[j], rtol) && fabs(g - want[j]) > rtol) {
                snprintf(why, n, "output %d [%lld]: got %.17g, want %.17g",
                         i, (long long)k, g, want[j]);
                return 0;
            }
        }
    }
    if (j != nw) {
        snprintf(why, n, "%d values, expected %d", j, nw);
        return 0;
    }
    return 1;
}

/* kernels of f: how many, how many scalar regions, the widest and the
 * longest program */
typedef struct kstats {
    int n, n_regions, max_width, max_ops, n_over_ops, n_over_width;
} kstats;

static kstats kernel_stats(const kiln_function *f, int cap_ops,
                           int cap_width)
{
    kstats s;
    memset(&s, 0, sizeof s);
    s.n = kiln_function_n_kernels(f);
    for (int i = 0; i < s.n; i++) {
        kiln_kernel_info k;
        memset(&k, 0, sizeof k);
        k.struct_size = sizeof k;
        if (kiln_function_kernel_info(f, i, &k, NULL))
            continue;
        if (k.facts.label && strcmp(k.facts.label, "fused_scalars") == 0)
            s.n_regions++;
        if (k.facts.width > s.max_width)
            s.max_width = k.facts.width;
        if (k.facts.scalar_ops > s.max_ops)
            s.max_ops = k.facts.scalar_ops;
        s.n_over_ops += cap_ops > 0 && k.facts.scalar_ops > cap_ops;
        s.n_over_width += cap_width > 0 && k.facts.width > cap_width;
    }
    return s;
}

/* every kernel of f was compiled by `be` (no silent fallback) */
static int all_on(const kiln_function *f, const char *be)
{
    for (int i = 0; i < kiln_function_n_kernels(f); i++) {
        const char *b = kiln_function_kernel_backend(f, i);
        if (!b || strcmp(b, be) != 0)
            return 0;
    }
    return 1;
}

/* the graph of `body` after all passes, lowered with the caps given */
static int lower_body(const char *body, int max_width, int max_ops,
                      int max_outputs, kiln_graph **gp, kiln_program *p)
{
    kiln_graph *g = parse(body);
    if (!g)
        return -1;
    kiln_rw_config c;
    kiln_rw_config_default(&c);
    kiln_err err = {0, ""};
    if (kiln_rw_run(&g, &c, NULL, NULL, &err)) {
        diag("rewrite: %s", err.message);
        kiln_graph_free(g);
        return -1;
    }
    kiln_lower_opts o = {1, max_width, max_ops, max_outputs, 0, 0, 0};
    if (kiln_lower_ex(g, p, &o, &err)) {
        diag("lower: %s", err.message);
        kiln_graph_free(g);
        return -1;
    }
    *gp = g;
    return 0;
}

/* ---- 1. a model over several stages ------------------------------------- */

static const char *MIXED =
    "  input a: f64\n  input b: f64\n  input x: f64[5]\n"
    "  s1 = mul(a, b)\n"
    "  s2 = add(exp(a), 0.5)\n"
    "  s3 = sub(s1, s2)\n"
    "  s4 = true_div(s3, add(square(b), 1.0))\n"
    "  v = add(mul(x, s3), s4)\n"
    "  t = sum(square(v))\n"
    "  m = max(x)\n"
    "  u = add(mul(t, 0.01), s2)\n"
    "  r = log1p(square(u))\n"
    "  q = mul(r, m)\n"
    "  e = sum(mul(x, r))\n"
    "  k = add(mul(e, s1), q)\n"
    "  cost = add(k, mul(0.1, tanh(s4)))\n";

static const char *MIXED_OUTS =
    "  output o_s3 = s3\n  output o_q = q\n  output o_k = k\n"
    "  output o_v = v\n  output o_s4 = s4\n  output cost\n";

/* the same in plain C: s3, q, k, v[5], s4, cost */
static int mixed_ref(double a, double b, const double *x, double *w)
{
    double s1 = a * b, s2 = exp(a) + 0.5, s3 = s1 - s2;
    double s4 = s3 / (b * b + 1.0), t = 0, m = -INFINITY, e = 0, v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = x[i] * s3 + s4;
        t += v[i] * v[i];
        m = fmax(m, x[i]);
    }
    double u = t * 0.01 + s2, r = log1p(u * u), q = r * m;
    for (int i = 0; i < 5; i++)
        e += x[i] * r;
    double k = e * s1 + q;
    int j = 0;
    w[j++] = s3;
    w[j++] = q;
    w[j++] = k;
    for (int i = 0; i < 5; i++)
        w[j++] = v[i];
    w[j++] = s4;
    w[j++] = k + 0.1 * tanh(s4);
    return j;
}

static void test_mixed(void)
{
    char body[4096], why[512];
    snprintf(body, sizeof body, "%s%s", MIXED, MIXED_OUTS);
    double a = 0.3, b = -0.7, x[5] = {0.5, -1.2, 2.0, 0.25, -0.3};
    kiln_tensor in[3] = {{KILN_F64, 0, {0}, &a}, {KILN_F64, 0, {0}, &b},
                         {KILN_F64, 1, {5}, x}};
    double want[16];
    int nw = mixed_ref(a, b, x, want);
    for (int bi = 0; bi < n_backends; bi++) {
        const char *be = backends[bi];
        kiln_function *on = compile_body(body, be, "all", NULL);
        kiln_function *off = compile_body(body, be, "-fuse", NULL);
        kstats s = on ? kernel_stats(on, 0, 0) : (kstats){0, 0, 0, 0, 0, 0};
        kstats t = off ? kernel_stats(off, 0, 0) : (kstats){0, 0, 0, 0, 0, 0};
        /* stages 0, 1 and 2 each have a region of two or more members */
        ok(on && off && s.n_regions >= 3 && t.n_regions == 0 && s.n < t.n &&
               all_on(on, be),
           "mixed stages (%s): %d kernels, %d scalar regions (%d kernels "
           "without fusion)", be, s.n, s.n_regions, t.n);
        outs ro, rf;
        call_copy(on, in, &ro);
        call_copy(off, in, &rf);
        ok(same_outs(&ro, &rf, 1e-12, why, sizeof why),
           "mixed stages (%s): fusion on equals fusion off %s", be, why);
        ok(outs_equal(&ro, want, nw, 1e-12, why, sizeof why),
           "mixed stages (%s): equals the values computed in C %s", be, why);
        outs_free(&ro);
        outs_free(&rf);
        /* the gradient outputs, fusion on and off */
        char gbody[4096];
        snprintf(gbody, sizeof gbody,
                 "%s  output cost\n  d_a, d_b, d_x = grad(cost, a, b, x)\n"
                 "  output d_a\n  output d_b\n  output d_x\n", MIXED);
        kiln_function *gon = compile_body(gbody, be, "all", NULL);
        kiln_function *goff = compile_body(gbody, be, "-fuse", NULL);
        call_copy(gon, in, &ro);
        call_copy(goff, in, &rf);
        s = gon ? kernel_stats(gon, 0, 0) : s;
        ok(gon && s.n_regions >= 3 && same_outs(&ro, &rf, 1e-10, why,
                                                 sizeof why),
           "mixed stages (%s): gradients with fusion (%d kernels, %d "
           "regions) equal those without %s", be, s.n, s.n_regions, why);
        /* and the gradient is the finite difference of cost, computed
         * here from plain C (central, h = 1e-6) */
        double fd[7], h = 1e-6, pt[7] = {a, b, x[0], x[1], x[2], x[3], x[4]};
        for (int i = 0; i < 7; i++) {
            double p[7], wp[16], wm[16];
            memcpy(p, pt, sizeof p);
            p[i] += h;
            mixed_ref(p[0], p[1], p + 2, wp);
            p[i] -= 2 * h;
            mixed_ref(p[0], p[1], p + 2, wm);
            fd[i] = (wp[nw - 1] - wm[nw - 1]) / (2 * h);
        }
        int good = ro.rc == 0 && ro.n == 4;
        for (int i = 0; good && i < 7; i++) {
            double g = i == 0   ? *(double *)ro.t[1].data
                       : i == 1 ? *(double *)ro.t[2].data
                                : ((double *)ro.t[3].data)[i - 2];
            if (fabs(g - fd[i]) > 1e-6 * fmax(1, fabs(fd[i]))) {
                diag("d cost / d input %d: %.17g vs finite difference %.17g",
                     i, g, fd[i]);
                good = 0;
            }
        }
        ok(good, "mixed stages (%s): fused gradients equal finite "
           "differences of the C model %s", be, ro.rc ? ro.msg : "");
        outs_free(&ro);
        outs_free(&rf);
        /* the sampler callback passes its own x each call (f64 inputs
         * point straight into it): alternate two buffers */
        uint64_t dim = 0;
        void *ud = NULL;
        kiln_err err = {0, ""};
        kiln_logp_fn fn = gon ? kiln_function_logp_callback(gon, "cost", &dim,
                                                            &ud, &err)
                              : NULL;
        int cb_good = fn != NULL && dim == 7;
        for (int rep = 0; cb_good && rep < 4; rep++) {
            double p1[7] = {a, b, x[0], x[1], x[2], x[3], x[4]};
            double p2[7] = {-0.4, 0.9, 1.0, 0.5, -0.25, 2.5, -1.75};
            double *pt2 = rep % 2 ? p2 : p1, lp = 0, gr[7], w[16];
            int rc = fn(dim, pt2, gr, &lp, ud);
            mixed_ref(pt2[0], pt2[1], pt2 + 2, w);
            cb_good = rc == 0 && tap_close(lp, w[nw - 1], 1e-12);
            if (!cb_good)
                diag("callback %d: rc %d, logp %.17g, want %.17g (%s)", rep,
                     rc, lp, w[nw - 1], kiln_logp_callback_message(ud));
        }
        ok(cb_good, "mixed stages (%s): the logp callback on alternating "
           "buffers equals C %s", be, fn ? "" : err.message);
        kiln_function_free(gon);
        kiln_function_free(goff);
        kiln_function_free(on);
        kiln_function_free(off);
    }
    /* tests/gradcheck.h: the library's own gradient against finite
     * differences of the compiled cost, fusion on and off, per backend */
    char text[4096];
    snprintf(text, sizeof text,
             "kiln 1\ngraph mixed\n%s  output cost\nend\n"
             "# range a -1 1\n# range b -1 1\n# range x -2 2\n", MIXED);
    for (int bi = 0; bi < n_backends; bi++) {
        char label[80];
        setenv("KILN_BACKEND", backends[bi], 1);
        snprintf(label, sizeof label, "gradcheck mixed (%s, fusion)",
                 backends[bi]);
        gc_check(label, text, 1e-6);
        setenv("KILN_PASSES", "-fuse", 1);
        snprintf(label, sizeof label, "gradcheck mixed (%s, no fusion)",
                 backends[bi]);
        gc_check(label, text, 1e-6);
        unsetenv("KILN_PASSES");
    }
    unsetenv("KILN_BACKEND");
}

/* ---- 2. kernel counts and the caps -------------------------------------- */

/* x_i = x_{i-1} * c for i = 1..n; every x_i read twice (the next mul and
 * the final sum); some are outputs */
static void chain_body(char *buf, size_t cap, int n)
{
    size_t len = (size_t)snprintf(buf, cap, "  input x0: f64\n  input c: f64\n");
    for (int i = 1; i <= n; i++)
        len += (size_t)snprintf(buf + len, cap - len,
                                "  x%d = mul(x%d, c)\n", i, i - 1);
    len += (size_t)snprintf(buf + len, cap - len, "  output s = add(");
    for (int i = 1; i <= n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%sx%d", i > 1 ? ", " : "",
                                i);
    snprintf(buf + len, cap - len,
             ")\n  output p10 = x10\n  output p20 = x20\n"
             "  output q = mul(x%d, x%d)\n", n, n / 2);
}

static int chain_ref(double x0, double c, int n, double *w)
{
    double x[64], s = 0;
    x[0] = x0;
    for (int i = 1; i <= n; i++) {
        x[i] = x[i - 1] * c;
        s += x[i];
    }
    w[0] = s;
    w[1] = x[10];
    w[2] = x[20];
    w[3] = x[n] * x[n / 2];
    return 4;
}

/* 24 distinct scalar inputs folded in a chain: many inputs per region */
static void wide_body(char *buf, size_t cap)
{
    size_t len = 0;
    for (int i = 0; i < 24; i++)
        len += (size_t)snprintf(buf + len, cap - len, "  input y%d: f64\n", i);
    len += (size_t)snprintf(buf + len, cap - len, "  a0 = mul(y0, y1)\n");
    for (int i = 1; i < 23; i++)
        len += (size_t)snprintf(buf + len, cap - len,
                                "  a%d = add(a%d, mul(y%d, sin(y%d)))\n", i,
                                i - 1, i + 1, i);
    snprintf(buf + len, cap - len,
             "  output r = a22\n  output h = a11\n  output z = exp(a5)\n");
}

static int wide_ref(const double *y, double *w)
{
    double a[23];
    a[0] = y[0] * y[1];
    for (int i = 1; i < 23; i++)
        a[i] = a[i - 1] + y[i + 1] * sin(y[i]);
    w[0] = a[22];
    w[1] = a[11];
    w[2] = exp(a[5]);
    return 3;
}

/* ten independent scalar outputs (one per part when max_outputs is 1) */
static void many_out_body(char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "  input a: f64\n  input b: f64\n");
    for (int i = 0; i < 10; i++)
        len += (size_t)snprintf(buf + len, cap - len,
                                "  output o%d = mul(sin(add(a, %d.5)), b)\n",
                                i, i);
}

static int many_out_ref(double a, double b, double *w)
{
    for (int i = 0; i < 10; i++)
        w[i] = sin(a + i + 0.5) * b;
    return 10;
}

/* Compile `body` on backend be with policy `pol` and without fusion: the
 * numbers equal each other and `want`; the fused kernels keep within
 * cap_ops / cap_width.  Returns the fused function's stats. */
static kstats cap_case(const char *what, const char *body, const char *be,
                       const char *pol, int cap_ops, int cap_width,
                       const kiln_tensor *in, const double *want, int nw)
{
    char why[512] = "", why2[512] = "";
    kiln_function *on = compile_body(body, be, "all", pol);
    kiln_function *off = compile_body(body, be, "-fuse", NULL);
    kstats s = on ? kernel_stats(on, cap_ops, cap_width)
                  : (kstats){0, 0, 0, 0, 0, 0};
    outs ro, rf;
    call_copy(on, in, &ro);
    call_copy(off, in, &rf);
    int same = same_outs(&ro, &rf, 1e-12, why, sizeof why);
    int right = outs_equal(&ro, want, nw, 1e-12, why2, sizeof why2);
    ok(on && s.n_over_ops == 0 && s.n_over_width == 0 && same && right,
       "%s (%s): %d kernels, %d regions, longest %d instructions, widest %d "
       "inputs, within the caps; equal to no fusion and to C %s%s", what, be,
       s.n, s.n_regions, s.max_ops, s.max_width, why, why2);
    outs_free(&ro);
    outs_free(&rf);
    kiln_function_free(on);
    kiln_function_free(off);
    return s;
}

/* the steps of a program whose label is fused_scalars, and whether one of
 * them split for reason `why`; every region's inputs <= max_w, its
 * instructions <= max_ops and its outputs <= max_out (0: unchecked) */
static void check_lowered(const char *what, const char *body, int max_w,
                          int max_ops, int max_out, int why, int check_out)
{
    kiln_graph *g = NULL;
    kiln_program p;
    if (lower_body(body, max_w, max_ops, max_out, &g, &p)) {
        ok(0, "%s: lowering failed", what);
        return;
    }
    int regions = 0, split = 0, over = 0, members = 0;
    for (int i = 0; i < p.n_steps; i++) {
        const kiln_step *s = &p.steps[i];
        if (strcmp(s->label, "fused_scalars") != 0)
            continue;
        regions++;
        members += s->n_members;
        split |= s->split == why;
        /* the outputs beyond the cap may only be values a later part
         * reads (the documented soft overrun): the graph's outputs among
         * them keep within it, and every other one is read by a later
         * step */
        int graph_outs = 0, unread = 0;
        for (int j = 0; check_out && j < s->n_out; j++) {
            int node = p.bufs[s->out[j].buf].node, is_out = 0, read = 0;
            for (int q = 0; q < g->n_outputs; q++)
                is_out |= g->outputs[q].value == node;
            for (int t = i + 1; t < p.n_steps && !is_out; t++)
                for (int q = 0; q < p.steps[t].n_in; q++)
                    read |= p.steps[t].in[q].buf == s->out[j].buf;
            graph_outs += is_out;
            unread += !is_out && !read;
        }
        if ((int)s->kernel.n_inputs > max_w ||
            (int)s->kernel.n_instrs > max_ops ||
            (check_out && (graph_outs > max_out || unread > 0))) {
            diag("%s: step %d has %u inputs, %u instructions, %u outputs "
                 "(%d of the graph's, %d read by no later step)", what, i,
                 s->kernel.n_inputs, s->kernel.n_instrs, s->kernel.n_outputs,
                 graph_outs, unread);
            over++;
        }
    }
    ok(regions > 1 && split && over == 0,
       "%s: lowered into %d scalar regions (%d members) split at the %s, "
       "each within the caps", what, regions, members,
       kiln_fuse_split_name(why));
    kiln_lower_free(&p);
    kiln_graph_free(g);
}

static void test_counts_and_caps(void)
{
    static char chain[8192], wide[8192], many[4096];
    chain_body(chain, sizeof chain, 30);
    wide_body(wide, sizeof wide);
    many_out_body(many, sizeof many);
    double x0 = 1.1, c = 0.97, cw[4];
    int ncw = chain_ref(x0, c, 30, cw);
    kiln_tensor cin[2] = {{KILN_F64, 0, {0}, &x0}, {KILN_F64, 0, {0}, &c}};
    double y[24], ww[3];
    kiln_tensor win[24];
    for (int i = 0; i < 24; i++) {
        y[i] = 0.3 + 0.05 * i - (i % 3) * 0.4;
        win[i] = (kiln_tensor){KILN_F64, 0, {0}, &y[i]};
    }
    int nww = wide_ref(y, ww);
    double ma = 0.4, mb = -1.3, mw[10];
    int nmw = many_out_ref(ma, mb, mw);
    kiln_tensor min[2] = {{KILN_F64, 0, {0}, &ma}, {KILN_F64, 0, {0}, &mb}};

    for (int bi = 0; bi < n_backends; bi++) {
        const char *be = backends[bi];
        /* the chain, default caps: one kernel */
        kiln_function *on = compile_body(chain, be, "all", NULL);
        kiln_function *off = compile_body(chain, be, "-fuse", NULL);
        kstats s = on ? kernel_stats(on, 0, 0) : (kstats){0, 0, 0, 0, 0, 0};
        int n_off = off ? kiln_function_n_kernels(off) : 0;
        ok(on && s.n == 1 && s.n_regions == 1 && n_off >= 30,
           "chain of 30 scalar muls (%s): %d kernel with fusion (%d "
           "fused_scalars), %d without", be, s.n, s.n_regions, n_off);
        char why[512] = "";
        outs ro, rf;
        call_copy(on, cin, &ro);
        call_copy(off, cin, &rf);
        ok(outs_equal(&ro, cw, ncw, 1e-12, why, sizeof why) &&
               outs_equal(&rf, cw, ncw, 1e-12, why, sizeof why),
           "chain (%s): fused and unfused equal the C values %s", be, why);
        outs_free(&ro);
        outs_free(&rf);
        kiln_function_free(on);
        kiln_function_free(off);

        /* max_scalar_ops */
        s = cap_case("chain, max_scalar_ops 24", chain, be,
                     "kiln_policy: 1\nfusion:\n  max_scalar_ops: 24\n", 24,
                     0, cin, cw, ncw);
        ok(s.n_regions > 1, "chain, max_scalar_ops 24 (%s): split into %d "
           "regions", be, s.n_regions);
        /* max_width */
        s = cap_case("24 inputs, max_width 5", wide, be,
                     "kiln_policy: 1\nfusion:\n  max_width: 5\n", 0, 5, win,
                     ww, nww);
        ok(s.n_regions > 1 && s.max_width <= 5,
           "24 inputs, max_width 5 (%s): split into %d regions", be,
           s.n_regions);
        s = cap_case("24 inputs, default caps", wide, be, NULL, 256, 64, win,
                     ww, nww);
        ok(s.n == 1 && s.n_regions == 1 && s.max_width == 24,
           "24 inputs, default caps (%s): one region reading all 24 (%d "
           "kernels, widest %d)", be, s.n, s.max_width);
        /* max_outputs */
        s = cap_case("10 outputs, max_outputs 3", many, be,
                     "kiln_policy: 1\nfusion:\n  max_outputs: 3\n", 0, 0, min,
                     mw, nmw);
        ok(s.n == 4, "10 outputs, max_outputs 3 (%s): %d kernels (want 4)",
           be, s.n);
        s = cap_case("10 outputs, default caps", many, be, NULL, 0, 0, min,
                     mw, nmw);
        ok(s.n == 1 && s.n_regions == 1,
           "10 outputs, default caps (%s): one kernel (%d)", be, s.n);
        /* max_outputs 2 on the chain: later parts read earlier parts'
         * members (outputs beyond the cap, a soft overrun) */
        s = cap_case("chain, max_outputs 2", chain, be,
                     "kiln_policy: 1\nfusion:\n  max_outputs: 2\n", 0, 0, cin,
                     cw, ncw);
        ok(s.n > 1, "chain, max_outputs 2 (%s): %d kernels", be, s.n);
        /* all three caps at once */
        cap_case("24 inputs, all caps small", wide, be,
                 "kiln_policy: 1\nfusion:\n  max_width: 3\n"
                 "  max_scalar_ops: 12\n  max_outputs: 1\n", 12, 3, win, ww,
                 nww);
    }
    /* the lowered programs: the split reason is the cap's */
    check_lowered("chain, 24 instructions", chain, 64, 24, 64,
                  KILN_FUSE_SPLIT_OPS, 0);
    check_lowered("24 inputs, width 5", wide, 5, 256, 64,
                  KILN_FUSE_SPLIT_WIDTH, 0);
    check_lowered("10 outputs, 3 outputs", many, 64, 256, 3,
                  KILN_FUSE_SPLIT_OUTPUTS, 1);
    check_lowered("chain, 2 outputs", chain, 64, 256, 2,
                  KILN_FUSE_SPLIT_OUTPUTS, 1);
}

/* ---- 3. the stage order ------------------------------------------------- */

/* In node order: s (stage 0) feeds a reduction t; u (stage 1) reads t;
 * k (stage 0 again) comes after u; w (stage 1) reads u and k; t2 reduces
 * with w (stage 2); the output reads t2 and k. */
static const char *TOPO =
    "  input x: f64[4]\n  input a: f64\n"
    "  s = mul(a, 2.0)\n"
    "  t = sum(mul(x, s))\n"
    "  u = add(t, a)\n"
    "  k = exp(a)\n"
    "  w = mul(u, k)\n"
    "  t2 = sum(mul(x, w))\n"
    "  output r = sub(t2, k)\n"
    "  output ou = u\n"
    "  output ok_ = add(k, s)\n";

static void test_topo(void)
{
    double x[4] = {0.5, -1.5, 2.25, 3.0}, a = 0.7;
    kiln_tensor in[2] = {{KILN_F64, 1, {4}, x}, {KILN_F64, 0, {0}, &a}};
    double s = a * 2.0, t = 0, t2 = 0;
    for (int i = 0; i < 4; i++)
        t += x[i] * s;
    double u = t + a, k = exp(a), w = u * k;
    for (int i = 0; i < 4; i++)
        t2 += x[i] * w;
    double want[3] = {t2 - k, u, k + s};
    for (int bi = 0; bi < n_backends; bi++) {
        char why[512] = "", why2[512] = "";
        kiln_function *on = compile_body(TOPO, backends[bi], "all", NULL);
        kiln_function *off = compile_body(TOPO, backends[bi], "none", NULL);
        kstats st = on ? kernel_stats(on, 0, 0) : (kstats){0, 0, 0, 0, 0, 0};
        outs ro, rf;
        call_copy(on, in, &ro);
        call_copy(off, in, &rf);
        ok(on && st.n_regions >= 2 &&
               outs_equal(&ro, want, 3, 1e-12, why, sizeof why) &&
               outs_equal(&rf, want, 3, 1e-12, why2, sizeof why2),
           "stage order (%s): interleaved stages run in a topological order "
           "(%d kernels, %d regions) %s%s", backends[bi], st.n,
           st.n_regions, why, why2);
        outs_free(&ro);
        outs_free(&rf);
        kiln_function_free(on);
        kiln_function_free(off);
    }
    /* the plan itself: stage-0 scalars (s, k) are one region lowered
     * before the first reduction, even though k follows u in node order */
    kiln_graph *g = NULL;
    kiln_program p;
    if (lower_body(TOPO, 64, 256, 64, &g, &p) == 0) {
        int first_region = -1, first_reduce = -1, members0 = 0;
        for (int i = 0; i < p.n_steps; i++) {
            if (first_region < 0 && !strcmp(p.steps[i].label, "fused_scalars")) {
                first_region = i;
                members0 = p.steps[i].n_members;
            }
            if (first_reduce < 0 && p.steps[i].kernel.kind == KILN_KERNEL_REDUCE)
                first_reduce = i;
        }
        ok(first_region >= 0 && first_region < first_reduce && members0 >= 2,
           "stage order: the stage-0 region (%d members, step %d) runs before "
           "the first reduction (step %d)", members0, first_region,
           first_reduce);
        kiln_lower_free(&p);
        kiln_graph_free(g);
    }
}

/* ---- 4. the view cache -------------------------------------------------- */

/* sl: a slice with an offset and a negative stride; c: one element
 * (rank 0, offset 2); dot reads transpose(x) in place */
static const char *VIEWS =
    "  input x: f64[n, 3]\n  input y: f64[n]\n  input a: f64\n"
    "  sl = x[1:, ::-1]\n"
    "  c = x[0, 2]\n"
    "  d = dot(transpose(x), y)\n"
    "  s = mul(c, a)\n"
    "  s2 = add(exp(s), c)\n"
    "  output o1 = add(mul(sl, s2), 1.0)\n"
    "  output o2 = add(d, s)\n"
    "  output o3 = s2\n"
    "  output o4 = sum(mul(sl, sl))\n";

static int views_ref(const double *x, const double *y, double a, int n,
                     double *w)
{
    double c = x[2], s = c * a, s2 = exp(s) + c, o4 = 0;
    int j = 0;
    for (int i = 1; i < n; i++)
        for (int q = 0; q < 3; q++) {
            double v = x[i * 3 + (2 - q)];
            w[j++] = v * s2 + 1.0;
            o4 += v * v;
        }
    for (int q = 0; q < 3; q++) {
        double d = 0;
        for (int i = 0; i < n; i++)
            d += x[i * 3 + q] * y[i];
        w[j++] = d + s;
    }
    w[j++] = s2;
    w[j++] = o4;
    return j;
}

/* one call of f on (x, y, a) of n rows against C and a fresh compile */
static void views_call(kiln_function *f, const char *be, const char *what,
                       double *x, double *y, double a, int n)
{
    kiln_tensor in[3] = {{KILN_F64, 2, {n, 3}, x}, {KILN_F64, 1, {n}, y},
                         {KILN_F64, 0, {0}, &a}};
    double want[64];
    int nw = views_ref(x, y, a, n, want);
    char why[512] = "", why2[512] = "";
    outs r, fr;
    call_copy(f, in, &r);
    kiln_function *fresh = compile_body(VIEWS, be, "all", NULL);
    call_copy(fresh, in, &fr);
    kiln_function_free(fresh);
    ok(outs_equal(&r, want, nw, 1e-12, why, sizeof why) &&
           same_outs(&r, &fr, 0, why2, sizeof why2),
       "view cache (%s): %s (n = %d): equals C and a fresh compile %s%s", be,
       what, n, why, why2);
    outs_free(&r);
    outs_free(&fr);
}

static const char *SHARED =
    "  shared w: f64[p]\n  input a: f64\n  input z: f64[m]\n"
    "  ws = sum(mul(w, a))\n"
    "  wl = w[1:]\n"
    "  g = add(mul(ws, a), w[0])\n"
    "  output o1 = g\n"
    "  output o2 = mul(wl, g)\n"
    "  output o3 = add(sum(z), g)\n";

static int shared_ref(const double *w, int p, double a, const double *z,
                      int m, double *out)
{
    double ws = 0, sz = 0;
    for (int i = 0; i < p; i++)
        ws += w[i] * a;
    for (int i = 0; i < m; i++)
        sz += z[i];
    double g = ws * a + w[0];
    int j = 0;
    out[j++] = g;
    for (int i = 1; i < p; i++)
        out[j++] = w[i] * g;
    out[j++] = sz + g;
    return j;
}

static void shared_call(kiln_function *f, const char *be, const char *what,
                        const double *w, int p, double a, double *z, int m)
{
    kiln_tensor in[2] = {{KILN_F64, 0, {0}, &a}, {KILN_F64, 1, {m}, z}};
    double want[64];
    int nw = shared_ref(w, p, a, z, m, want);
    char why[512] = "";
    outs r;
    call_copy(f, in, &r);
    ok(outs_equal(&r, want, nw, 1e-12, why, sizeof why),
       "view cache, shared (%s): %s: right %s", be, what, why);
    outs_free(&r);
}

static void test_view_cache(void)
{
    for (int bi = 0; bi < n_backends; bi++) {
        const char *be = backends[bi];
        kiln_function *f = compile_body(VIEWS, be, "all", NULL);
        if (!ok(f != NULL, "view cache (%s): compile", be))
            continue;
        double xa[12], xb[12], xc[6], ya[4], yb[4], yc[2];
        for (int i = 0; i < 12; i++) {
            xa[i] = 0.1 * i - 0.4;
            xb[i] = 0.7 - 0.15 * i;
        }
        for (int i = 0; i < 6; i++)
            xc[i] = 1.0 + 0.3 * i;
        for (int i = 0; i < 4; i++) {
            ya[i] = 1.0 + i;
            yb[i] = -0.5 * i;
        }
        yc[0] = 2.0;
        yc[1] = -3.0;
        views_call(f, be, "first call", xa, ya, 0.5, 4);
        views_call(f, be, "new data pointers, same shapes", xb, yb, -0.25, 4);
        views_call(f, be, "the first pointers again", xa, ya, 1.5, 4);
        /* the same pointers with new contents */
        double xs[12];
        memcpy(xs, xa, sizeof xs);
        views_call(f, be, "a copy of the first data", xs, ya, 1.5, 4);
        xs[2] = 9.0;
        xs[11] = -2.0;
        views_call(f, be, "the same pointer, new contents", xs, ya, 1.5, 4);
        views_call(f, be, "n changes to 2", xc, yc, 0.75, 2);
        views_call(f, be, "n back to 4, new pointers", xb, ya, 0.75, 4);
        views_call(f, be, "and the other pointers", xa, yb, -1.0, 4);
        /* a view into a bigger array: the caller's data offset */
        double big[40];
        for (int i = 0; i < 40; i++)
            big[i] = sin(0.3 * i);
        views_call(f, be, "input data at an offset in a larger array",
                   big + 7, big + 30, 0.2, 4);
        views_call(f, be, "another offset", big + 13, big + 2, 0.2, 4);
        kiln_function_free(f);

        /* shared values */
        f = compile_body(SHARED, be, "all", NULL);
        if (!ok(f != NULL, "view cache, shared (%s): compile", be))
            continue;
        double w1[3] = {1.0, 2.0, -0.5}, w2[3] = {-2.0, 0.25, 4.0};
        double z4[4] = {1, 2, 3, 4}, z2[2] = {-1, 0.5};
        kiln_err err = {0, ""};
        kiln_tensor t1 = {KILN_F64, 1, {3}, w1}, t2 = {KILN_F64, 1, {3}, w2};
        ok(kiln_function_bind_shared(f, "w", &t1, &err) == 0,
           "view cache, shared (%s): first bind, size 3 %s", be, err.message);
        shared_call(f, be, "after the first bind", w1, 3, 0.5, z4, 4);
        shared_call(f, be, "again, new input shape", w1, 3, 0.5, z2, 2);
        ok(kiln_function_bind_shared(f, "w", &t2, &err) == 0,
           "view cache, shared (%s): rebind with a new value %s", be,
           err.message);
        shared_call(f, be, "after rebinding", w2, 3, -1.5, z2, 2);
        shared_call(f, be, "after rebinding, input shape back", w2, 3, -1.5,
                    z4, 4);
        /* a new size: the first bind fixed p (documented), the value is
         * kept */
        double w5[5] = {0.5, -1, 2, 3, 0.125};
        kiln_tensor t5 = {KILN_F64, 1, {5}, w5};
        err.code = 0;
        ok(kiln_function_bind_shared(f, "w", &t5, &err) == KILN_ERR_SHAPE,
           "view cache, shared (%s): a new size after the first bind is "
           "refused (%s)", be, err.message);
        shared_call(f, be, "after the refused rebind", w2, 3, 0.25, z4, 4);
        kiln_function_free(f);
        /* a function whose first bind has the other size, and a failed
         * call before it */
        f = compile_body(SHARED, be, "all", NULL);
        if (!f)
            continue;
        kiln_tensor in[2] = {{KILN_F64, 0, {0}, w1}, {KILN_F64, 1, {4}, z4}};
        kiln_tensor out[3];
        ok(kiln_function_call(f, in, out, &err) == KILN_ERR_ARG,
           "view cache, shared (%s): a call before binding fails (%s)", be,
           err.message);
        err.message[0] = 0;
        ok(kiln_function_bind_shared(f, "w", &t5, &err) == 0,
           "view cache, shared (%s): first bind, size 5 %s", be, err.message);
        shared_call(f, be, "size 5", w5, 5, 0.5, z4, 4);
        w5[0] = 7.0;
        w5[4] = -3.0;
        err.message[0] = 0;
        ok(kiln_function_bind_shared(f, "w", &t5, &err) == 0,
           "view cache, shared (%s): rebind size 5 %s", be, err.message);
        shared_call(f, be, "size 5, rebound", w5, 5, 0.5, z2, 2);
        kiln_function_free(f);
    }
}

/* ---- 5. no allocation in steady state ----------------------------------- */

#define NLIVE 120

/* v_i = (a + i/100) * b, all live until the two sums at the end */
static void live_body(char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "  input a: f64\n  input b: f64\n");
    for (int i = 0; i < NLIVE; i++)
        len += (size_t)snprintf(buf + len, cap - len,
                                "  v%d = mul(add(a, %d.0e-2), b)\n", i, i);
    len += (size_t)snprintf(buf + len, cap - len, "  output s1 = add(");
    for (int i = 0; i < NLIVE; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%sv%d", i ? ", " : "",
                                i);
    len += (size_t)snprintf(buf + len, cap - len, ")\n  output s2 = add(");
    for (int i = 0; i < NLIVE / 2; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%smul(v%d, v%d)",
                                i ? ", " : "", i, NLIVE - 1 - i);
    snprintf(buf + len, cap - len, ")\n  output o7 = v7\n");
}

static void test_no_alloc(void)
{
    static char body[32768];
    live_body(body, sizeof body);
    const char *pol = "kiln_policy: 1\nfusion:\n  max_scalar_ops: 100000\n";
    double a = 0.3, b = 1.7;
    kiln_tensor in[2] = {{KILN_F64, 0, {0}, &a}, {KILN_F64, 0, {0}, &b}};
    for (int bi = 0; bi < n_backends; bi++) {
        const char *be = backends[bi];
        kiln_function *f = compile_body(body, be, "all", pol);
        kstats s = f ? kernel_stats(f, 0, 0) : (kstats){0, 0, 0, 0, 0, 0};
        ok(f && s.n == 1 && s.n_regions == 1 && s.max_ops > 3 * NLIVE,
           "%d live scalars (%s): one region of %d instructions", NLIVE, be,
           s.max_ops);
        if (!f)
            continue;
        kiln_tensor out[3];
        kiln_err err = {0, ""};
        int rc = kiln_function_call(f, in, out, &err);
        ok(rc == 0, "%d live scalars (%s): first call %s", NLIVE, be,
           err.message);
        double w1 = 0, w2 = 0, v[NLIVE];
        for (int i = 0; i < NLIVE; i++) {
            v[i] = (a + i * 1e-2) * b;
            w1 += v[i];
        }
        for (int i = 0; i < NLIVE / 2; i++)
            w2 += v[i] * v[NLIVE - 1 - i];
#if COUNT_ALLOCS
        long before = n_allocs;
        for (int r = 0; r < 20 && rc == 0; r++)
            rc = kiln_function_call(f, in, out, &err);
        long used = n_allocs - before;
        ok(rc == 0 && used == 0,
           "%d live scalars (%s): no allocation in 20 steady-state calls "
           "(%ld)", NLIVE, be, used);
#else
        ok(1, "# SKIP allocation counting under ASan");
        for (int r = 0; r < 20 && rc == 0; r++)
            rc = kiln_function_call(f, in, out, &err);
#endif
        ok(rc == 0 && tap_close(*(double *)out[0].data, w1, 1e-12) &&
               tap_close(*(double *)out[1].data, w2, 1e-12) &&
               *(double *)out[2].data == v[7],
           "%d live scalars (%s): values (%.17g, %.17g; want %.17g, %.17g)",
           NLIVE, be, rc ? 0.0 : *(double *)out[0].data,
           rc ? 0.0 : *(double *)out[1].data, w1, w2);
        kiln_function_free(f);
    }
}

/* ---- 6. a rank-0 kernel called wrongly ---------------------------------- */

static const kiln_backend *open_plugin(const char *name)
{
    return open_backend(getenv("KILN_BUILDDIR"), name);
}

static kiln_view scalar_view(void *p, kiln_dtype dt)
{
    kiln_view v;
    memset(&v, 0, sizeof v);
    v.data = p;
    v.dtype = dt;
    return v;
}

static int call_k(const kiln_callable *c, uint32_t ni, uint32_t no,
                  const kiln_view *in, const kiln_view *out, char *eb,
                  size_t ebn)
{
    eb[0] = 0;
    kiln_call k = {sizeof k, ni, no, in, out, kiln_runtime_get(), eb, ebn, NULL, 0};
    return c->fn(c->state, &k);
}

static void test_scalar_call_errors(void)
{
    /* o0 = a * b + 1.5, o1 = exp(a) - b: a two-output rank-0 region */
    static const kiln_arg_desc d[4] = {{KILN_F64, 0, {0}}, {KILN_F64, 0, {0}},
                                       {KILN_F64, 0, {0}}, {KILN_F64, 0, {0}}};
    static const kiln_instr prog[] = {
        {KILN_I_LOAD, KILN_F64, 0, 0, -1, -1, 0},
        {KILN_I_LOAD, KILN_F64, 0, 1, -1, -1, 0},
        {KILN_I_MUL, KILN_F64, 0, 0, 1, -1, 0},
        {KILN_I_CONST, KILN_F64, 0, -1, -1, -1, 1.5},
        {KILN_I_ADD, KILN_F64, 0, 2, 3, -1, 0},
        {KILN_I_EXP, KILN_F64, 0, 0, -1, -1, 0},
        {KILN_I_SUB, KILN_F64, 0, 5, 1, -1, 0},
    };
    static const int32_t refs[2] = {4, 6};
    kiln_kernel k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    k.kind = KILN_KERNEL_ELEMWISE;
    k.n_inputs = 2;
    k.n_outputs = 2;
    k.inputs = d;
    k.outputs = d + 2;
    k.n_instrs = sizeof prog / sizeof prog[0];
    k.instrs = prog;
    k.out_refs = refs;
    k.label = "fused_scalars";
    const char *names[3] = {"interp", "tcc", "llvm"};
    for (int bi = 0; bi < 3; bi++) {
        const kiln_backend *be = open_plugin(names[bi]);
        if (!be) {
            ok(1, "rank-0 call errors: %s # SKIP plugin not built",
               names[bi]);
            continue;
        }
        kiln_artifact *art = NULL;
        kiln_plugin_error *pe = NULL;
        kiln_callable *c = NULL;
        kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
        if (be->compile(&k, &co, &art, &pe) || be->load(art, &c, &pe)) {
            ok(0, "rank-0 call errors (%s): compile and load: %s", names[bi],
               pe ? pe->message : "?");
            be->error_free(pe);
            if (art)
                be->artifact_free(art);
            continue;
        }
        double a = 0.8, b = -2.5, o0 = 0, o1 = 0;
        float af = 0.8f;
        char eb[256];
        kiln_view in[2] = {scalar_view(&a, KILN_F64), scalar_view(&b, KILN_F64)};
        kiln_view out[2] = {scalar_view(&o0, KILN_F64),
                            scalar_view(&o1, KILN_F64)};
        int rc = call_k(c, 2, 2, in, out, eb, sizeof eb);
        ok(rc == 0 && o0 == a * b + 1.5 && tap_close(o1, exp(a) - b, 1e-15),
           "rank-0 call (%s): right values (%g, %g) %s", names[bi], o0, o1,
           eb);
        /* wrong dtype of an input */
        kiln_view bad[2];
        memcpy(bad, in, sizeof bad);
        bad[0] = scalar_view(&af, KILN_F32);
        o0 = o1 = -7;
        rc = call_k(c, 2, 2, bad, out, eb, sizeof eb);
        /* interp and llvm (its checked path is the interpreter's) name
         * the dtypes; tcc says the views do not match */
        int generic = strcmp(names[bi], "tcc") == 0;
        ok(rc != 0 && eb[0] &&
               (generic || (strstr(eb, "f32") && strstr(eb, "f64"))) &&
               o0 == -7,
           "rank-0 call (%s): an f32 input view fails: rc %d, '%s'",
           names[bi], rc, eb);
        /* wrong dtype of an output */
        kiln_view bout[2];
        memcpy(bout, out, sizeof bout);
        int64_t oi = 0;
        bout[1] = scalar_view(&oi, KILN_I64);
        rc = call_k(c, 2, 2, in, bout, eb, sizeof eb);
        ok(rc != 0 && eb[0] && (generic || strstr(eb, "i64")) && oi == 0,
           "rank-0 call (%s): an i64 output view fails: rc %d, '%s'",
           names[bi], rc, eb);
        /* NULL data */
        memcpy(bad, in, sizeof bad);
        bad[1].data = NULL;
        rc = call_k(c, 2, 2, bad, out, eb, sizeof eb);
        ok(rc != 0 && eb[0] != 0, "rank-0 call (%s): NULL input data fails: "
           "rc %d, '%s'", names[bi], rc, eb);
        memcpy(bout, out, sizeof bout);
        bout[0].data = NULL;
        rc = call_k(c, 2, 2, in, bout, eb, sizeof eb);
        ok(rc != 0 && eb[0] != 0, "rank-0 call (%s): NULL output data fails: "
           "rc %d, '%s'", names[bi], rc, eb);
        /* a rank-1 view of one element */
        memcpy(bad, in, sizeof bad);
        bad[0].rank = 1;
        bad[0].shape[0] = 1;
        bad[0].strides[0] = 1;
        rc = call_k(c, 2, 2, bad, out, eb, sizeof eb);
        ok(rc != 0 && eb[0] && (generic || strstr(eb, "rank")),
           "rank-0 call (%s): a rank-1 view "
           "fails: rc %d, '%s'", names[bi], rc, eb);
        /* counts */
        rc = call_k(c, 1, 2, in, out, eb, sizeof eb);
        ok(rc != 0 && eb[0] != 0, "rank-0 call (%s): one input too few "
           "fails: rc %d, '%s'", names[bi], rc, eb);
        rc = call_k(c, 2, 1, in, out, eb, sizeof eb);
        ok(rc != 0 && eb[0] != 0, "rank-0 call (%s): one output too few "
           "fails: rc %d, '%s'", names[bi], rc, eb);
        /* and a good call after all that */
        a = -0.3;
        b = 4.0;
        rc = call_k(c, 2, 2, in, out, eb, sizeof eb);
        ok(rc == 0 && o0 == a * b + 1.5 && tap_close(o1, exp(a) - b, 1e-15),
           "rank-0 call (%s): a good call afterwards (%g, %g)", names[bi], o0,
           o1);
        be->callable_free(c);
        be->artifact_free(art);
    }
}


/* ---- 7. dtypes, wide regions, repeated outputs -------------------------- */

/* a region mixing f64, f32, i64 and bool members, whose outputs of each
 * dtype are read by vector kernels and are graph outputs (one of them
 * under two names) */
static const char *DTYPES =
    "  input a: f64\n  input s: f32\n  input k: i64\n  input x: f64[3]\n"
    "  b = gt(a, 0.0)\n"
    "  r = where(b, a, neg(a))\n"
    "  k3 = mul(k, 3)\n"
    "  m = add(s, 1.5)\n"
    "  kf = add(cast(k3, dtype=f64), r)\n"
    "  nb = and(b, lt(kf, 10.0))\n"
    "  v = add(mul(x, kf), cast(m, dtype=f64))\n"
    "  output ob = nb\n  output ok3 = k3\n  output om = m\n  output okf = kf\n"
    "  output okf2 = kf\n"
    "  output ov = v\n"
    "  output w = sum(where(nb, v, mul(x, r)))\n";

static double elem_of(const kiln_tensor *t, int64_t k)
{
    switch (t->dtype) {
    case KILN_F64: return ((double *)t->data)[k];
    case KILN_F32: return ((float *)t->data)[k];
    case KILN_I64: return (double)((int64_t *)t->data)[k];
    case KILN_I32: return ((int32_t *)t->data)[k];
    default: return ((uint8_t *)t->data)[k];
    }
}

static void test_dtypes_and_width(void)
{
    for (int sign = 0; sign < 2; sign++) {
        double a = sign ? -0.75 : 1.25, x[3] = {0.5, -2.0, 4.0};
        float sf = 0.25f;
        int64_t k = sign ? 1 : 4;
        kiln_tensor in[4] = {{KILN_F64, 0, {0}, &a}, {KILN_F32, 0, {0}, &sf},
                             {KILN_I64, 0, {0}, &k}, {KILN_F64, 1, {3}, x}};
        /* in C */
        int b = a > 0;
        double r = b ? a : -a, kf = (double)(k * 3) + r;
        float m = sf + 1.5f;
        int nb = b && kf < 10.0;
        double v[3], w = 0;
        for (int i = 0; i < 3; i++) {
            v[i] = x[i] * kf + (double)m;
            w += nb ? v[i] : x[i] * r;
        }
        double want[] = {nb, (double)(k * 3), m, kf, kf, v[0], v[1], v[2], w};
        kiln_dtype wdt[] = {KILN_BOOL, KILN_I64, KILN_F32, KILN_F64, KILN_F64,
                            KILN_F64, KILN_F64};
        for (int bi = 0; bi < n_backends; bi++) {
            kiln_function *on = compile_body(DTYPES, backends[bi], "all", NULL);
            kiln_function *off = compile_body(DTYPES, backends[bi], "none",
                                              NULL);
            kstats st = on ? kernel_stats(on, 0, 0)
                           : (kstats){0, 0, 0, 0, 0, 0};
            outs ro, rf;
            call_copy(on, in, &ro);
            call_copy(off, in, &rf);
            int good = ro.rc == 0 && rf.rc == 0 && ro.n == 7 && rf.n == 7;
            int j = 0;
            for (int i = 0; good && i < 7; i++) {
                good = ro.t[i].dtype == wdt[i] && rf.t[i].dtype == wdt[i];
                for (int64_t e = 0; good && e < numel_of(&ro.t[i]); e++, j++) {
                    double g1 = elem_of(&ro.t[i], e), g2 = elem_of(&rf.t[i], e);
                    good = g1 == g2 && tap_close(g1, want[j], 1e-12);
                    if (!good)
                        diag("output %d [%lld]: fused %.17g, unfused %.17g, "
                             "want %.17g", i, (long long)e, g1, g2, want[j]);
                }
            }
            ok(on && st.n_regions >= 1 && good,
               "dtypes (%s, a %s 0): a region of f64, f32, i64 and bool "
               "members (%d kernels) equals no passes and C %s%s",
               backends[bi], sign ? "<" : ">", st.n, ro.rc ? ro.msg : "",
               rf.rc ? rf.msg : "");
            outs_free(&ro);
            outs_free(&rf);
            kiln_function_free(on);
            kiln_function_free(off);
        }
    }
    /* a region with more views than llvm's direct rank-0 call takes
     * (256): 300 inputs, 2 outputs */
    enum { NW = 300 };
    static char body[65536];
    size_t len = 0;
    for (int i = 0; i < NW; i++)
        len += (size_t)snprintf(body + len, sizeof body - len,
                                "  input y%d: f64\n", i);
    len += (size_t)snprintf(body + len, sizeof body - len, "  output s = add(");
    for (int i = 0; i < NW; i++)
        len += (size_t)snprintf(body + len, sizeof body - len, "%ssin(y%d)",
                                i ? ", " : "", i);
    len += (size_t)snprintf(body + len, sizeof body - len,
                            ")\n  output p = mul(y0, y%d)\n", NW - 1);
    double y[NW], ws = 0;
    kiln_tensor in[NW];
    for (int i = 0; i < NW; i++) {
        y[i] = 0.01 * i - 1.0;
        in[i] = (kiln_tensor){KILN_F64, 0, {0}, &y[i]};
    }
    /* the library may sum pairwise: compare within a tolerance */
    for (int i = 0; i < NW; i++)
        ws += sin(y[i]);
    double want[2] = {ws, y[0] * y[NW - 1]};
    const char *pol = "kiln_policy: 1\nfusion:\n  max_width: 1000\n"
                      "  max_scalar_ops: 100000\n";
    for (int bi = 0; bi < n_backends; bi++) {
        kiln_function *f = compile_body(body, backends[bi], "all", pol);
        kstats st = f ? kernel_stats(f, 0, 0) : (kstats){0, 0, 0, 0, 0, 0};
        char why[512] = "";
        outs r;
        call_copy(f, in, &r);
        ok(f && st.n == 1 && st.max_width == NW &&
               outs_equal(&r, want, 2, 1e-12, why, sizeof why),
           "a region of %d inputs (%s): %d kernel, %d inputs, right %s", NW,
           backends[bi], st.n, st.max_width, why);
        outs_free(&r);
        kiln_function_free(f);
    }
}

/* ---- in-place updates with symbolic dims ---------------------------- */

/* The operand of an (inc_/set_)subtensor that nothing else reads is
 * updated in place; every reader of the result must still get the
 * result's run-time shape (found by an attack: with m: f64[r, n] the
 * readers saw a never-inferred shape, "shape (-2, -3) is too large").
 * Readers that take their shape from the result alone: exp, a slice,
 * transpose, a sum over an axis, a join. */
static void test_inplace_symbolic(void)
{
    static const char *body =
        "  input m: f64[r, n]\n"
        "  v2 = mul(m, 2.0)\n"
        "  v13 = inc_subtensor(v2[1:3], 1.0)\n"
        "  output e = exp(v13)\n"
        "  output sl = v13[0:2]\n"
        "  output tr = transpose(v13)\n"
        "  output s0 = sum(v13, axis=0)\n"
        "  w2 = mul(m, 3.0)\n"
        "  w3 = set_subtensor(w2[0], 0.5)\n"
        "  output j = join(w3, w3, axis=0)\n";
    double m[12];
    for (int k = 0; k < 12; k++)
        m[k] = 0.1 * (k + 1);
    /* v13 = 2 m, +1 on rows 1 and 2; w3 = 3 m, row 0 = 0.5 */
    double v13[12], w3[12], want[12 + 6 + 12 + 3 + 24];
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < 3; c++) {
            v13[i * 3 + c] = 2 * m[i * 3 + c] + (i == 1 || i == 2);
            w3[i * 3 + c] = i == 0 ? 0.5 : 3 * m[i * 3 + c];
        }
    int q = 0;
    for (int k = 0; k < 12; k++)
        want[q++] = exp(v13[k]);
    for (int k = 0; k < 6; k++)
        want[q++] = v13[k];
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 4; i++)
            want[q++] = v13[i * 3 + c];
    for (int c = 0; c < 3; c++)
        want[q++] = v13[c] + v13[3 + c] + v13[6 + c] + v13[9 + c];
    for (int k = 0; k < 24; k++)
        want[q++] = w3[k % 12];
    kiln_tensor in = {KILN_F64, 2, {4, 3}, m};
    for (int b = 0; b < n_backends; b++)
        for (int pass = 0; pass < 2; pass++) {
            const char *passes = pass ? "none" : "all";
            kiln_function *f = compile_body(body, backends[b], passes, NULL);
            outs o;
            call_copy(f, &in, &o);
            char why[400] = "";
            ok(outs_equal(&o, want, q, 1e-12, why, sizeof why),
               "in place, symbolic dims (%s, passes %s): every reader gets "
               "the result's shape %s", backends[b], passes, why);
            outs_free(&o);
            kiln_function_free(f);
        }
}

/* ---- 8. loops (ABI 1.5 LOOP kernels) ------------------------------------ */

/* A varying-intercept model as PyMC writes it: a gather a[idx] read by the
 * likelihood, whose gradient scatter-adds into d_a; n observations (more
 * than one 256-element block), repeated and negative indices. */
static const char *LOOPS =
    "  input mu: f64\n  input s: f64\n  input a_t: f64[4]\n"
    "  input idx: i64[n]\n  input y: f64[n]\n"
    "  a = add(mu, mul(s, a_t))\n"
    "  r = sub(y, a[idx])\n"
    "  lp = sum(mul(-0.5, square(r)))\n"
    "  output lp\n"
    "  d_mu, d_s, d_a_t = grad(lp, mu, s, a_t)\n"
    "  output d_mu\n  output d_s\n  output d_a_t\n";

/* The same in C: lp, d_mu, d_s, d_a_t[4] into w (7 values). */
static void loops_ref(double mu, double s, const double *a_t,
                      const int64_t *idx, const double *y, int n, double *w)
{
    double a[4], da[4] = {0, 0, 0, 0}, lp = 0;
    for (int j = 0; j < 4; j++)
        a[j] = mu + s * a_t[j];
    for (int i = 0; i < n; i++) {
        int64_t k = idx[i] < 0 ? idx[i] + 4 : idx[i];
        double r = y[i] - a[k];
        lp += -0.5 * r * r;
        da[k] += r;
    }
    double dmu = 0, ds = 0;
    for (int j = 0; j < 4; j++) {
        dmu += da[j];
        ds += da[j] * a_t[j];
    }
    w[0] = lp;
    w[1] = dmu;
    w[2] = ds;
    for (int j = 0; j < 4; j++)
        w[3 + j] = s * da[j];
}

/* kernels of f by kind */
static void kinds_of(const kiln_function *f, int *count /* [8] */)
{
    memset(count, 0, 8 * sizeof *count);
    for (int i = 0; i < kiln_function_n_kernels(f); i++) {
        kiln_kernel_info k;
        memset(&k, 0, sizeof k);
        k.struct_size = sizeof k;
        if (kiln_function_kernel_info(f, i, &k, NULL) == 0 &&
            k.facts.kind >= 0 && k.facts.kind < 8)
            count[k.facts.kind]++;
    }
}

static void test_loops(void)
{
    enum { N = 600 };
    static int64_t idx[N];
    static double y[N];
    double mu = 0.4, s = 1.3, a_t[4] = {0.5, -1.0, 2.0, 0.25}, want[7];
    for (int i = 0; i < N; i++) {
        idx[i] = (i * 7 + i / 5) % 8 - 4;   /* -4 .. 3, repeated */
        y[i] = sin(0.1 * i);
    }
    loops_ref(mu, s, a_t, idx, y, N, want);
    for (int bi = 0; bi < n_backends; bi++) {
        const char *be = backends[bi];
        kiln_function *on = compile_body(LOOPS, be, "all", NULL);
        kiln_function *off = compile_body(LOOPS, be, "all,-loops", NULL);
        int kon[8], koff[8];
        if (on)
            kinds_of(on, kon);
        if (off)
            kinds_of(off, koff);
        ok(on && off && kon[KILN_KERNEL_LOOP] >= 1 &&
               kon[KILN_KERNEL_GATHER] == 0 && kon[KILN_KERNEL_SCATTER] == 0 &&
               koff[KILN_KERNEL_LOOP] == 0 && koff[KILN_KERNEL_GATHER] == 1 &&
               koff[KILN_KERNEL_SCATTER] == 1 &&
               kiln_function_n_kernels(on) < kiln_function_n_kernels(off),
           "loops (%s): the gather and the scatter-add run inside loops "
           "(%d kernels, %d loops; %d without loops)", be,
           on ? kiln_function_n_kernels(on) : -1,
           on ? kon[KILN_KERNEL_LOOP] : -1,
           off ? kiln_function_n_kernels(off) : -1);
        ok(on && all_on(on, be), "loops (%s): every kernel compiled by %s",
           be, be);
        for (int pass = 0; pass < 2; pass++) {
            int n = pass ? 7 : N;   /* a shape change and back */
            double w[7];
            loops_ref(mu, s, a_t, idx, y, n, w);
            kiln_tensor in[5] = {{KILN_F64, 0, {0}, &mu},
                                 {KILN_F64, 0, {0}, &s},
                                 {KILN_F64, 1, {4}, a_t},
                                 {KILN_I64, 1, {n}, idx},
                                 {KILN_F64, 1, {n}, y}};
            outs o1, o2;
            char why[400] = "", why2[400] = "";
            call_copy(on, in, &o1);
            call_copy(off, in, &o2);
            ok(outs_equal(&o1, w, 7, 1e-12, why, sizeof why),
               "loops (%s, n = %d): equal C %s", be, n, why);
            ok(same_outs(&o1, &o2, 1e-13, why2, sizeof why2),
               "loops (%s, n = %d): loops on equal loops off %s", be, n, why2);
            outs_free(&o1);
            outs_free(&o2);
        }
        /* an index out of range fails the call with its value, and the
         * next good call is right */
        int64_t bad[N];
        memcpy(bad, idx, sizeof bad);
        bad[300] = 4;
        kiln_tensor inb[5] = {{KILN_F64, 0, {0}, &mu}, {KILN_F64, 0, {0}, &s},
                              {KILN_F64, 1, {4}, a_t}, {KILN_I64, 1, {N}, bad},
                              {KILN_F64, 1, {N}, y}};
        outs ob;
        call_copy(on, inb, &ob);
        ok(ob.rc == KILN_ERR_RUNTIME && strstr(ob.msg, "index 4 is out of "
                                               "bounds"),
           "loops (%s): index 4 of 4 is an error: %s", be, ob.msg);
        outs_free(&ob);
        bad[300] = -5;
        call_copy(on, inb, &ob);
        ok(ob.rc == KILN_ERR_RUNTIME && strstr(ob.msg, "index -5 is out of "
                                               "bounds"),
           "loops (%s): index -5 of 4 is an error: %s", be, ob.msg);
        outs_free(&ob);
        kiln_tensor in[5] = {{KILN_F64, 0, {0}, &mu}, {KILN_F64, 0, {0}, &s},
                             {KILN_F64, 1, {4}, a_t}, {KILN_I64, 1, {N}, idx},
                             {KILN_F64, 1, {N}, y}};
        char why[400] = "";
        call_copy(on, in, &ob);
        ok(outs_equal(&ob, want, 7, 1e-12, why, sizeof why),
           "loops (%s): right again after the error %s", be, why);
        outs_free(&ob);
#if COUNT_ALLOCS
        kiln_tensor out[8];
        kiln_err err = {0, ""};
        int rc = on ? kiln_function_call(on, in, out, &err) : -1;
        long before = n_allocs;
        for (int r = 0; r < 20 && rc == 0; r++)
            rc = kiln_function_call(on, in, out, &err);
        long used = n_allocs - before;
        ok(rc == 0 && used == 0, "loops (%s): no allocation in 20 "
           "steady-state calls (%ld)", be, used);
#else
        ok(1, "# SKIP allocation counting under ASan");
#endif
        kiln_function_free(on);
        kiln_function_free(off);
    }
}

/* What a loop must not merge: a value of the space that reads the
 * space's own reduction (x - mean(x)), a gather whose table is computed
 * over the same space, a scatter into an array the loop also reads
 * whole; and a reduction over part of a 2-D space with a gather along
 * it. */
static const char *LOOP_DEPS =
    "  input x: f64[n]\n  input j: i64[n]\n  input z: f64[n, 3]\n"
    "  input k: i64[n, 3]\n  input b: f64[5]\n"
    "  d = sub(x, mean(x))\n"
    "  output q = sum(square(d))\n"
    "  t = exp(x)\n"
    "  output g = sum(mul(t[j], x))\n"
    "  output u = sum(mul(b[k], z), axis=0)\n"
    "  output v = sum(z, axis=0)\n";

static void loop_deps_ref(const double *x, const int64_t *j, const double *z,
                          const int64_t *k, const double *b, int n, double *w)
{
    double m = 0, q = 0, g = 0;
    for (int i = 0; i < n; i++)
        m += x[i];
    m /= n;
    for (int i = 0; i < n; i++) {
        q += (x[i] - m) * (x[i] - m);
        g += exp(x[j[i] < 0 ? j[i] + n : j[i]]) * x[i];   /* j wraps */
    }
    w[0] = q;
    w[1] = g;
    for (int c = 0; c < 3; c++) {
        w[2 + c] = 0;
        w[5 + c] = 0;
        for (int i = 0; i < n; i++) {
            w[2 + c] += b[k[3 * i + c]] * z[3 * i + c];
            w[5 + c] += z[3 * i + c];
        }
    }
}

static void test_loop_deps(void)
{
    enum { N = 300 };
    static double x[N], z[3 * N];
    static int64_t j[N], k[3 * N];
    double b[5] = {1.5, -0.5, 2.0, 0.75, -1.25}, want[8];
    for (int i = 0; i < N; i++) {
        x[i] = cos(0.37 * i);
        j[i] = (N - 1 - i * 3) % N;
        for (int c = 0; c < 3; c++) {
            z[3 * i + c] = sin(0.01 * i + c);
            k[3 * i + c] = (i + 2 * c) % 5;
        }
    }
    loop_deps_ref(x, j, z, k, b, N, want);
    kiln_tensor in[5] = {{KILN_F64, 1, {N}, x}, {KILN_I64, 1, {N}, j},
                         {KILN_F64, 2, {N, 3}, z}, {KILN_I64, 2, {N, 3}, k},
                         {KILN_F64, 1, {5}, b}};
    for (int bi = 0; bi < n_backends; bi++) {
        const char *be = backends[bi];
        kiln_function *f = compile_body(LOOP_DEPS, be, "all", NULL);
        int kk[8];
        if (f)
            kinds_of(f, kk);
        outs o;
        char why[400] = "";
        call_copy(f, in, &o);
        ok(f && kk[KILN_KERNEL_LOOP] >= 1 && kk[KILN_KERNEL_GATHER] == 0 &&
               outs_equal(&o, want, 8, 1e-11, why, sizeof why),
           "loop dependencies (%s): mean read by its own space, a table of "
           "the same space, a 2-D gather and partial sums equal C %s "
           "(%d loops)", be, why, f ? kk[KILN_KERNEL_LOOP] : -1);
        outs_free(&o);
        kiln_function_free(f);
    }
    /* an index out of range names the gather, not the node the loop is
     * lowered at (found by an attack: the index's producer was named) */
    for (int bi = 0; bi < n_backends; bi++) {
        const char *be = backends[bi];
        kiln_function *f = compile_body(
            "  input t: f64[4]\n  input i0: i64[n]\n  input x: f64[n]\n"
            "  idx = add(i0, 3)\n  output s = sum(mul(take(t, idx), x))\n",
            be, "all", NULL);
        double tv[4] = {1, 2, 3, 4}, xv[2] = {1, 2};
        int64_t iv[2] = {0, 1};
        kiln_tensor tin[3] = {{KILN_F64, 1, {4}, tv}, {KILN_I64, 1, {2}, iv},
                              {KILN_F64, 1, {2}, xv}};
        outs o;
        call_copy(f, tin, &o);
        ok(o.rc == KILN_ERR_RUNTIME && strstr(o.msg, "(take") &&
               strstr(o.msg, "index 4 is out of bounds"),
           "loop error (%s) names the gather: %s", be, o.msg);
        outs_free(&o);
        kiln_function_free(f);
    }
    /* gradients through gathers and scatters inside loops */
    gc_check("loops: gradient of a gather model",
             "kiln 1\ngraph t\n  input mu: f64\n  input a_t: f64[3]\n"
             "  input y: f64[6]\n"
             "  const idx: i64[6] = [0, 2, 2, -1, 1, 0]\n"
             "  a = add(mu, exp(a_t))\n"
             "  r = sub(y, a[idx])\n"
             "  output cost = add(sum(mul(-0.5, square(r))), "
             "sum(log1p(square(a[idx]))))\nend\n", 1e-6);
}

int main(void)
{
    n_backends = found_backends(backends);
    test_mixed();
    test_counts_and_caps();
    test_topo();
    test_view_cache();
    test_no_alloc();
    test_scalar_call_errors();
    test_dtypes_and_width();
    test_inplace_symbolic();
    test_loops();
    test_loop_deps();
    return done_testing();
}
