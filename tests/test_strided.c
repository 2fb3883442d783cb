/*
 * test_strided.c — kernels reading strided and broadcast views (issue 27
 * part 2; docs/backends.md "Strided and broadcast views"):
 *
 *  1. graphs whose kernels read slices with offsets and steps (negative
 *     steps too), 2-D and 3-D transposes, row, column and scalar
 *     broadcasts and size-1 dims, in elementwise kernels, fused regions
 *     (several outputs), reductions along a kept axis and along the row,
 *     and diamonds' transformed data (a slice centred by its column
 *     means), f64 and i64, with all passes and with none: under every
 *     backend this build has, each equals the interpreter bit for bit
 *     (the same order of arithmetic), at two sizes (short rows, and rows
 *     past the llvm backend's splat threshold);
 *  2. llvm: those that the backend's own loop nests run (backends/llvm/
 *     nest.c; reductions along rows of one block included) do not touch
 *     the interpreter's walk: its counter kiln_llvm_walks() does not move
 *     over their calls; a scalar broadcast along one long row (splatted
 *     on the walk by design) does move it (the counter counts).
 */
#define _GNU_SOURCE
#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "found_backends.h"

#define MAX_OUT 4
#include "call_outs.h"

/* the declarations, R, C and C - 1 filled in */
static const char decls[] =
    "  input X: f64[%1$lld, %2$lld]\n  input A: f64[%3$lld, %1$lld]\n"
    "  input T: f64[3, %1$lld, 5]\n  input m: f64[%3$lld]\n"
    "  input c: f64[%1$lld, 1]\n  input s: f64\n  input u: f64[1, %3$lld]\n"
    "  input I: i64[%1$lld, %2$lld]\n";

static kiln_function *compile_body(const char *body, const int64_t *rc,
                                   const char *backend, const char *passes,
                                   char *msg, size_t nmsg)
{
    char head[512];
    snprintf(head, sizeof head, decls, (long long)rc[0], (long long)rc[1],
             (long long)rc[1] - 1);
    return compile_graph_text(head, body, backend, passes, msg, nmsg);
}

/* ---- the cases ----------------------------------------------------------
 * Inputs, always all of them in this order (R rows, C columns):
 *   X: f64[R, C]   A: f64[C-1, R]   T: f64[3, R, 5]   m: f64[C-1]
 *   c: f64[R, 1]   s: f64          u: f64[1, C-1]    I: i64[R, C]
 * (decls, put in front of each case's statements).
 * `nest`: llvm runs every kernel of the case in its own nests at both
 * sizes (the walk counter must not move): 1 with all passes and with
 * none, 2 with all passes only (with none, the 3-D permutation is a copy
 * kernel of its own and `mul` broadcasts a scalar along one row of 555:
 * splatted on the walk, by design); 0: not asserted (a broadcast along
 * rows of 64 or more elements is splatted on the walk); -1: the walk runs
 * it (by design: a long broadcast row) and the counter must move. */

typedef struct scase {
    const char *name;
    const char *body;
    int nest;
} scase;

static const scase cases[] = {
    {"slice offset, row broadcast (diamonds' centring)",
     "  output y = sub(X[:, 1:], m)\n", 1},
    {"steps on both axes",
     "  output y = mul(X[1::3, ::2], 1.5)\n", 1},
    {"negative steps, row broadcast of a reversed vector",
     "  output y = add(X[::-1, :0:-1], m[::-1])\n", 1},
    {"2-D transpose, row broadcast",
     "  output y = add(transpose(A), m)\n", 1},
    {"3-D permutation",
     "  output y = mul(transpose(T, axes=[2, 0, 1]), s)\n", 2},
    {"3-D permutation of a stepped slice",
     "  output y = sub(transpose(T[:, ::2, 1:], axes=[1, 2, 0]), 0.25)\n", 1},
    {"column broadcast",
     "  output y = sub(X[:, 1:], c)\n", 0},
    {"scalar and size-1 dims (outer product of u and c)",
     "  output y = add(mul(u, c), s)\n", 0},
    {"fused region, two outputs",
     "  d = sub(X[:, 1:], m)\n  output y = exp(mul(d, 0.5))\n"
     "  output z = add(mul(d, d), transpose(A))\n", 1},
    {"column means of a slice (reduction, kept axis)",
     "  output y = mean(X[:, 1:], axis=0)\n", 1},
    {"diamonds' transformed data",
     "  X1 = X[:, 1:]\n  output y = sub(X1, mean(X1, axis=0))\n", 1},
    {"fused reduction over a transpose, kept axis",
     "  output y = sum(exp(sub(transpose(A), m)), axis=0)\n", 1},
    {"reduction along the row of a stepped slice",
     "  output y = sum(X[::2, 1:], axis=1)\n", 1},
    {"max over the middle axis of a permutation",
     "  output y = max(transpose(T, axes=[1, 0, 2]), axis=0)\n", 1},
    {"i64 slice and row broadcast",
     "  output y = add(mul(I[:, 1:], 3), I[2, 1:])\n", 1},
    {"a scalar broadcast along one long row (splatted on the walk)",
     "  output y = mul(X, s)\n", -1},
};

#define NCASE (sizeof cases / sizeof cases[0])

enum { NIN = 8 };

typedef struct inputs {
    kiln_tensor t[NIN];
    void *mem[NIN];
} inputs;

static void inputs_make(inputs *in, int64_t R, int64_t C, int seed)
{
    const int64_t shapes[NIN][3] = {{R, C}, {C - 1, R}, {3, R, 5}, {C - 1},
                                    {R, 1}, {0}, {1, C - 1}, {R, C}};
    const int ranks[NIN] = {2, 2, 3, 1, 2, 0, 2, 2};
    for (int i = 0; i < NIN; i++) {
        kiln_tensor *t = &in->t[i];
        memset(t, 0, sizeof *t);
        t->dtype = i == 7 ? KILN_I64 : KILN_F64;
        t->rank = ranks[i];
        int64_t n = 1;
        for (int d = 0; d < t->rank; d++)
            n *= t->shape[d] = shapes[i][d];
        if (i == 7) {
            int64_t *v = malloc(sizeof *v * (size_t)n);
            for (int64_t q = 0; q < n; q++)
                v[q] = (q * 7919 + seed) % 2001 - 1000;
            t->data = in->mem[i] = v;
        } else {
            double *v = malloc(sizeof *v * (size_t)n);
            for (int64_t q = 0; q < n; q++)
                v[q] = (double)((q * 37 + seed * 11 + i * 5) % 101) / 17.0 - 2.5 +
                       1e-3 * (double)(i + 1);
            t->data = in->mem[i] = v;
        }
    }
}

static void inputs_free(inputs *in)
{
    for (int i = 0; i < NIN; i++)
        free(in->mem[i]);
}

/* The llvm plugin's walk counter, when the plugin the host loaded is the
 * build tree's (the same file: dlopen finds the loaded object). */
typedef uint64_t (*walks_fn)(void);

static walks_fn llvm_walks(void)
{
    const char *top = getenv("KILN_BUILDDIR");
    char path[4200];
    snprintf(path, sizeof path, "%s/backends/llvm/.libs/llvm.so", top ? top : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return NULL;
    void *sym = dlsym(h, "kiln_llvm_walks");
    walks_fn f = NULL;
    if (sym)
        memcpy(&f, &sym, sizeof f);
    return f;
}

int main(void)
{
    const char *bk[3];
    int nb = found_backends(bk);
    /* two sizes: rows of 8 .. 24 (short: no splat on llvm) and of 100
     * (past its splat threshold) */
    const int64_t sizes[2][2] = {{37, 25}, {23, 101}};
    static const char *const passes[2] = {"all", "none"};
    walks_fn walks = NULL;
    for (size_t c = 0; c < NCASE; c++) {
        for (int p = 0; p < 2; p++) {
            for (int z = 0; z < 2; z++) {
                char msg[512] = "";
                kiln_function *ref = compile_body(cases[c].body, sizes[z], "interp",
                                                  passes[p], msg, sizeof msg);
                if (!ref) {
                    ok(0, "%s (%s): interp compiles: %s", cases[c].name,
                       passes[p], msg);
                    continue;
                }
                inputs in;
                inputs_make(&in, sizes[z][0], sizes[z][1], (int)c + 3 * z);
                outs want;
                call_copy(ref, in.t, &want);
                for (int b = 1; b < nb; b++) {
                    kiln_function *f = compile_body(cases[c].body, sizes[z], bk[b],
                                                    passes[p], msg, sizeof msg);
                    if (!f) {
                        ok(0, "%s (%s): %s compiles: %s", cases[c].name,
                           passes[p], bk[b], msg);
                        continue;
                    }
                    int llvm = strcmp(bk[b], "llvm") == 0;
                    if (llvm && !walks)
                        walks = llvm_walks();
                    outs got, again;
                    uint64_t w0 = walks ? walks() : 0;
                    call_copy(f, in.t, &got);
                    call_copy(f, in.t, &again);   /* prepared calls */
                    uint64_t w1 = walks ? walks() : 0;
                    char why[256] = "";
                    ok(outs_same_bits(&want, &got, why, sizeof why) &&
                           outs_same_bits(&want, &again, why, sizeof why),
                       "%s (%s, %lldx%lld): %s equals interp bit for bit%s%s",
                       cases[c].name, passes[p], (long long)sizes[z][0],
                       (long long)sizes[z][1], bk[b], *why ? ": " : "", why);
                    if (llvm && walks && (cases[c].nest == 1 ||
                                          (cases[c].nest == 2 && p == 0)))
                        ok(w1 == w0, "%s (%s, %lldx%lld): llvm ran its own loop "
                           "nests (walked %llu calls)", cases[c].name, passes[p],
                           (long long)sizes[z][0], (long long)sizes[z][1],
                           (unsigned long long)(w1 - w0));
                    if (llvm && walks && cases[c].nest == -1)
                        ok(w1 > w0, "%s (%s, %lldx%lld): walked, and counted "
                           "(%llu calls)", cases[c].name, passes[p],
                           (long long)sizes[z][0], (long long)sizes[z][1],
                           (unsigned long long)(w1 - w0));
                    outs_free(&got);
                    outs_free(&again);
                    kiln_function_free(f);
                }
                outs_free(&want);
                inputs_free(&in);
                kiln_function_free(ref);
            }
        }
    }
    int have_llvm = 0;
    for (int b = 0; b < nb; b++)
        have_llvm |= strcmp(bk[b], "llvm") == 0;
    if (have_llvm && !walks)
        ok(0, "llvm: the loaded plugin is the build tree's, with "
           "kiln_llvm_walks");
    return done_testing();
}
