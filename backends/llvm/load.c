/*
 * load.c — a callable: the artifact's description and object linked by
 * kiln's ELF loader (core/plugin/objload.c), the row functions looked up by name.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Compiled into the plugin only (llvm.so;
 * -DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifdef KL_FRONT

typedef void (*kl_row_fn)(int64_t n, void **ptrs, const int64_t *st,
                          const kiln_runtime *rt, void *acc);

typedef struct kl_state {
    kiln_callable callable;
    kiln_callable *interp;   /* the embedded interpreter's callable */
    kiln_obj *obj;           /* the loaded object */
    kl_row_fn c, s;          /* ELEMWISE: ec/es; REDUCE: rc/rs; GATHER: gc/gk;
                                JOIN: jc/js; SCATTER: sc/sk; DOT: db/dl;
                                LOOP: lc/ls; RECUR: rr, - (kl_row_names) */
    kl_row_fn uc, us;        /* REDUCE (LOOP: luc/lus) along a kept axis */
    kl_row_fn lk;            /* LOOP: the index check, or NULL */
    kl_row_fn nest[4];       /* kiln_n0 .. n3 (nest.c), NULL when absent */
} kl_state;

static void kl_callable_free(kiln_callable *c)
{
    if (!c)
        return;
    kl_state *s = c->state;
    kiln_obj_free(s->obj);
    if (s->interp)
        kiln_interp_callable_free(s->interp);
    free(s);
}

static int kl_run(void *state, const kiln_call *call);
static int kl_prepare(void *state, const kiln_call *call, void **out);
static int kl_run_prepared(void *plan, const kiln_call *call);
static void kl_prepared_free(void *plan);

static int kl_lookup(kl_state *s, const char *name, kl_row_fn *fn,
                     kiln_plugin_error **err)
{
    void *p = kiln_obj_symbol(s->obj, name);
    if (!p)
        return kl_fail(err, KILN_ERR_BACKEND, "the object has no symbol %s",
                       name);
    memcpy(fn, &p, sizeof *fn);
    return 0;
}

/* The row functions kernel k's object defines, as kl_state's c, s, uc,
 * us (NULL: none). */
static void kl_row_names(const kiln_kernel *k, const char *nm[4])
{
    static const char *const names[][4] = {
        [KILN_KERNEL_ELEMWISE] = {"kiln_ec", "kiln_es", NULL, NULL},
        [KILN_KERNEL_REDUCE] = {"kiln_rc", "kiln_rs", "kiln_uc", "kiln_us"},
        [KILN_KERNEL_JOIN] = {"kiln_jc", "kiln_js", NULL, NULL},
        [KILN_KERNEL_GATHER] = {"kiln_gc", "kiln_gk", NULL, NULL},
        [KILN_KERNEL_SCATTER] = {"kiln_sc", "kiln_sk", NULL, NULL},
        [KILN_KERNEL_DOT] = {"kiln_db", "kiln_dl", NULL, NULL},
        [KILN_KERNEL_LOOP] = {"kiln_lc", "kiln_ls", "kiln_luc", "kiln_lus"},
        [KILN_KERNEL_RECUR] = {"kiln_rr", NULL, NULL, NULL}};
    for (int q = 0; q < 4; q++)
        nm[q] = k->kind < sizeof names / sizeof names[0] ? names[k->kind][q] : NULL;
    if (!kl_keeps_axis(k))   /* no kept-axis rows */
        nm[2] = nm[3] = NULL;
}

static int kl_load_bytes(const void *bytes, size_t len, kiln_callable **out,
                         kiln_plugin_error **err)
{
    if (!out)
        return kl_fail(err, KILN_ERR_ARG, "load: no out");
    *out = NULL;
    /* instrs inside the bytes need 8-byte alignment: work on a copy */
    unsigned char *copy = malloc(len ? len : 1);
    if (!copy)
        return kl_fail(err, KILN_ERR_NOMEM, "out of memory");
    if (len)
        memcpy(copy, bytes, len);
    kiln_kernel k;
    char label[128];
    const void *obj;
    size_t obj_len;
    if (kl_unpack(copy, len, &k, label, sizeof label, &obj, &obj_len)) {
        free(copy);
        return kl_fail(err, KILN_ERR_BACKEND, "not an llvm artifact of format "
                       "%u (%zu bytes)", KL_FORMAT, len);
    }
    kiln_kernel full;
    if (kl_check(&k, &full, err)) {
        free(copy);
        return KILN_ERR_BACKEND;
    }
    int prog = kl_native(full.kind);
    if (prog && obj_len == 0) {
        free(copy);
        return kl_fail(err, KILN_ERR_BACKEND, "artifact without code");
    }
    kl_state *s = calloc(1, sizeof *s);
    kiln_artifact *ia = s ? kiln_interp_copy(&full) : NULL;
    int rc = 0;
    if (!s || !ia) {
        rc = kl_fail(err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    s->callable.struct_size = sizeof s->callable;
    s->callable.fn = kl_run;
    s->callable.state = s;
    s->callable.prepare = kl_prepare;
    s->callable.run = kl_run_prepared;
    s->callable.plan_free = kl_prepared_free;
    kiln_plugin_error *ie = NULL;
    rc = kiln_interp_load(ia, &s->interp, &ie);
    if (rc) {
        kiln_interp_error_free(ie);
        rc = kl_fail(err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (prog) {
        /* kiln's own ELF loader (core/plugin/objload.c): no libLLVM in this
         * process; LLVM may emit calls to the mem* functions */
        static const kiln_obj_import imp[] = {
            {"memcpy", (const void *)memcpy},
            {"memmove", (const void *)memmove},
            {"memset", (const void *)memset}};
        const kiln_obj_options oo = {imp, 3, 1};
        char why[256];
        if (kiln_obj_load(obj, obj_len, &oo, &s->obj, why, sizeof why)) {
            rc = kl_fail(err, KILN_ERR_BACKEND, "cannot load the object: %s",
                         why);
            goto fail;
        }
        const char *nm[4];
        kl_row_names(&full, nm);
        kl_row_fn *slot[4] = {&s->c, &s->s, &s->uc, &s->us};
        for (int q = 0; q < 4; q++)
            if (nm[q] && (rc = kl_lookup(s, nm[q], slot[q], err)))
                goto fail;
        if (kl_loop_checks(&full) &&
            (rc = kl_lookup(s, "kiln_lk", &s->lk, err)))
            goto fail;
        for (int q = 0; q < 4; q++) {   /* the nests: optional */
            char nm4[16];
            snprintf(nm4, sizeof nm4, "kiln_n%d", q);
            void *p = kiln_obj_symbol(s->obj, nm4);
            if (p)
                memcpy(&s->nest[q], &p, sizeof s->nest[q]);
        }
    }
    free(ia);
    free(copy);
    *out = &s->callable;
    return KILN_OK;
fail:
    free(ia);
    free(copy);
    if (s)
        kl_callable_free(&s->callable);
    return rc ? rc : KILN_ERR_BACKEND;
}

#endif /* KL_FRONT */
