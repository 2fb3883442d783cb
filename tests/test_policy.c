/*
 * test_policy.c — backend policies (core/policy/policy.c, docs/policy.md):
 * parsing and every error with its line and column, every matcher, rule
 * precedence and the default, the cost model, the knobs, the selection
 * order, fallback when a plugin is missing or refuses a kernel, an
 * explicit backend overriding the policy, and cache keys that do not
 * depend on the policy.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <kiln/policy.h>
#include <kiln/cache.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "guard.h"

static kiln_policy *load(const char *text, kiln_err *err)
{
    return kiln_policy_load_string(text, strlen(text), "t.yaml", err);
}

static const char *choose(const kiln_policy *p, const char *op, int kind,
                          int width, int ops, int64_t elems, double cost,
                          int *rule)
{
    kiln_kernel_facts f;
    memset(&f, 0, sizeof f);
    f.struct_size = sizeof f;
    f.op = op;
    f.label = op;
    f.kind = kind;
    f.width = width;
    f.scalar_ops = ops;
    f.elements = elems;
    f.work_elements = elems;
    f.cost = cost;
    const char *b = NULL;
    int r = kiln_policy_choose(p, &f, &b);
    if (rule)
        *rule = r;
    return b;
}

static void test_matchers(void)
{
    kiln_err err = {0, ""};
    kiln_policy *p = load(
        "kiln_policy: 1\n"
        "backends: [llvm, tcc]\n"
        "default: tcc\n"
        "rules:\n"
        "  - name: exps\n"
        "    when: {op: [exp, log]}\n"
        "    use: llvm\n"
        "  - name: joins\n"
        "    when: {op: join}\n"
        "    use: interp\n"
        "  - name: wide\n"
        "    when: {width: {gt: 64}}\n"
        "    use: interp\n"
        "  - name: band\n"
        "    when: {width: {ge: 3, le: 4}}\n"
        "    use: llvm\n"
        "  - name: exact\n"
        "    when: {width: {eq: 7}}\n"
        "    use: llvm\n"
        "  - name: costly\n"
        "    when: {cost: {ge: 1000000}}\n"
        "    use: llvm\n"
        "  - name: big\n"
        "    when: {elements: {gt: 5000}, scalar_ops: {lt: 10}}\n"
        "    use: llvm\n"
        "  - name: fusedprog\n"
        "    when: {op: fused}\n"
        "    use: llvm\n"
        "  - name: reductions\n"
        "    when: {op: reduce, scalar_ops: {ge: 3}}\n"
        "    use: interp\n",
        &err);
    ok(p != NULL, "a policy with every matcher loads %s",
       p ? "" : err.message);
    if (!p)
        return;
    ok(kiln_policy_n_backends(p) == 3 &&
       !strcmp(kiln_policy_backend(p, 2), "interp"),
       "interp is appended to the chain");
    ok(kiln_policy_n_rules(p) == 9 &&
       !strcmp(kiln_policy_rule_name(p, 0), "exps"), "rules and names");
    int r;
    const char *b = choose(p, "exp", KILN_KERNEL_ELEMWISE, 1, 2, 10, 10, &r);
    ok(!strcmp(b, "llvm") && r == 0, "op list matches exp");
    b = choose(p, "join", KILN_KERNEL_JOIN, 100, 0, 10, 10, &r);
    ok(!strcmp(b, "interp") && r == 1,
       "first matching rule wins (join before wide)");
    b = choose(p, "add", KILN_KERNEL_ELEMWISE, 65, 2, 10, 10, &r);
    ok(!strcmp(b, "interp") && r == 2, "width gt 64 matches 65");
    b = choose(p, "add", KILN_KERNEL_ELEMWISE, 64, 2, 10, 10, &r);
    ok(!strcmp(b, "tcc") && r == -1, "width 64 is not gt 64: the default");
    b = choose(p, "add", KILN_KERNEL_ELEMWISE, 3, 2, 10, 10, &r);
    ok(r == 3, "ge 3 holds at 3");
    b = choose(p, "add", KILN_KERNEL_ELEMWISE, 4, 2, 10, 10, &r);
    ok(r == 3, "le 4 holds at 4");
    b = choose(p, "add", KILN_KERNEL_ELEMWISE, 5, 2, 10, 10, &r);
    ok(r == -1, "le 4 fails at 5");
    b = choose(p, "add", KILN_KERNEL_ELEMWISE, 7, 2, 10, 10, &r);
    ok(r == 4, "eq 7");
    b = choose(p, "add", KILN_KERNEL_ELEMWISE, 2, 2, 10, 1e6, &r);
    ok(r == 5 && !strcmp(b, "llvm"), "cost ge 1e6");
    b = choose(p, "add", KILN_KERNEL_ELEMWISE, 2, 2, 10, 999999, &r);
    ok(r == -1, "cost below the bound");
    b = choose(p, "add", KILN_KERNEL_ELEMWISE, 2, 9, 5001, 10, &r);
    ok(r == 6, "elements and scalar_ops both hold");
    b = choose(p, "add", KILN_KERNEL_ELEMWISE, 2, 10, 5001, 10, &r);
    ok(r == -1, "one matcher of two fails: no match");
    b = choose(p, "add", KILN_KERNEL_ELEMWISE, 2, 2, -1, 10, &r);
    ok(r == -1, "symbolic elements use symbolic_elements (1024 <= 5000)");
    b = choose(p, "fused_add_exp", KILN_KERNEL_ELEMWISE, 2, 20, 1, 10, &r);
    ok(r == 7, "op: fused matches a fused kernel");
    b = choose(p, "sum", KILN_KERNEL_REDUCE, 1, 3, 1, 10, &r);
    ok(r == 8, "op: reduce matches the kernel kind");
    b = choose(p, "sum", KILN_KERNEL_REDUCE, 1, 2, 1, 10, &r);
    ok(r == -1 && !strcmp(b, "tcc"), "default when nothing matches");
    kiln_policy_free(p);

    /* symbolic_elements is a knob of the cost model */
    p = load("kiln_policy: 1\ncost_model: {symbolic_elements: 100000}\n"
             "rules:\n  - when: {elements: {gt: 5000}}\n    use: interp\n",
             &err);
    ok(p && (choose(p, "add", 1, 1, 1, -1, 1, &r), r == 0),
       "symbolic elements: the policy's symbolic_elements");
    kiln_policy_free(p);
}

static void test_cost(void)
{
    kiln_err err = {0, ""};
    kiln_instr prog[3] = {{KILN_I_LOAD, KILN_F64, 0, 0, -1, -1, 0},
                          {KILN_I_EXP, KILN_F64, 0, 0, -1, -1, 0},
                          {KILN_I_ADD, KILN_F64, 0, 1, 1, -1, 0}};
    kiln_kernel k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    k.kind = KILN_KERNEL_ELEMWISE;
    k.n_instrs = 3;
    k.instrs = prog;
    /* element 1 + load 0 + exp 10 + add 1 = 12 per element */
    ok(kiln_policy_cost(NULL, &k, 100) == 1200, "cost: 100 x (1+0+10+1)");
    ok(kiln_policy_cost(NULL, &k, -1) == 12 * 1024.0,
       "cost: symbolic sizes count 1024 elements");
    kiln_policy *p = load("kiln_policy: 1\ncost_model:\n  weights: {exp: 30}"
                          "\n  symbolic_elements: 10\n", &err);
    ok(p && kiln_policy_cost(p, &k, 100) == 3200 &&
       kiln_policy_cost(p, &k, -1) == 320, "cost: weights and "
       "symbolic_elements from the policy %s", p ? "" : err.message);
    k.kind = KILN_KERNEL_GATHER;
    ok(kiln_policy_cost(NULL, &k, 10) == 20, "cost: gather 2 per element");
    ok(kiln_policy_compile_ms(NULL, "llvm", 0, 0) > 50 &&
       kiln_policy_compile_ms(NULL, "tcc", 0, 0) < 1 &&
       kiln_policy_compile_ms(NULL, "interp", 0, 0) < 0.1,
       "compile estimates: llvm > 50 ms, tcc < 1 ms, interp < 0.1 ms");
    ok(kiln_policy_call_ns(NULL, "llvm", 1e6) <
       kiln_policy_call_ns(NULL, "interp", 1e6), "llvm runs faster");
    kiln_policy_free(p);
    /* pays_off: llvm for heavy kernels only */
    p = load("kiln_policy: 1\nbackends: [llvm]\nrules:\n"
             "  - when: {pays_off: llvm}\n    use: llvm\n", &err);
    int r;
    ok(p && (choose(p, "add", 1, 2, 4, 1000000, 1e7, &r), r == 0),
       "pays_off: llvm at 1e7 per call");
    ok(p && (choose(p, "add", 1, 2, 4, 100, 400, &r), r == -1),
       "pays_off: not llvm at 400 per call");
    kiln_policy_free(p);
    p = load("kiln_policy: 1\nbackends: [llvm]\ncost_model:\n"
             "  expected_calls: 1e9\nrules:\n"
             "  - when: {pays_off: llvm}\n    use: llvm\n", &err);
    ok(p && (choose(p, "add", 1, 2, 4, 100, 400, &r), r == 0),
       "pays_off: llvm at 400 per call over 1e9 calls");
    kiln_policy_free(p);
}

static void test_knobs(void)
{
    kiln_err err = {0, ""};
    kiln_policy *p = load(
        "kiln_policy: 1\n"
        "fusion: {max_width: 16, max_scalar_ops: 99}\n"
        "constants: {promote_bytes: 4096}\n"
        "llvm: {opt_level: 3, fast_math: true}\n"
        "cache: {enabled: false, dir: null, max_size: 512M, "
        "read_only: null}\n"
        "passes: [canonicalize, fold, cse, fuse]\n", &err);
    ok(p != NULL, "knobs parse %s", p ? "" : err.message);
    kiln_policy_knobs k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    ok(p && kiln_policy_get_knobs(p, &k) == 0, "get_knobs");
    ok(k.fusion_max_width == 16 && k.fusion_max_scalar_ops == 99,
       "fusion knobs");
    ok(k.promote_const_bytes == 4096, "promote_bytes");
    ok(k.llvm_opt_level == 3 && k.llvm_fast_math == 1, "llvm knobs");
    ok(k.cache_enabled == 0 && !k.cache_dir && k.cache_max_bytes == 512LL << 20
       && k.cache_read_only && !k.cache_read_only[0], "cache knobs");
    ok(k.passes_set && k.passes[3] && !strcmp(k.passes[3], "fuse") &&
       !k.passes[4], "passes");
    kiln_policy_free(p);
    p = load("kiln_policy: 1\n", &err);
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    ok(p && kiln_policy_get_knobs(p, &k) == 0 && k.fusion_max_width == 256 &&
       k.fusion_max_scalar_ops == 1024 &&
       k.fusion_max_outputs == 256 && k.promote_const_bytes == 1024 &&
       k.llvm_opt_level == 2 && k.cache_enabled == 1 && !k.cache_dir &&
       k.cache_max_bytes == 1LL << 30 && !k.passes_set && !k.passes[0],
       "knob defaults");
    ok(p && kiln_policy_n_backends(p) == 1, "no backends: [interp]");
    ok(k.blas_gemv == 0 && k.blas_loop_max_cols[0] == -1 &&
       k.blas_loop_max_cols[1] == -1, "blas defaults: auto, the built-in "
       "table (-1)");
    kiln_policy_free(p);
    /* blas: (issue 27): the choice between BLAS and kiln's gemv loop */
    static const struct { const char *yaml; int mode; int64_t c0, c1; }
        bl[] = {
        {"blas: {gemv: blas}\n", 1, -1, -1},
        {"blas: {gemv: loop}\n", 2, -1, -1},
        {"blas: {gemv: auto, loop_max_cols: 0, loop_max_cols_t: 512}\n", 0,
         0, 512},
        {"blas: {loop_max_cols_t: 7}\n", 0, -1, 7},
    };
    for (size_t i = 0; i < sizeof bl / sizeof bl[0]; i++) {
        char y[256];
        snprintf(y, sizeof y, "kiln_policy: 1\n%s", bl[i].yaml);
        p = load(y, &err);
        memset(&k, 0, sizeof k);
        k.struct_size = sizeof k;
        ok(p && kiln_policy_get_knobs(p, &k) == 0 && k.blas_gemv == bl[i].mode
           && k.blas_loop_max_cols[0] == bl[i].c0
           && k.blas_loop_max_cols[1] == bl[i].c1, "knobs of %.*s",
           (int)strlen(bl[i].yaml) - 1, bl[i].yaml);
        kiln_policy_free(p);
    }
    p = load("---\nkiln_policy: 1\n...\n---\n", &err);
    ok(p != NULL, "markers and an empty second document are accepted (%s)",
       p ? "" : err.message);
    kiln_policy_free(p);
    ok(kiln_policy_get_knobs(NULL, &k) == KILN_ERR_ARG, "get_knobs(NULL)");
}

/* 1 when the NULL-terminated list v is exactly the n names given */
static int strv_is(const char *const *v, int n, ...)
{
    va_list ap;
    va_start(ap, n);
    int same = v != NULL;
    for (int i = 0; same && i < n; i++)
        same = v[i] && !strcmp(v[i], va_arg(ap, const char *));
    va_end(ap);
    return same && !v[n];
}

/* The shipped policies, read from the source tree's conf/. */
static const char *const confs[] = {"default.yaml", "fastest-start.yaml",
                                    "fastest-runtime.yaml",
                                    "wide-models.yaml"};
#define N_CONFS (int)(sizeof confs / sizeof confs[0])

static kiln_policy *load_conf(int i, kiln_err *err)
{
    char path[1024];
    const char *src = getenv("KILN_SRCDIR") ? getenv("KILN_SRCDIR") : ".";
    snprintf(path, sizeof path, "%s/conf/%s", src, confs[i]);
    return kiln_policy_load_file(path, err);
}

/* Load `text` and fill *k; returns the policy (which owns k's strings;
 * the caller frees it), or NULL with the error shown. */
static kiln_policy *tier_knobs(const char *text, kiln_policy_knobs *k)
{
    kiln_err err = {0, ""};
    kiln_policy *p = load(text, &err);
    memset(k, 0, sizeof *k);
    k->struct_size = sizeof *k;
    if (!p)
        diag("%s", err.message);
    else if (kiln_policy_get_knobs(p, k) != 0) {
        diag("get_knobs failed");
        kiln_policy_free(p);
        p = NULL;
    }
    return p;
}

static void test_tiers(void)
{
    kiln_policy_knobs k;
    kiln_policy *p;
    /* no `tiers:`: off, and the header's defaults */
    p = tier_knobs("kiln_policy: 1\n", &k);
    ok(p && k.tiers_enabled == 0 && strv_is(k.tier0, 2, "interp", "tcc") &&
       k.tier1 && !strcmp(k.tier1, "llvm") && k.tier_threads == 0 &&
       k.tier_budget == 0.1 && k.tier_ratio == 0.1 &&
       k.tier_compile_ms == 10 && k.tier_compile_ms_per_op == 0.25 &&
       k.tier_compile_ms_per_input == 0.15 && k.tier_min_gain_ns == 20 &&
       k.tier_sample_every == 64, "tiers: off without a section; defaults");
    kiln_policy_free(p);
    /* a section without `enabled` means on */
    p = tier_knobs("kiln_policy: 1\ntiers: {}\n", &k);
    ok(p && k.tiers_enabled == 1 && strv_is(k.tier0, 2, "interp", "tcc") &&
       !strcmp(k.tier1, "llvm") && k.tier_sample_every == 64,
       "tiers: {} is on, with the defaults");
    kiln_policy_free(p);
    p = tier_knobs("kiln_policy: 1\ntiers:\n", &k);
    ok(p && k.tiers_enabled == 1, "tiers: with no value is on");
    kiln_policy_free(p);
    p = tier_knobs("kiln_policy: 1\ntiers: {enabled: false}\n", &k);
    ok(p && k.tiers_enabled == 0, "tiers: enabled: false is off");
    kiln_policy_free(p);
    /* every key read back */
    p = tier_knobs("kiln_policy: 1\n"
                   "tiers:\n"
                   "  enabled: true\n"
                   "  tier0: [tcc, interp, my_jit]\n"
                   "  tier1: gpu2\n"
                   "  threads: 64\n"
                   "  ratio: 1.5e-1\n"
                   "  min_gain_ns: 0\n"
                   "  sample_every: 1000000\n", &k);
    ok(p && k.tiers_enabled == 1 &&
       strv_is(k.tier0, 3, "tcc", "interp", "my_jit") && k.tier1 &&
       !strcmp(k.tier1, "gpu2") && k.tier_threads == 64 &&
       k.tier_ratio == 0.15 && k.tier_budget == 0.15 &&
       k.tier_min_gain_ns == 0 && k.tier_sample_every == 1000000,
       "tiers: every key read back (backends need not be in the chain; "
       "the old name ratio sets budget)");
    kiln_policy_free(p);
    p = tier_knobs("kiln_policy: 1\n"
                   "tiers: {budget: 2.5, compile_ms: 0, compile_ms_per_op: "
                   "1e-3, compile_ms_per_input: 7}\n", &k);
    ok(p && k.tier_budget == 2.5 && k.tier_ratio == 2.5 &&
       k.tier_compile_ms == 0 && k.tier_compile_ms_per_op == 1e-3 &&
       k.tier_compile_ms_per_input == 7 && k.tier_preload == 0,
       "tiers: budget and the compile model read back; preload off");
    kiln_policy_free(p);
    p = tier_knobs("kiln_policy: 1\ntiers: {preload: true}\n", &k);
    ok(p && k.tier_preload == 1, "tiers: preload: true read back");
    kiln_policy_free(p);
    p = tier_knobs("kiln_policy: 1\n"
                   "tiers: {tier0: interp, tier1: tcc, threads: 0, "
                   "ratio: 3, min_gain_ns: 2.5, sample_every: 1}\n", &k);
    ok(p && strv_is(k.tier0, 1, "interp") && !strcmp(k.tier1, "tcc") &&
       k.tier_threads == 0 && k.tier_ratio == 3 &&
       k.tier_min_gain_ns == 2.5 && k.tier_sample_every == 1,
       "tiers: one name for tier0, the lower bounds");
    kiln_policy_free(p);
    p = tier_knobs("kiln_policy: 1\n"
                   "tiers: {enabled: false, tier0: [llvm], tier1: tcc}\n",
                   &k);
    ok(p && k.tiers_enabled == 0 && strv_is(k.tier0, 1, "llvm") &&
       !strcmp(k.tier1, "tcc"), "tiers: off, the other keys still read");
    kiln_policy_free(p);
    /* a caller built before kiln 0.3: nothing past fusion_max_outputs */
    {
        kiln_err err = {0, ""};
        p = load("kiln_policy: 1\ntiers: {threads: 3}\n", &err);
        kiln_policy_knobs old;
        memset(&old, 0x5a, sizeof old);
        old.struct_size = offsetof(kiln_policy_knobs, fusion_max_outputs) +
                          sizeof(int);
        unsigned char tail[sizeof old];
        memset(tail, 0x5a, sizeof tail);
        size_t off = offsetof(kiln_policy_knobs, tiers_enabled);
        ok(p && kiln_policy_get_knobs(p, &old) == 0 &&
           old.fusion_max_outputs == 256 &&
           !memcmp((unsigned char *)&old + off, tail, sizeof old - off),
           "get_knobs: an older struct_size leaves the tier fields alone");
        kiln_policy_free(p);
    }

    /* the shipped policies: default.yaml has tiers on with the header's
     * defaults, the single-tier trade-offs have none */
    for (int i = 0; i < N_CONFS; i++) {
        kiln_err err = {0, ""};
        p = load_conf(i, &err);
        memset(&k, 0, sizeof k);
        k.struct_size = sizeof k;
        int got = p && kiln_policy_get_knobs(p, &k) == 0;
        if (i == 0)
            ok(got && k.tiers_enabled == 1 &&
               strv_is(k.tier0, 2, "interp", "tcc") &&
               !strcmp(k.tier1, "llvm") && k.tier_threads == 0 &&
               k.tier_budget == 0.1 && k.tier_compile_ms == 10 &&
               k.tier_compile_ms_per_op == 0.25 &&
               k.tier_compile_ms_per_input == 0.15 &&
               k.tier_min_gain_ns == 20 && k.tier_sample_every == 64,
               "conf/default.yaml: tiers on, the defaults %s",
               p ? "" : err.message);
        else
            ok(got && k.tiers_enabled == 0, "conf/%s: no tiers %s",
               confs[i], p ? "" : err.message);
        kiln_policy_free(p);
    }
    /* the installed default (what kiln_compile uses) */
    const char *d = kiln_policy_default_path();
    kiln_err err = {0, ""};
    p = d ? kiln_policy_load_file(d, &err) : NULL;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    ok(p && kiln_policy_get_knobs(p, &k) == 0 && k.tiers_enabled == 1,
       "the installed default policy has tiers on (%s)",
       d ? d : "none installed");
    kiln_policy_free(p);
}

static void test_errors(void)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"kiln_policy: 1\nbackend: [tcc]\n",
         "t.yaml:2:1: policy: unknown key 'backend'"},
        {"kiln_policy: 1\nrules:\n  - when: {widht: {gt: 3}}\n"
         "    use: interp\n",
         "t.yaml:3:12: when: unknown key 'widht'"},
        {"kiln_policy: 1\nrules:\n  - when: {width: {gt: \"3\"}}\n"
         "    use: interp\n",
         "t.yaml:3:24: gt: expected a number, got a quoted string"},
        {"kiln_policy: 1\nrules:\n  - when: {width: {gt: many}}\n"
         "    use: interp\n",
         "t.yaml:3:24: gt: expected a number, got 'many'"},
        {"kiln_policy: 1\nrules:\n  - when: {width: {over: 3}}\n"
         "    use: interp\n",
         "t.yaml:3:20: bad comparison 'over'"},
        {"kiln_policy: 1\nrules:\n  - when: {width: {gt: 8, lt: 4}}\n"
         "    use: interp\n",
         "t.yaml:3:12: width: bad comparison: no value is > 8 and < 4"},
        {"kiln_policy: 1\nrules:\n  - when: {width: {gt: 1, ge: 2}}\n"
         "    use: interp\n",
         "t.yaml:3:27: bad comparison: two lower bounds"},
        /* counts are whole numbers >= 0 (found by an attack) */
        {"kiln_policy: 1\nrules:\n  - when: {width: {gt: 2, lt: 3}}\n"
         "    use: interp\n",
         "t.yaml:3:12: width: bad comparison: no count"},
        {"kiln_policy: 1\nrules:\n  - when: {elements: {lt: 0}}\n"
         "    use: interp\n",
         "t.yaml:3:12: elements: bad comparison: no count"},
        /* the reader's errors carry the character's position */
        {"kiln_policy: 1\n\n\n\nbackends: [interp] \x01\n",
         "t.yaml:5:20: YAML: control characters are not allowed"},
        {"kiln_policy: 1\nrules:\n  - when: {width: 3}\n    use: interp\n",
         "t.yaml:3:19: width: expected a comparison"},
        {"kiln_policy: 1\nbackends: [tcc]\nrules:\n  - use: llvm\n",
         "t.yaml:4:10: use: unknown backend 'llvm' (not in backends: [tcc, "
         "interp])"},
        {"kiln_policy: 1\ndefault: llvm\n",
         "t.yaml:2:10: default: unknown backend 'llvm'"},
        {"kiln_policy: 1\nbackends: [LLVM]\n",
         "t.yaml:2:12: backends: bad backend name 'LLVM'"},
        {"kiln_policy: 1\nbackends: [tcc, tcc]\n",
         "t.yaml:2:17: backends: 'tcc' is listed twice"},
        {"kiln_policy: 1\nbackends: tcc\n",
         "t.yaml:2:11: backends: expected a list, got a scalar"},
        {"backends: [tcc]\n", "t.yaml:1:1: missing 'kiln_policy: 1'"},
        {"kiln_policy: 2\n",
         "t.yaml:1:14: kiln_policy: schema version 2 is not supported"},
        {"kiln_policy: 1\nrules:\n  - when: {op: [ad]}\n    use: interp\n",
         "t.yaml:3:17: op: unknown op 'ad'"},
        {"kiln_policy: 1\nrules:\n  - when: {op: add}\n",
         "t.yaml:3:5: rule 1: no 'use:'"},
        {"kiln_policy: 1\nrules:\n  - when: {pays_off: gpu}\n"
         "    use: interp\n",
         "t.yaml:3:22: pays_off: no cost model for backend 'gpu'"},
        {"kiln_policy: 1\nllvm: {opt_level: 4}\n",
         "t.yaml:2:19: opt_level: expected an integer from 1 to 3, got '4'"},
        {"kiln_policy: 1\nllvm: {fast_math: maybe}\n",
         "t.yaml:2:19: fast_math: expected true or false, got 'maybe'"},
        {"kiln_policy: 1\ncache: {max_size: lots}\n",
         "t.yaml:2:19: max_size: expected a size in bytes"},
        /* an alias reuses a node: the reader would copy it per use (a
         * 1 MiB policy took 6 GB); anchors are refused */
        {"kiln_policy: 1\nrules:\n  - use: interp\n    when: {op: &o [add]}\n"
         "  - use: interp\n    when: {op: *o}\n",
         "t.yaml:4:16: YAML anchors and aliases are not supported in a "
         "policy"},
        /* a NUL byte in a key is not cut off silently */
        {"kiln_policy: 1\ncache: {\"enabled\\0junk\": true}\n",
         "t.yaml:2:9: cache: a NUL byte in a key"},
        /* control bytes of the file are escaped in the message */
        {"kiln_policy: 1\n\"\\e]0;x\\a\": 1\n",
         "t.yaml:2:1: policy: unknown key '\\x1b]0;x\\x07'"},
        /* a policy may come with a model: it never names a directory
         * (issue 13: a model folder shipped a "cache" of forged code) */
        {"kiln_policy: 1\ncache: {dir: /tmp/kc}\n",
         "t.yaml:2:9: cache.dir: a policy may not name a directory"},
        {"kiln_policy: 1\ncache: {read_only: [.]}\n",
         "t.yaml:2:9: cache.read_only: a policy may not name a directory"},
        {"kiln_policy: 1\ncache: {read_only: \"\"}\n",
         "t.yaml:2:9: cache.read_only: a policy may not name a directory"},
        {"kiln_policy: 1\ncache:\n  read_only: [\"~\"]\n",
         "t.yaml:3:3: cache.read_only: a policy may not name a directory"},
        {"kiln_policy: 1\npasses: [fold, inline]\n",
         "t.yaml:2:16: passes: unknown pass 'inline'"},
        {"kiln_policy: 1\nfusion: {max_width: -1}\n",
         "t.yaml:2:21: max_width: expected an integer from 0"},
        {"kiln_policy: 1\nkiln_policy: 1\n",
         "t.yaml:2:1: policy: duplicate key 'kiln_policy' (first at line 1)"},
        {"kiln_policy: 1\nrules: [\n", "t.yaml:3:1: YAML: "},
        {"kiln_policy: 1\n  bad: indent\n", "t.yaml:2:6: YAML: "},
        {"", "t.yaml: empty policy"},
        {"- a\n- b\n", "t.yaml:1:1: a policy is a mapping"},
        {"kiln_policy: 1\ncost_model: {weights: {exq: 3}}\n",
         "t.yaml:2:24: weights: unknown op 'exq'"},
        {"kiln_policy: 1\nrules:\n  - when: {width: {gt: 1}}\n"
         "    use: interp\n    with: 3\n",
         "t.yaml:5:5: rule: unknown key 'with'"},
        /* a second document was silently ignored */
        {"kiln_policy: 1\ndefault: interp\n---\nkiln_policy: 1\n"
         "default: tcc\n",
         "t.yaml:3:1: a policy is one YAML document; a second one starts "
         "here"},
        {"kiln_policy: 1\n...\n---\n[: x\n", "t.yaml:4:2: YAML: "},
        /* blas: (issue 27) */
        {"kiln_policy: 1\nblas: {gemv: fast}\n",
         "t.yaml:2:14: gemv: expected auto, blas or loop, got 'fast'"},
        {"kiln_policy: 1\nblas: {loop_max_cols: 513}\n",
         "t.yaml:2:23: loop_max_cols: expected an integer from 0 to 512, "
         "got '513'"},
        {"kiln_policy: 1\nblas: {threads: 2}\n",
         "t.yaml:2:8: blas: unknown key 'threads' (expected one of: gemv, "
         "loop_max_cols, loop_max_cols_t)"},
        /* tiers: (issue 15) */
        {"kiln_policy: 1\ntiers: true\n",
         "t.yaml:2:8: tiers: expected a mapping, got a scalar"},
        {"kiln_policy: 1\ntiers: [interp]\n",
         "t.yaml:2:8: tiers: expected a mapping, got a list"},
        {"kiln_policy: 1\ntiers:\n  tier2: llvm\n",
         "t.yaml:3:3: tiers: unknown key 'tier2' (expected one of: enabled, "
         "tier0, tier1, threads, budget, min_gain_ns, sample_every, "
         "compile_ms, compile_ms_per_op, compile_ms_per_input, preload)"},
        {"kiln_policy: 1\ntiers:\n  budget: 1\n  ratio: 2\n",
         "t.yaml:4:3: tiers: give budget or its old name ratio, not both"},
        {"kiln_policy: 1\ntiers:\n  budget: 0\n",
         "t.yaml:3:11: budget: must be > 0, got '0'"},
        {"kiln_policy: 1\ntiers:\n  compile_ms_per_op: -1\n",
         "t.yaml:3:22: compile_ms_per_op: must be >= 0, got '-1'"},
        {"kiln_policy: 1\ntiers:\n  preload: 1\n",
         "t.yaml:3:12: preload: expected true or false, got '1'"},
        {"kiln_policy: 1\ntiers:\n  compile_ms: x\n",
         "t.yaml:3:15: compile_ms: expected a number, got 'x'"},
        {"kiln_policy: 1\ntiers:\n  ratio: 1\n  ratio: 2\n",
         "t.yaml:4:3: tiers: duplicate key 'ratio' (first at line 3)"},
        {"kiln_policy: 1\ntiers:\n  enabled: maybe\n",
         "t.yaml:3:12: enabled: expected true or false, got 'maybe'"},
        {"kiln_policy: 1\ntiers:\n  enabled: \"true\"\n",
         "t.yaml:3:12: enabled: expected true or false, got a quoted string"},
        {"kiln_policy: 1\ntiers:\n  tier0: [interp, tcc]\n  tier1: tcc\n",
         "t.yaml:4:10: tier1: 'tcc' is also in tier0"},
        {"kiln_policy: 1\ntiers:\n  tier1: interp\n  tier0: interp\n",
         "t.yaml:3:10: tier1: 'interp' is also in tier0"},
        {"kiln_policy: 1\ntiers:\n  tier1: interp\n",
         "t.yaml:3:10: tier1: 'interp' is also in tier0"},
        {"kiln_policy: 1\ntiers:\n  tier0: [interp, llvm]\n",
         "t.yaml:3:19: tier0: 'llvm' is the tier-1 backend"},
        {"kiln_policy: 1\ntiers:\n  tier0: []\n",
         "t.yaml:3:10: tier0: the list is empty"},
        {"kiln_policy: 1\ntiers:\n  tier0: [tcc, tcc]\n",
         "t.yaml:3:16: tier0: 'tcc' is listed twice"},
        {"kiln_policy: 1\ntiers:\n  tier0: [Tcc]\n",
         "t.yaml:3:11: tier0: bad backend name 'Tcc' (expected [a-z0-9_]+"},
        {"kiln_policy: 1\ntiers:\n  tier0: {interp: 1}\n",
         "t.yaml:3:10: tier0: expected a backend name or a list of them, got "
         "a mapping"},
        {"kiln_policy: 1\ntiers:\n  tier0: ~\n",
         "t.yaml:3:10: tier0: expected a string, got null"},
        {"kiln_policy: 1\ntiers:\n  tier0: [interp, [tcc]]\n",
         "t.yaml:3:19: tier0: expected a string, got a list"},
        {"kiln_policy: 1\ntiers:\n  tier0: [b0, b1, b2, b3, b4, b5, b6, b7, "
         "b8, b9, b10, b11, b12, b13, b14, b15]\n",
         "t.yaml:3:76: tier0: more than 15 backends"},
        {"kiln_policy: 1\ntiers:\n  tier1: [llvm]\n",
         "t.yaml:3:10: tier1: expected a string, got a list"},
        {"kiln_policy: 1\ntiers:\n  tier1: LLVM\n",
         "t.yaml:3:10: tier1: bad backend name 'LLVM'"},
        /* issue 24: a misspelled backend was silent */
        {"kiln_policy: 1\ntiers:\n  tier1: lvm\n",
         "t.yaml:3:10: tier1: unknown backend 'lvm' (did you mean 'llvm'? "
         "kiln's backends are interp, tcc and llvm)"},
        {"kiln_policy: 1\ntiers:\n  tier0: [interp, tccc]\n",
         "t.yaml:3:19: tier0: unknown backend 'tccc' (did you mean 'tcc'?"},
        {"kiln_policy: 1\nbackends: [llvm, intepr]\n",
         "t.yaml:2:18: backends: unknown backend 'intepr' (did you mean "
         "'interp'?"},
        {"kiln_policy: 1\nbackends: [llvm]\ncost_model:\n  backends:\n"
         "    lllvm: {call_ns: 1}\n",
         "t.yaml:5:5: cost_model: backends: unknown backend 'lllvm' (did you "
         "mean 'llvm'?"},
        {"kiln_policy: 1\ntiers:\n  threads: 65\n",
         "t.yaml:3:12: threads: expected an integer from 0 to 64, got '65'"},
        {"kiln_policy: 1\ntiers:\n  threads: -1\n",
         "t.yaml:3:12: threads: expected an integer from 0 to 64, got '-1'"},
        {"kiln_policy: 1\ntiers:\n  threads: 1.5\n",
         "t.yaml:3:12: threads: expected an integer from 0 to 64, got '1.5'"},
        {"kiln_policy: 1\ntiers:\n  threads: \"4\"\n",
         "t.yaml:3:12: threads: expected a number, got a quoted string"},
        {"kiln_policy: 1\ntiers:\n  ratio: 0\n",
         "t.yaml:3:10: ratio: must be > 0, got '0'"},
        {"kiln_policy: 1\ntiers:\n  ratio: -0.5\n",
         "t.yaml:3:10: ratio: must be > 0, got '-0.5'"},
        {"kiln_policy: 1\ntiers:\n  ratio: '0.25'\n",
         "t.yaml:3:10: ratio: expected a number, got a quoted string"},
        {"kiln_policy: 1\ntiers:\n  ratio: .nan\n",
         "t.yaml:3:10: ratio: expected a number, got '.nan'"},
        {"kiln_policy: 1\ntiers:\n  min_gain_ns: -1\n",
         "t.yaml:3:16: min_gain_ns: must be >= 0, got '-1'"},
        {"kiln_policy: 1\ntiers:\n  min_gain_ns: \"100\"\n",
         "t.yaml:3:16: min_gain_ns: expected a number, got a quoted string"},
        {"kiln_policy: 1\ntiers:\n  min_gain_ns: lots\n",
         "t.yaml:3:16: min_gain_ns: expected a number, got 'lots'"},
        {"kiln_policy: 1\ntiers:\n  sample_every: 0\n",
         "t.yaml:3:17: sample_every: expected an integer from 1 to 1000000, "
         "got '0'"},
        {"kiln_policy: 1\ntiers:\n  sample_every: 1000001\n",
         "t.yaml:3:17: sample_every: expected an integer from 1 to 1000000, "
         "got '1000001'"},
        {"kiln_policy: 1\ntiers:\n  sample_every: \"64\"\n",
         "t.yaml:3:17: sample_every: expected a number, got a quoted string"},
    };
    int n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++) {
        kiln_err err = {0, ""};
        kiln_policy *p = load(cases[i].text, &err);
        ok(!p && err.code == KILN_ERR_POLICY &&
           strncmp(err.message, cases[i].want, strlen(cases[i].want)) == 0,
           "error %d: %s", i, err.message);
        if (p || strncmp(err.message, cases[i].want, strlen(cases[i].want)))
            diag("wanted: %s", cases[i].want);
        kiln_policy_free(p);
    }
    kiln_err err = {0, ""};
    ok(!kiln_policy_load_file("/nonexistent/p.yaml", &err) &&
       err.code == KILN_ERR_IO && strstr(err.message, "/nonexistent/p.yaml"),
       "a missing file: KILN_ERR_IO: %s", err.message);
    ok(!kiln_policy_load_file(NULL, &err) && err.code == KILN_ERR_ARG,
       "load_file(NULL)");
}

/* ---- compiling with policies ------------------------------------------- */

static const char *model =
    "kiln 1\ngraph g\n  input x: f64[4]\n  input y: f64[4]\n"
    "  output a = add(x, y)\n  output e = exp(x)\n  output s = sum(x)\nend\n";

static char tmpdir[256];

static char *write_file(const char *name, const char *text)
{
    static char path[4][512];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return p;
}

static int run_model(kiln_function *f, double *out6)
{
    double x[4] = {0.5, -1, 2, 3}, y[4] = {1, 2, 3, 4};
    kiln_tensor in[2] = {{KILN_F64, 1, {4}, x}, {KILN_F64, 1, {4}, y}};
    kiln_tensor out[3];
    kiln_err err;
    if (kiln_function_call(f, in, out, &err))
        return -1;
    memcpy(out6, out[0].data, 4 * sizeof(double));
    memcpy(out6 + 4, out[1].data, 4 * sizeof(double));
    out6[8] = *(double *)out[2].data;
    return 0;
}

static kiln_function *compile_opts(kiln_graph *g, kiln_options *o,
                                   char *diag_buf, size_t size, kiln_err *err)
{
    FILE *d = tmpfile();
    o->diag = d;
    kiln_function *f = kiln_compile(g, o, err);
    diag_buf[0] = 0;
    if (d) {
        rewind(d);
        size_t n = fread(diag_buf, 1, size - 1, d);
        diag_buf[n] = 0;
        fclose(d);
    }
    return f;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_compile(void)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(model, "m.kg", NULL, &err);
    ok(g != NULL, "model parses");
    if (!g)
        return;
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = "interp";
    o.passes = "-fuse";   /* add and exp as kernels of their own (below) */
    char dg[4096];
    kiln_function *fi = compile_opts(g, &o, dg, sizeof dg, &err);
    double want[9], got[9];
    ok(fi && run_model(fi, want) == 0, "interp reference");
    kiln_kernel_info ki;
    memset(&ki, 0, sizeof ki);
    ki.struct_size = sizeof ki;
    ok(fi && kiln_function_kernel_info(fi, 0, &ki, &err) == 0 &&
       !strcmp(ki.rule, "backend option") && !strcmp(ki.chosen, "interp") &&
       kiln_function_policy_source(fi) == NULL,
       "an explicit backend: rule 'backend option', no policy");

    /* a refusing plugin: example takes f64 add/mul/copies only */
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.policy_file = write_file("refuse.yaml",
                               "kiln_policy: 1\nbackends: [example]\n"
                               "default: example\n");
    o.passes = "-fuse";   /* as above: one refusable kernel per node */
    kiln_function *f = compile_opts(g, &o, dg, sizeof dg, &err);
    ok(f != NULL, "compile with the example plugin %s", f ? "" : err.message);
    int on_example = 0, fell = 0;
    for (int i = 0; f && i < kiln_function_n_kernels(f); i++) {
        memset(&ki, 0, sizeof ki);
        ki.struct_size = sizeof ki;
        kiln_function_kernel_info(f, i, &ki, NULL);
        if (!strcmp(ki.backend, "example"))
            on_example++;
        else if (ki.fallback && strstr(ki.fallback, "refused") &&
                 !strcmp(ki.backend, "interp") &&
                 !strcmp(ki.chosen, "example"))
            fell++;
    }
    ok(on_example >= 1 && fell >= 1, "example took %d kernels, refused %d "
       "(recorded for explain)", on_example, fell);
    ok(count_lines(dg) == fell && strstr(dg, "backend 'example' on kernel") &&
       strstr(dg, "refused") && strstr(dg, "; using interp"),
       "one diagnostic line per refused kernel (%d lines)",
       count_lines(dg));
    ok(f && run_model(f, got) == 0 && !memcmp(got, want, sizeof got),
       "refusals: the interpreter's results");
    /* changing the policy never changes a key */
    int same = f && fi &&
               kiln_function_n_kernels(f) == kiln_function_n_kernels(fi);
    for (int i = 0; same && i < kiln_function_n_kernels(f); i++) {
        kiln_key a, b;
        same = kiln_function_kernel_key(f, i, &a) == 0 &&
               kiln_function_kernel_key(fi, i, &b) == 0 &&
               !memcmp(&a, &b, sizeof a);
    }
    ok(same, "cache keys are the same under both policies");
    kiln_function_free(f);

    /* a missing plugin: one line, then the next in the chain */
    o.policy_file = write_file("missing.yaml",
                               "kiln_policy: 1\nbackends: [absent, interp]\n"
                               "default: absent\n");
    f = compile_opts(g, &o, dg, sizeof dg, &err);
    int all_interp = f != NULL;
    for (int i = 0; f && i < kiln_function_n_kernels(f); i++) {
        memset(&ki, 0, sizeof ki);
        ki.struct_size = sizeof ki;
        kiln_function_kernel_info(f, i, &ki, NULL);
        all_interp &= !strcmp(ki.backend, "interp") && ki.fallback &&
                      strstr(ki.fallback, "backend 'absent' not found");
    }
    ok(all_interp, "missing plugin: every kernel on interp, reason kept");
    ok(count_lines(dg) == 1 && strstr(dg, "backend 'absent' not found") &&
       strstr(dg, "using interp"), "missing plugin: one line: %s", dg);
    ok(f && run_model(f, got) == 0 && !memcmp(got, want, sizeof got),
       "missing plugin: the interpreter's results");
    kiln_function_free(f);

    /* an explicit backend overrides the policy */
    o.backend = "interp";
    f = compile_opts(g, &o, dg, sizeof dg, &err);
    memset(&ki, 0, sizeof ki);
    ki.struct_size = sizeof ki;
    ok(f && kiln_function_kernel_info(f, 0, &ki, NULL) == 0 &&
       !strcmp(ki.rule, "backend option") && !dg[0],
       "backend option overrides policy_file");
    kiln_function_free(f);
    o.backend = NULL;

    /* a bad policy fails the compile: never a silent fallback */
    o.policy_file = write_file("bad.yaml", "kiln_policy: 1\nrulez: []\n");
    f = compile_opts(g, &o, dg, sizeof dg, &err);
    ok(!f && err.code == KILN_ERR_POLICY &&
       strstr(err.message, "bad.yaml:2:1"),
       "a bad policy fails kiln_compile: %s", err.message);
    kiln_function_free(f);
    o.policy_file = write_file("none.yaml", "");
    unlink(o.policy_file);
    f = compile_opts(g, &o, dg, sizeof dg, &err);
    ok(!f && err.code == KILN_ERR_IO, "a missing policy file fails: %s",
       err.message);
    kiln_function_free(f);

    /* a policy handle: the function keeps its own reference */
    kiln_policy *p = load("kiln_policy: 1\nrules:\n  - name: sums\n"
                          "    when: {op: sum}\n    use: interp\n", &err);
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.policy = p;
    o.passes = "-loops";   /* the sum a kernel of its own (a REDUCE) */
    f = compile_opts(g, &o, dg, sizeof dg, &err);
    kiln_policy_free(p);
    int found = 0;
    for (int i = 0; f && i < kiln_function_n_kernels(f); i++) {
        memset(&ki, 0, sizeof ki);
        ki.struct_size = sizeof ki;
        kiln_function_kernel_info(f, i, &ki, NULL);
        found |= !strcmp(ki.facts.op, "sum") && !strcmp(ki.rule, "sums") &&
                 ki.facts.kind == KILN_KERNEL_REDUCE &&
                 ki.facts.work_elements == 4 && ki.facts.elements == 1;
    }
    ok(found, "explain: rule 'sums' for the sum kernel, facts filled");
    ok(f && !strcmp(kiln_function_policy_source(f), "t.yaml"),
       "policy source outlives the caller's handle");
    ok(f && kiln_function_kernel_info(f, 99, &ki, &err) == KILN_ERR_ARG,
       "kernel_info out of range");
    kiln_function_free(f);
    kiln_function_free(fi);
    kiln_graph_free(g);
}

static void test_selection(void)
{
    kiln_err err = {0, ""};
    const char *how = NULL;
    unsetenv("KILN_POLICY");
    char *a = write_file("a.yaml", "kiln_policy: 1\n");
    char *envp = write_file("env.yaml", "kiln_policy: 1\n");
    char *per_model = write_file("model.policy.yaml", "kiln_policy: 1\n");
    char model_path[600];
    snprintf(model_path, sizeof model_path, "%s/model.kg", tmpdir);
    kiln_policy *h = load("kiln_policy: 1\n", &err);
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.policy = h;
    o.policy_file = a;
    o.model_path = model_path;
    setenv("KILN_POLICY", envp, 1);
    kiln_policy *p = kiln_policy_select(&o, &how, &err);
    ok(p == h && !strcmp(how, "option"), "1. the policy handle");
    kiln_policy_free(p);
    o.policy = NULL;
    p = kiln_policy_select(&o, &how, &err);
    ok(p && !strcmp(how, "policy_file") &&
       !strcmp(kiln_policy_source(p), a), "2. policy_file (--policy)");
    kiln_policy_free(p);
    o.policy_file = NULL;
    p = kiln_policy_select(&o, &how, &err);
    ok(p && !strcmp(how, "KILN_POLICY") &&
       !strcmp(kiln_policy_source(p), envp), "3. $KILN_POLICY");
    kiln_policy_free(p);
    unsetenv("KILN_POLICY");
    p = kiln_policy_select(&o, &how, &err);
    ok(p && !strcmp(how, "model") &&
       !strcmp(kiln_policy_source(p), per_model),
       "4. FILE.policy.yaml next to FILE.kg");
    kiln_policy_free(p);
    o.model_path = NULL;
    p = kiln_policy_select(&o, &how, &err);
    ok(p && !strcmp(how, "default") && kiln_policy_default_path() &&
       !strcmp(kiln_policy_source(p), kiln_policy_default_path()),
       "5. the installed default (%s)", p ? kiln_policy_source(p) : "");
    kiln_policy_free(p);
    p = kiln_policy_select(NULL, &how, &err);
    ok(p && !strcmp(how, "default"), "NULL options: the default");
    kiln_policy_free(p);
    setenv("KILN_POLICY", "/nonexistent.yaml", 1);
    p = kiln_policy_select(NULL, &how, &err);
    ok(!p && err.code == KILN_ERR_IO &&
       !strncmp(err.message, "$KILN_POLICY: /nonexistent.yaml", 31),
       "a missing $KILN_POLICY is an error: %s", err.message);
    unsetenv("KILN_POLICY");
    kiln_policy_free(h);
    /* the installed default and the examples are valid */
    for (int i = 0; i < N_CONFS; i++) {
        p = load_conf(i, &err);
        ok(p != NULL, "conf/%s loads %s", confs[i], p ? "" : err.message);
        kiln_policy_free(p);
    }
}

/* A policy comes with a model: its size and nesting are capped before
 * libyaml, which takes about a minute for 100 kB of '[' (issue 13). */
typedef struct caps_job {
    const char *text;
    size_t len;
} caps_job;

static int load_in_child(void *arg, char *msg, size_t size)
{
    caps_job *j = arg;
    kiln_err err = {0, ""};
    kiln_policy *p = kiln_policy_load_string(j->text, j->len, "t.yaml",
                                             &err);
    kiln_policy_free(p);
    snprintf(msg, size, "%s", err.message);
    return p ? 0 : err.code;
}

static void test_caps(void)
{
    size_t n = 100000;
    char *text = malloc(2 * ((size_t)1 << 20) + 64);
    char msg[1100];
    int rc;
    if (!text) {
        ok(0, "out of memory");
        return;
    }
    /* 100 kB of '[': refused at the first '[' over the depth cap, at
     * once (the old loader took 38-65 s; the child is killed after 10) */
    memset(text, '[', n);
    caps_job j = {text, n};
    rc = guarded(load_in_child, &j, 10, msg, sizeof msg);
    ok(rc == KILN_ERR_POLICY &&
           strcmp(msg, "t.yaml:1:33: '[' and '{' nested deeper than 32 (the "
                  "cap)") == 0,
       "100 kB of '[': refused at the cap's line:column, without a stall");
    diag("rc %d: %s", rc, msg);
    /* the same nesting after two lines, behind '{' */
    {
        size_t k = (size_t)snprintf(text, 64, "kiln_policy: 1\nrules: ");
        for (int i = 0; i < 40; i++)
            text[k++] = i % 2 ? '{' : '[';
        j.len = k;
        rc = guarded(load_in_child, &j, 10, msg, sizeof msg);
        ok(rc == KILN_ERR_POLICY &&
               strcmp(msg, "t.yaml:2:40: '[' and '{' nested deeper than 32 "
                      "(the cap)") == 0,
           "mixed '[' and '{' after two lines: line:column of the cap");
        diag("rc %d: %s", rc, msg);
    }
    /* brackets in a comment or a quoted scalar are not nesting */
    {
        char good[400];
        snprintf(good, sizeof good,
                 "kiln_policy: 1   # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n"
                 "backends: [interp]\n"
                 "rules:\n"
                 "  - name: \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"\n"
                 "    use: interp\n"
                 "  - name: '{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{'\n"
                 "    use: interp\n");
        kiln_err err = {0, ""};
        kiln_policy *p = load(good, &err);
        ok(p != NULL, "'[' in comments and quoted scalars is not nesting");
        if (!p)
            diag("%s", err.message);
        kiln_policy_free(p);
    }
    /* more '[' and '{' than the total cap, wherever they are */
    {
        size_t k = (size_t)snprintf(text, 64, "kiln_policy: 1\n# ");
        for (int i = 0; i < 5000; i++)
            text[k++] = '[';
        j.len = k;
        rc = guarded(load_in_child, &j, 10, msg, sizeof msg);
        ok(rc == KILN_ERR_POLICY &&
               strcmp(msg, "t.yaml:2:4099: more than 4096 '[' and '{' in a "
                      "policy (the cap)") == 0,
           "more than 4096 '[' even in a comment: refused");
        diag("rc %d: %s", rc, msg);
    }
    /* the size cap: a 1 MiB + 1 byte policy, at the cap's position */
    {
        size_t k = (size_t)snprintf(text, 64, "kiln_policy: 1\n");
        memset(text + k, ' ', ((size_t)1 << 20) + 1 - k);
        j.len = ((size_t)1 << 20) + 1;
        rc = guarded(load_in_child, &j, 10, msg, sizeof msg);
        char want[900];
        snprintf(want, sizeof want, "t.yaml:2:%zu: policy is larger than "
                 "1048576 bytes (the cap; a policy is a few kB)",
                 ((size_t)1 << 20) - k + 1);
        ok(rc == KILN_ERR_POLICY && strcmp(msg, want) == 0,
           "a policy over 1 MiB is refused at the byte where the cap is");
        diag("rc %d: %s", rc, msg);
        /* ... and from a file, which is read only up to the cap */
        char path[600];
        snprintf(path, sizeof path, "%s/big.yaml", tmpdir);
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(text, 1, j.len, f);
            fwrite(text, 1, j.len, f);
            fclose(f);
        }
        kiln_err err = {0, ""};
        kiln_policy *p = kiln_policy_load_file(path, &err);
        snprintf(want, sizeof want, "%s:2:%zu: policy is larger than "
                 "1048576 bytes (the cap; a policy is a few kB)", path,
                 ((size_t)1 << 20) - k + 1);
        ok(!p && err.code == KILN_ERR_POLICY &&
               strcmp(err.message, want) == 0,
           "kiln_policy_load_file: a 2 MiB file refused with the position");
        diag("%s", err.message);
        kiln_policy_free(p);
    }
    free(text);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kiln_test_policy_%ld",
             (long)getpid());
    char cmd[400];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", tmpdir);
    if (system(cmd) != 0)
        diag("cannot make %s", tmpdir);
    unsetenv("KILN_BACKEND");
    unsetenv("KILN_POLICY");
    test_matchers();
    test_cost();
    test_knobs();
    test_tiers();
    test_errors();
    test_compile();
    test_selection();
    test_caps();
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        diag("cannot remove %s", tmpdir);
    return done_testing();
}
