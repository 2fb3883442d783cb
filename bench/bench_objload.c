/*
 * bench_objload.c — time to load one kernel's artifact (docs/performance.md,
 * "Loading artifacts"; run by bench/objload.sh, `make bench-objload`).
 *
 * For every kernel of a model (default examples/radon.kg): compile it with
 * the tcc and the llvm plugins, take the artifact bytes, then time, per
 * kernel (median of REPEAT loads, each followed by its free):
 *
 *   objload/tcc    kiln_obj_load of the tcc object + symbol lookup
 *   libtcc/tcc     the former tcc load_bytes: object written to a memfd,
 *                  linked by libtcc's in-memory linker (tcc_add_file,
 *                  tcc_relocate into mmap'd pages, mprotect)
 *   objload/llvm   kiln_obj_load of the llvm object + row-function lookup
 *   orc/llvm       the llvm plugin's load_bytes (an ORC LLJIT per kernel)
 *   libtcc/llvm    libtcc's linker on the llvm object (in a child process:
 *                  libtcc 0.9.27 calls exit(1) on a relocation it does not
 *                  know)
 *
 * and, once per process, the dlopen of each plugin (libtcc, libLLVM).
 * Prints one table row per path: kernels, mean, min, max of the
 * per-kernel medians (microseconds) and the total for the model (ms).
 */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include "config.h"   /* KILN_LIBTCC_VERSION when tcc is built */
#endif
#include <kiln/backend.h>
#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "lower.h"
#include "objload.h"

#ifdef KILN_LIBTCC_VERSION
#include <libtcc.h>
#endif

#define REPEAT 21

static const kiln_backend *open_backend(const char *dir, const char *name,
                                        double *ms)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/backends/%s/.libs/%s.so", dir, name, name);
    double t0 = bench_now();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    *ms = 1e3 * (bench_now() - t0);
    if (!h)
        return NULL;
    void *sym = dlsym(h, KILN_BACKEND_ENTRY);
    kiln_backend_entry_fn e;
    memcpy(&e, &sym, sizeof e);
    return sym ? e(KILN_ABI_MAJOR, KILN_ABI_MINOR, NULL, 0) : NULL;
}

static uint64_t rd64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

typedef struct kbytes {
    unsigned char *tcc, *llvm;   /* artifact bytes */
    size_t tcc_len, llvm_len;
    const unsigned char *tobj, *lobj;   /* the objects inside */
    size_t tobj_len, lobj_len;
} kbytes;

static unsigned char *artifact(const kiln_backend *be, const kiln_kernel *k,
                               size_t *len)
{
    kiln_artifact *a = NULL;
    kiln_plugin_error *e = NULL;
    kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
    if (!be || be->compile(k, &co, &a, &e)) {
        if (e)
            be->error_free(e);
        return NULL;
    }
    const void *p = be->artifact_bytes(a, len);
    unsigned char *b = p ? malloc(*len) : NULL;
    if (b)
        memcpy(b, p, *len);
    be->artifact_free(a);
    return b;
}

typedef struct stat_row {
    int n;
    double sum, min, max;
} stat_row;

static void add(stat_row *r, double us)
{
    if (r->n == 0 || us < r->min)
        r->min = us;
    if (r->n == 0 || us > r->max)
        r->max = us;
    r->sum += us;
    r->n++;
}

static void print_row(const char *name, const stat_row *r)
{
    if (r->n == 0) {
        printf("| %s | 0 | - | - | - | - |\n", name);
        return;
    }
    printf("| %s | %d | %.1f | %.1f | %.1f | %.2f |\n", name, r->n,
           r->sum / r->n, r->min, r->max, r->sum / 1e3);
}

static const kiln_obj_import imports[] = {
    {"memcpy", (const void *)memcpy},
    {"memmove", (const void *)memmove},
    {"memset", (const void *)memset},
};

/* One load + free by kiln_obj_load; 0 on success. */
static int load_obj(const unsigned char *o, size_t len, int llvm)
{
    const kiln_obj_options opt = {imports, 3, llvm};
    kiln_obj *ob = NULL;
    char why[256];
    if (kiln_obj_load(o, len, &opt, &ob, why, sizeof why)) {
        fprintf(stderr, "bench_objload: %s\n", why);
        return -1;
    }
    int rc = kiln_obj_symbol(ob, llvm ? "kiln_ec" : "kiln_kernel") ||
             kiln_obj_symbol(ob, "kiln_rc") || kiln_obj_symbol(ob, "kiln_gc")
                 ? 0 : -1;
    kiln_obj_free(ob);
    return rc;
}

#ifdef KILN_LIBTCC_VERSION
static void tcc_err(void *opaque, const char *msg)
{
    (void)opaque;
    (void)msg;
}

/* The former tcc load_bytes path (backends/tcc/tcc.c before kiln's
 * loader): memfd, tcc_add_file, tcc_relocate into mmap'd pages. */
static int load_libtcc(const unsigned char *o, size_t len, int llvm)
{
    int fd = memfd_create("kiln-bench", MFD_CLOEXEC);
    if (fd < 0 || write(fd, o, len) != (ssize_t)len)
        return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    TCCState *s = tcc_new();
    tcc_set_error_func(s, NULL, tcc_err);
    tcc_set_options(s, "-nostdlib -nostdinc -xb");
    tcc_set_output_type(s, TCC_OUTPUT_MEMORY);
    int rc = -1;
    if (tcc_add_file(s, path) == 0) {
        tcc_add_symbol(s, "memcpy", (const void *)memcpy);
        tcc_add_symbol(s, "memmove", (const void *)memmove);
        tcc_add_symbol(s, "memset", (const void *)memset);
        int size = tcc_relocate(s, NULL);
        size_t pg = (size_t)sysconf(_SC_PAGESIZE);
        size_t mlen = size > 0 ? ((size_t)size + pg - 1) & ~(pg - 1) : 0;
        void *mem = mlen ? mmap(NULL, mlen, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                         : MAP_FAILED;
        if (mem != MAP_FAILED) {
            if (tcc_relocate(s, mem) >= 0 &&
                (tcc_get_symbol(s, llvm ? "kiln_ec" : "kiln_kernel") ||
                 tcc_get_symbol(s, "kiln_rc") ||
                 tcc_get_symbol(s, "kiln_gc")) &&
                mprotect(mem, mlen, PROT_READ | PROT_EXEC) == 0)
                rc = 0;
            munmap(mem, mlen);
        }
    }
    tcc_delete(s);
    close(fd);
    return rc;
}
#endif

/* The llvm plugin's load_bytes (ORC). */
static const kiln_backend *LB;
static int load_orc(const unsigned char *b, size_t len)
{
    kiln_callable *c = NULL;
    kiln_plugin_error *e = NULL;
    if (LB->load_bytes(b, len, &c, &e)) {
        fprintf(stderr, "bench_objload: orc: %s\n", e ? e->message : "?");
        if (e)
            LB->error_free(e);
        return -1;
    }
    LB->callable_free(c);
    return 0;
}

enum { P_OBJ_TCC, P_LIBTCC_TCC, P_OBJ_LLVM, P_ORC_LLVM, P_LIBTCC_LLVM, NP };

/* Median of REPEAT timings of path p on kernel kb, in microseconds, or
 * -1 when it fails. */
static double time_path(int p, const kbytes *kb)
{
    double t[REPEAT];
    for (int r = 0; r < REPEAT; r++) {
        double t0 = bench_now();
        int rc = -1;
        switch (p) {
        case P_OBJ_TCC: rc = load_obj(kb->tobj, kb->tobj_len, 0); break;
        case P_OBJ_LLVM: rc = load_obj(kb->lobj, kb->lobj_len, 1); break;
        case P_ORC_LLVM: rc = load_orc(kb->llvm, kb->llvm_len); break;
#ifdef KILN_LIBTCC_VERSION
        case P_LIBTCC_TCC: rc = load_libtcc(kb->tobj, kb->tobj_len, 0); break;
        case P_LIBTCC_LLVM:
            rc = load_libtcc(kb->lobj, kb->lobj_len, 1);
            break;
#endif
        default: break;
        }
        if (rc)
            return -1;
        t[r] = 1e6 * (bench_now() - t0);
    }
    qsort(t, REPEAT, sizeof t[0], bench_cmp_double);
    return t[REPEAT / 2];
}

int main(int argc, char **argv)
{
    const char *bd = getenv("KILN_BUILDDIR") ? getenv("KILN_BUILDDIR") : ".";
    const char *model = argc > 1 ? argv[1] : "examples/radon.kg";
    double ms_tcc = 0, ms_llvm = 0;
    const kiln_backend *T = open_backend(bd, "tcc", &ms_tcc);
    LB = open_backend(bd, "llvm", &ms_llvm);
    kiln_err err;
    kiln_graph *g = kiln_parse_file(model, &err);
    kiln_program prog;
    if (!g || kiln_lower(g, &prog, &err)) {
        fprintf(stderr, "bench_objload: %s\n", err.message);
        return 1;
    }
    int n = prog.n_steps;
    kbytes *kb = calloc((size_t)n, sizeof *kb);
    for (int i = 0; i < n; i++) {
        const kiln_kernel *k = &prog.steps[i].kernel;
        kb[i].tcc = artifact(T, k, &kb[i].tcc_len);
        kb[i].llvm = artifact(LB, k, &kb[i].llvm_len);
        if (kb[i].tcc && kb[i].tcc_len >= 24) {
            uint64_t il = rd64(kb[i].tcc + 8);
            if (il < kb[i].tcc_len - 24) {
                kb[i].tobj = kb[i].tcc + 24 + il;
                kb[i].tobj_len = kb[i].tcc_len - 24 - il;
            }
        }
        if (kb[i].llvm && kb[i].llvm_len >= 56) {
            uint64_t ol = rd64(kb[i].llvm + 48);
            if (ol && ol <= kb[i].llvm_len - 56) {
                kb[i].lobj = kb[i].llvm + kb[i].llvm_len - ol;
                kb[i].lobj_len = (size_t)ol;
            }
        }
    }
    static const char *const names[NP] = {
        "kiln_obj_load, tcc object", "libtcc relink, tcc object (before)",
        "kiln_obj_load, llvm object", "ORC LLJIT, llvm load_bytes (now)",
        "libtcc relink, llvm object"};
    stat_row rows[NP];
    memset(rows, 0, sizeof rows);
    int fail[NP] = {0};
    for (int p = 0; p < NP; p++) {
        if (p == P_LIBTCC_LLVM) {
            /* in a child: libtcc may exit(1) on an unknown relocation */
            int pfd[2];
            if (pipe(pfd))
                break;
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                close(pfd[0]);
                for (int i = 0; i < n; i++) {
                    double us = kb[i].lobj ? time_path(p, &kb[i]) : -2;
                    if (write(pfd[1], &us, sizeof us) != sizeof us)
                        _exit(1);
                }
                _exit(0);
            }
            close(pfd[1]);
            double us;
            int got = 0;
            while (read(pfd[0], &us, sizeof us) == sizeof us) {
                got++;
                if (us >= 0)
                    add(&rows[p], us);
                else if (us == -1)
                    fail[p]++;
            }
            close(pfd[0]);
            waitpid(pid, NULL, 0);
            fail[p] += n - got;   /* the child exited early */
            continue;
        }
        for (int i = 0; i < n; i++) {
            int llvm = p == P_OBJ_LLVM || p == P_ORC_LLVM;
            if (llvm ? !kb[i].lobj : !kb[i].tobj)
                continue;
            double us = time_path(p, &kb[i]);
            if (us < 0)
                fail[p]++;
            else
                add(&rows[p], us);
        }
    }
    printf("model: %s, %d kernels; dlopen tcc.so (libtcc): %.1f ms, "
           "llvm.so (libLLVM): %.1f ms\n\n", model, n, ms_tcc, ms_llvm);
    printf("| path | kernels | mean (us) | min (us) | max (us) | total (ms) "
           "|\n|---|---|---|---|---|---|\n");
    for (int p = 0; p < NP; p++) {
        print_row(names[p], &rows[p]);
        if (fail[p])
            printf("|   (%d kernels failed to load this way) | | | | | |\n",
                   fail[p]);
    }
    for (int i = 0; i < n; i++) {
        free(kb[i].tcc);
        free(kb[i].llvm);
    }
    free(kb);
    kiln_lower_free(&prog);
    kiln_graph_free(g);
    return 0;
}
