/*
 * bridgestan_shim.c — kiln's BridgeStan template library: the whole
 * BridgeStan 2.x C API (tools/bridgestan_api.h) over <kiln/model.h>.
 *
 * Built once as $(pkglibdir)/bridgestan.so (the *template*).  `kiln
 * bridgestan MODEL.kg -o LIB.so` (tools/kiln_bridgestan.c) copies it and
 * appends a trailer holding the model's text (tools/bs_trailer.h); at
 * bs_model_construct this code finds the file it was loaded from, reads
 * the trailer, parses the model and makes a kiln_model with the data.
 * docs/bridgestan.md describes it all.
 *
 * Compiled with -fvisibility=hidden: only the bs_ symbols are exported
 * (and Makefile.am's -export-symbols-regex '^bs_' says so to the linker).
 *
 * Compiled a second time with -DKILN_BS_MPI (configure --with-mpi) as
 * bridgestan-mpi.so, over libkiln-mpi (<kiln/mpi.h>): every rank constructs
 * the model, rank 0 evaluates it (each call one collective), the other
 * ranks serve inside bs_model_construct (docs/bridgestan.md, "Under MPI").
 */
#define _GNU_SOURCE   /* dladdr */
#include "bridgestan_api.h"
#include "bs_trailer.h"

#include <kiln/graph.h>
#include <kiln/io.h>
#include <kiln/kiln.h>
#include <kiln/model.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef KILN_BS_MPI
#include <kiln/mpi.h>
#include <pthread.h>
#endif

/* The BridgeStan release whose API this is: the 2.7.0 Python client
 * compares these with its own version and warns on a mismatch. */
const int bs_major_version = 2;
const int bs_minor_version = 7;
const int bs_patch_version = 0;

struct bs_model {
    kiln_model *km;
    char *info;          /* kiln_model_info + what the library is */
#ifdef KILN_BS_MPI
    kiln_mpi_model *mm;  /* owns km; NULL once released at exit */
    int rank, size;
    struct bs_model *next;   /* the list of models (mpi_models) */
#endif
};

/* xoshiro256** state seeded by splitmix64.  kiln models have no random
 * ops yet, so nothing draws from it; it exists because BridgeStan's
 * callers make one for bs_param_constrain(include_gq = true). */
struct bs_rng {
    uint64_t s[4];
};

/* bs_set_print_callback's function: kept for when kiln models print;
 * nothing prints through it yet. */
static _Atomic(STREAM_CALLBACK) print_callback;

/* ---- errors --------------------------------------------------------- */

/* Give the caller "FN: message" in a malloc'd *error_msg (nothing when
 * error_msg is NULL, or when out of memory); returns -1. */
static int fail(char **error_msg, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char **error_msg, const char *fn, const char *fmt, ...)
{
    if (!error_msg)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    size_t pre = strlen(fn) + 2;
    char *s = n >= 0 ? malloc(pre + (size_t)n + 1) : NULL;
    if (s) {
        memcpy(s, fn, pre - 2);
        memcpy(s + pre - 2, ": ", 2);
        va_start(ap, fmt);
        vsnprintf(s + pre, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    *error_msg = s;
    return -1;
}

/* A failed kiln call: its message, and -1. */
static int fail_kiln(char **error_msg, const char *fn, const kiln_err *err)
{
    return fail(error_msg, fn, "%s",
                err->message[0] ? err->message : "unknown kiln error");
}

/* What a bs_ function returns for a kiln call's return code rc.  The
 * callers' kiln_err is not zeroed (1 KiB per call): only message[0] is
 * set, and err is read only after a failure, which fills it. */
static int result(int rc, char **error_msg, const char *fn,
                  const kiln_err *err)
{
    return rc ? fail_kiln(error_msg, fn, err) : 0;
}

/* ---- this library's file and its trailer ------------------------------ */

/* The absolute path of the file this library was loaded from, and that
 * file opened, both taken when it was loaded (a relative dlopen path would
 * go stale with a chdir; a path looked up again later could name another
 * file: the model is read from self_fd only).  self_fd is checked to be
 * the file that is mapped (device and inode in /proc/self/maps), so the
 * model text read is the one that came with this code. */
static char self_path[PATH_MAX];
static int self_errno;
static int self_fd = -1;

/* 0 when fd is the file mapped at addr, or that cannot be told (no
 * /proc); -1 when it is another file. */
static int is_mapped(int fd, const void *addr)
{
    struct stat st;
    FILE *m = fopen("/proc/self/maps", "re");
    if (!m || fstat(fd, &st) != 0) {
        if (m)
            fclose(m);
        return 0;
    }
    char line[PATH_MAX + 256];
    uintptr_t a = (uintptr_t)addr;
    int rc = 0;
    while (fgets(line, sizeof line, m)) {
        unsigned long lo, hi, ino;
        unsigned maj, min;
        if (sscanf(line, "%lx-%lx %*s %*s %x:%x %lu", &lo, &hi, &maj, &min,
                   &ino) == 5 && a >= lo && a < hi) {
            /* the inode decides (stacked file systems may show another
             * device for the mapping) */
            rc = ino == (unsigned long)st.st_ino ? 0 : -1;
            (void)maj;
            (void)min;
            break;
        }
        if (!strchr(line, '\n'))    /* a longer line: skip its rest */
            while (fgets(line, sizeof line, m) && !strchr(line, '\n'))
                ;
    }
    fclose(m);
    return rc;
}

__attribute__((constructor)) static void find_self(void)
{
    Dl_info info;
    void (*self)(void) = find_self;
    void *addr;
    memcpy(&addr, &self, sizeof addr);   /* function -> object pointer */
    if (!dladdr(addr, &info) || !info.dli_fname || !info.dli_fname[0]) {
        self_errno = ENOENT;
        return;
    }
    if (!realpath(info.dli_fname, self_path)) {
        self_errno = errno ? errno : ENOENT;
        self_path[0] = '\0';
        return;
    }
    self_fd = open(self_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (self_fd < 0) {
        self_errno = errno;
    } else if (is_mapped(self_fd, addr) != 0) {
        close(self_fd);
        self_fd = -1;
        self_errno = ESTALE;     /* replaced since it was loaded */
    }
}

__attribute__((destructor)) static void forget_self(void)
{
    if (self_fd >= 0)
        close(self_fd);
    self_fd = -1;
}

static const char template_msg[] =
    "this is kiln's BridgeStan template; make a model library with "
    "kiln bridgestan MODEL.kg -o LIB.so (a model library whose end was cut, "
    "as strip does, looks the same: make it again)";

/* What the trailer holds: the model's text (NUL-terminated) and the
 * metadata strings (pointers into meta). */
typedef struct embedded {
    char *text;
    char *meta;
    const char *field[BST_NFIELDS];
    unsigned char *data;       /* the data region: bound data files */
    uint64_t data_len;
} embedded;

static void embedded_free(embedded *e)
{
    free(e->text);
    free(e->meta);
    free(e->data);
}

static int read_at(int fd, void *buf, uint64_t len, uint64_t off)
{
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t got = pread(fd, p, len > (1u << 30) ? (1u << 30) : len,
                            (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        p += got;
        off += (uint64_t)got;
        len -= (uint64_t)got;
    }
    return 0;
}

/* Read and check the trailer of this library's file into *e.  0, or -1
 * with a message. */
static int read_trailer(embedded *e, char **error_msg)
{
    static const char fn[] = "bs_model_construct";
    memset(e, 0, sizeof *e);
    if (!self_path[0])
        return fail(error_msg, fn, "cannot find the file of this library "
                    "(dladdr/realpath: %s)", strerror(self_errno));
    if (self_fd < 0 && self_errno == ESTALE)
        return fail(error_msg, fn, "%s is no longer the file this library "
                    "was loaded from (replaced since): refusing its model",
                    self_path);
    if (self_fd < 0)
        return fail(error_msg, fn, "cannot open this library's file %s: %s",
                    self_path, strerror(self_errno));
    int fd = self_fd;
    struct stat st;
    unsigned char foot[BST_FOOTER];
    bst_footer f;
    int rc = -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fail(error_msg, fn, "%s is not a regular file", self_path);
        goto out;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < BST_FOOTER || read_at(fd, foot, BST_FOOTER,
                                     size - BST_FOOTER) != 0 ||
        !bst_footer_decode(foot, &f)) {
        fail(error_msg, fn, "%s: %s", self_path, template_msg);
        goto out;
    }
    if (f.version != BST_VERSION) {
        fail(error_msg, fn, "%s: model trailer version %u, this library "
             "reads version %u; make the library again with this kiln",
             self_path, (unsigned)f.version, BST_VERSION);
        goto out;
    }
    /* the text and the metadata lie between the template and the footer:
     * each length and their sum must fit there (no overflow: both are
     * capped far below 2^63 first) */
    uint64_t room = size - BST_FOOTER;
    if (f.text_len > BST_TEXT_MAX || f.meta_len > BST_META_MAX ||
        f.data_len > BST_DATA_MAX ||
        f.text_len + f.meta_len + f.data_len > room) {
        fail(error_msg, fn, "%s: corrupt model trailer (text %llu bytes, "
             "metadata %llu bytes, file %llu bytes)", self_path,
             (unsigned long long)f.text_len, (unsigned long long)f.meta_len,
             (unsigned long long)size);
        goto out;
    }
    e->text = malloc(f.text_len + 1);
    e->meta = malloc(f.meta_len + 1);
    e->data = malloc(f.data_len + 1);
    e->data_len = f.data_len;
    if (!e->text || !e->meta || !e->data) {
        fail(error_msg, fn, "out of memory reading the model (%llu bytes)",
             (unsigned long long)f.text_len);
        goto out;
    }
    uint64_t at = room - f.meta_len - f.data_len - f.text_len;
    if (read_at(fd, e->text, f.text_len, at) != 0 ||
        read_at(fd, e->data, f.data_len, at + f.text_len) != 0 ||
        read_at(fd, e->meta, f.meta_len, at + f.text_len + f.data_len) !=
            0) {
        fail(error_msg, fn, "%s: cannot read the model trailer", self_path);
        goto out;
    }
    uint64_t sum = bst_fnv1a(BST_FNV_INIT, e->text, f.text_len);
    sum = bst_fnv1a(sum, e->data, f.data_len);
    sum = bst_fnv1a(sum, e->meta, f.meta_len);
    if (sum != f.checksum || memchr(e->text, 0, f.text_len) ||
        bst_meta_split(e->meta, f.meta_len, e->field) != 0) {
        fail(error_msg, fn, "%s: corrupt model trailer (checksum or "
             "metadata)", self_path);
        goto out;
    }
    e->text[f.text_len] = '\0';
    e->meta[f.meta_len] = '\0';
    rc = 0;
out:
    if (rc)
        embedded_free(e);
    return rc;
}

/* ---- MPI (bridgestan-mpi.so only) ---------------------------------------
 *
 * Every rank runs the same program and constructs the same models in the
 * same order (bs_model_construct is collective over MPI_COMM_WORLD).  Rank
 * 0 gets the model and evaluates it: each density call is one
 * kiln_mpi_log_density, a collective the other ranks answer from
 * kiln_mpi_serve, which they run inside bs_model_construct until rank 0
 * destroys the model.  Then their bs_model_construct returns a "served"
 * model: names, sizes and transforms work on it, densities fail (only
 * rank 0 evaluates).  One model at a time is served, so rank 0 may hold
 * one live model of this library.
 *
 * mpi_lock serialises every MPI call of this library (the caller may call
 * from several threads: MPI is initialised MPI_THREAD_SERIALIZED) and
 * guards the list of models. */
#ifdef KILN_BS_MPI
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static bs_model *mpi_models;      /* every constructed model */
static int mpi_inited_here;       /* this library called MPI_Init_thread */
static int mpi_exit_registered;

/* At exit: release every model (rank 0's tells the serving ranks to stop,
 * so a program that never destroys its model does not leave them waiting)
 * and finalise MPI when this library initialised it. */
static void mpi_at_exit(void)
{
    pthread_mutex_lock(&mpi_lock);
    int fin = 1;
    MPI_Finalized(&fin);
    for (bs_model *m = mpi_models; m && !fin; m = m->next) {
        kiln_mpi_model_free(m->mm);
        m->mm = NULL;
        m->km = NULL;
    }
    if (mpi_inited_here && !fin)
        MPI_Finalize();
    pthread_mutex_unlock(&mpi_lock);
}

/* Debian's Open MPI dlopens its components, which need libmpi's symbols
 * in the global scope; a client such as Python's ctypes loads this
 * library RTLD_LOCAL, and libmpi with it.  Reopening the libmpi that is
 * loaded (found by dladdr on MPI_Init: whatever its soname) with
 * RTLD_NOLOAD | RTLD_GLOBAL makes it (and its dependencies) global.  The
 * handle is kept: libmpi stays loaded for the process's life anyway. */
static void mpi_make_global(void)
{
    Dl_info info;
    int (*init)(int *, char ***) = MPI_Init;
    void *addr;
    memcpy(&addr, &init, sizeof addr);
    if (dladdr(addr, &info) && info.dli_fname && info.dli_fname[0])
        (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

/* MPI running, initialised here when the program did not.  Under
 * mpi_lock.  0, or -1 with a message. */
static int mpi_start(char **error_msg, const char *fn)
{
    int inited = 0, fin = 0;
    MPI_Finalized(&fin);
    if (fin)
        return fail(error_msg, fn, "MPI has been finalised in this process "
                    "(MPI cannot start again): construct every model "
                    "before MPI_Finalize");
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        mpi_make_global();
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) !=
            MPI_SUCCESS)
            return fail(error_msg, fn, "MPI_Init_thread failed");
        mpi_inited_here = 1;
    }
    if (!mpi_exit_registered && atexit(mpi_at_exit) == 0)
        mpi_exit_registered = 1;
    return 0;
}

/* The collective part of bs_model_construct: m->mm for graph g (rank r
 * builds part r), on rank 0 refused while another model is live.  Under
 * mpi_lock.  0, or -1 with a message. */
static int mpi_model_new(bs_model *m, const kiln_graph *g, const char *logp,
                         const char *data, const char *axis,
                         char **error_msg, const char *fn)
{
    if (mpi_start(error_msg, fn) != 0)
        return -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    for (bs_model *o = mpi_models; o; o = o->next)
        if (m->rank == 0 && o->mm)
            return fail(error_msg, fn, "rank 0 already has a live model of "
                        "this library (the other ranks serve one model at "
                        "a time): destroy it before constructing another");
    kiln_mpi_options mo;
    memset(&mo, 0, sizeof mo);
    mo.struct_size = sizeof mo;
    mo.axis = axis[0] ? axis : NULL;
    kiln_err err = {0, ""};
    if (kiln_mpi_model_new(MPI_COMM_WORLD, g, logp, data, &mo, NULL, NULL,
                           &m->mm, &err) != 0)
        return fail_kiln(error_msg, fn, &err);
    m->km = kiln_mpi_model_part(m->mm);
    m->next = mpi_models;
    mpi_models = m;
    return 0;
}

/* "MPI: rank r of R, axis N: rows [b, e) of T" for bs_model_info. */
static void mpi_describe(const bs_model *m, char *buf, size_t size)
{
    int64_t total = 0, b = 0, e = 0;
    /* the rank's rows (m->km is its first block when it is in blocks) */
    const char *axis = kiln_model_blocks_range(kiln_mpi_model_blocks(m->mm),
                                               &total, &b, &e);
    snprintf(buf, size, "\nMPI: rank %d of %d, axis %s: rows [%lld, %lld) "
             "of %lld%s", m->rank, m->size, axis ? axis : "(none)",
             (long long)b, (long long)e, (long long)total,
             m->rank ? "; serves rank 0's calls inside bs_model_construct"
                     : "; evaluates (the other ranks serve)");
}
#endif

/* The log density (grad not NULL: and its gradient) of m at unc, into
 * err on failure: the model's own in a serial library; under MPI the sum
 * over the ranks, on rank 0 only. */
static int density(const bs_model *m, int jacobian, const double *unc,
                   double *lp, double *grad, kiln_err *err)
{
#ifdef KILN_BS_MPI
    if (!m->mm || m->rank != 0) {
        err->code = KILN_ERR_ARG;
        if (!m->mm)
            snprintf(err->message, sizeof err->message, "the model was "
                     "released when the process exited");
        else
            snprintf(err->message, sizeof err->message, "rank %d of %d "
                     "served rank 0's model inside bs_model_construct until "
                     "rank 0 destroyed it: under MPI only rank 0 evaluates "
                     "the model (docs/bridgestan.md, \"Under MPI\")",
                     m->rank, m->size);
        return -1;
    }
    pthread_mutex_lock(&mpi_lock);
    int rc = kiln_mpi_log_density(m->mm, jacobian, unc, lp, grad, err);
    pthread_mutex_unlock(&mpi_lock);
    return rc;
#else
    return kiln_model_log_density(m->km, jacobian, unc, lp, grad, err);
#endif
}

/* ---- construct, destruct ----------------------------------------------- */

bs_model *bs_model_construct(const char *data, unsigned int seed,
                             char **error_msg)
{
    static const char fn[] = "bs_model_construct";
    (void)seed;   /* no random ops in kiln models: nothing to seed */
    embedded e;
    if (read_trailer(&e, error_msg) != 0)
        return NULL;
    const char *base_dir = e.field[BST_BASE_DIR];
    if (!bst_base_dir_ok(base_dir)) {
        fail(error_msg, fn, "%s: the model trailer's directory '%.200s' is "
             "not absolute (data would resolve against the caller's "
             "working directory); make the library again with kiln "
             "bridgestan", self_path, base_dir);
        embedded_free(&e);
        return NULL;
    }
    size_t nf = strlen(base_dir) + strlen(e.field[BST_FILE]) + 2;
    char *filename = malloc(nf);
    bs_model *m = calloc(1, sizeof *m);
    kiln_err err = {0, ""};
    kiln_graph *g = NULL;
    kiln_memfile *mf = NULL;
    if (!filename || !m) {
        fail(error_msg, fn, "out of memory");
        goto bad;
    }
    snprintf(filename, nf, "%s/%s", base_dir, e.field[BST_FILE]);
    /* the data files bound at build time: read from the trailer, never
     * from disk (the library is self-contained) */
    kiln_read_options ro;
    memset(&ro, 0, sizeof ro);
    ro.struct_size = sizeof ro;
    ro.memfiles_only = 1;
    int r = bst_data_memfiles(e.data, e.data_len, &mf, &ro.n_memfiles);
    if (r != 0) {
        fail(error_msg, fn, r == -1 ? "%s: corrupt data in the model trailer"
             : "%s: out of memory", self_path);
        goto bad;
    }
    ro.memfiles = mf;
    g = kiln_parse_string_opts(e.text, filename, base_dir, &ro, &err);
    free(mf);
    mf = NULL;
    if (!g) {
        fail_kiln(error_msg, fn, &err);
        goto bad;
    }
    const char *logp = e.field[BST_LOGP][0] ? e.field[BST_LOGP] : NULL;
    char mpi_info[300] = "";
#ifdef KILN_BS_MPI
    pthread_mutex_lock(&mpi_lock);
    r = mpi_model_new(m, g, logp, data, e.field[BST_MPI_AXIS], error_msg,
                      fn);
    pthread_mutex_unlock(&mpi_lock);
    kiln_graph_free(g);
    if (r != 0)
        goto bad;
    mpi_describe(m, mpi_info, sizeof mpi_info);
#else
    if (e.field[BST_MPI_AXIS][0]) {   /* only a swapped template does this */
        kiln_graph_free(g);
        fail(error_msg, fn, "%s: the model was made for MPI (axis '%.200s') "
             "but this is the serial template", self_path,
             e.field[BST_MPI_AXIS]);
        goto bad;
    }
    m->km = kiln_model_new(g, logp, data, NULL, NULL, &err);
    kiln_graph_free(g);
    if (!m->km) {
        fail_kiln(error_msg, fn, &err);
        goto bad;
    }
#endif
    const char *ki = kiln_model_info(m->km);
    const char *fmt = "%s\nBridgeStan C API %d.%d.%d by kiln %s: library "
                      "%s, model %s%s";
    int n = snprintf(NULL, 0, fmt, ki, bs_major_version, bs_minor_version,
                     bs_patch_version, KILN_VERSION_STRING, self_path,
                     filename, mpi_info);
    m->info = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!m->info) {
        fail(error_msg, fn, "out of memory");
        goto bad;
    }
    snprintf(m->info, (size_t)n + 1, fmt, ki, bs_major_version,
             bs_minor_version, bs_patch_version, KILN_VERSION_STRING,
             self_path, filename, mpi_info);
    free(filename);
    embedded_free(&e);
#ifdef KILN_BS_MPI
    /* ranks > 0: serve rank 0 until it destroys the model (no lock: rank
     * 0's calls drive every collective) */
    if (m->rank != 0 && kiln_mpi_serve(m->mm, &err) != 0) {
        fail(error_msg, fn, "rank %d of %d, serving rank 0: %s", m->rank,
             m->size, err.message);
        bs_model_destruct(m);
        return NULL;
    }
#endif
    return m;
bad:
    free(mf);
    free(filename);
    embedded_free(&e);
    bs_model_destruct(m);
    return NULL;
}

void bs_model_destruct(bs_model *m)
{
    if (!m)
        return;
#ifdef KILN_BS_MPI
    /* rank 0: tells the serving ranks to stop; others: local */
    pthread_mutex_lock(&mpi_lock);
    for (bs_model **p = &mpi_models; *p; p = &(*p)->next)
        if (*p == m) {
            *p = m->next;
            break;
        }
    kiln_mpi_model_free(m->mm);
    pthread_mutex_unlock(&mpi_lock);
#else
    kiln_model_free(m->km);
#endif
    free(m->info);
    free(m);
}

void bs_free_error_msg(char *error_msg)
{
    free(error_msg);
}

/* ---- names and sizes ---------------------------------------------------- */

const char *bs_name(const bs_model *m)
{
    return m ? kiln_model_name(m->km) : "";
}

const char *bs_model_info(const bs_model *m)
{
    return m ? m->info : "";
}

const char *bs_param_names(const bs_model *m, bool include_tp,
                           bool include_gq)
{
    return m ? kiln_model_param_names(m->km, include_tp, include_gq) : "";
}

const char *bs_param_unc_names(const bs_model *m)
{
    return m ? kiln_model_param_unc_names(m->km) : "";
}

int bs_param_num(const bs_model *m, bool include_tp, bool include_gq)
{
    return m ? kiln_model_n_params(m->km, include_tp, include_gq) : -1;
}

int bs_param_unc_num(const bs_model *m)
{
    return m ? kiln_model_n_unc(m->km) : -1;
}

/* ---- transforms ---------------------------------------------------------- */

/* The start of every call on a model: -1 with a message for NULL. */
#define CHECK_MODEL(m, fn)                                                 \
    do {                                                                   \
        if (!(m))                                                          \
            return fail(error_msg, fn, "the model is NULL");              \
    } while (0)

int bs_param_constrain(const bs_model *m, bool include_tp, bool include_gq,
                       const double *theta_unc, double *theta, bs_rng *rng,
                       char **error_msg)
{
    static const char fn[] = "bs_param_constrain";
    CHECK_MODEL(m, fn);
    /* BridgeStan's rule and words: generated quantities may draw */
    if (include_gq && !rng)
        return fail(error_msg, fn, "include_gq=true but rng=nullptr (make "
                    "one with bs_rng_construct)");
    kiln_err err;
    err.message[0] = '\0';
    return result(kiln_model_constrain(m->km, include_tp, include_gq,
                                       theta_unc, theta, &err),
                  error_msg, fn, &err);
}

int bs_param_unconstrain(const bs_model *m, const double *theta,
                         double *theta_unc, char **error_msg)
{
    static const char fn[] = "bs_param_unconstrain";
    CHECK_MODEL(m, fn);
    kiln_err err;
    err.message[0] = '\0';
    return result(kiln_model_unconstrain(m->km, theta, theta_unc, &err),
                  error_msg, fn, &err);
}

int bs_param_unconstrain_json(const bs_model *m, const char *json,
                              double *theta_unc, char **error_msg)
{
    static const char fn[] = "bs_param_unconstrain_json";
    CHECK_MODEL(m, fn);
    kiln_err err;
    err.message[0] = '\0';
    return result(kiln_model_unconstrain_json(m->km, json, theta_unc, &err),
                  error_msg, fn, &err);
}

/* ---- second derivatives -------------------------------------------------
 * kiln's central differences of the gradient (kiln_fd_hessian,
 * kiln_fd_hvp; docs/bridgestan.md "Hessians"), over density(): in a
 * serial library the model's own gradient, under MPI the sum over the
 * ranks (2n + 1 collectives for a Hessian). */

/* density() as a kiln_density_fn */
static int density_fn(const void *ctx, int jacobian, const double *unc,
                      double *lp, double *grad, kiln_err *err)
{
    return density(ctx, jacobian, unc, lp, grad, err);
}

static int hessian_of(const bs_model *m, int jacobian, const double *unc,
                      double *lp, double *grad, double *hessian,
                      kiln_err *err)
{
    return kiln_fd_hessian(density_fn, m, kiln_model_n_unc(m->km), jacobian,
                           unc, lp, grad, hessian, err);
}

static int hvp_of(const bs_model *m, int jacobian, const double *unc,
                  const double *v, double *lp, double *hvp, kiln_err *err)
{
    return kiln_fd_hvp(density_fn, m, kiln_model_n_unc(m->km), jacobian, unc,
                       v, lp, hvp, err);
}

/* ---- densities (propto is accepted and ignored: kiln keeps every
 * constant, which BridgeStan's contract allows) --------------------------- */

int bs_log_density(const bs_model *m, bool propto, bool jacobian,
                   const double *theta_unc, double *lp, char **error_msg)
{
    static const char fn[] = "bs_log_density";
    (void)propto;
    CHECK_MODEL(m, fn);
    kiln_err err;
    err.message[0] = '\0';
    return result(density(m, jacobian, theta_unc, lp, NULL, &err),
                  error_msg, fn, &err);
}

int bs_log_density_gradient(const bs_model *m, bool propto, bool jacobian,
                            const double *theta_unc, double *val,
                            double *grad, char **error_msg)
{
    static const char fn[] = "bs_log_density_gradient";
    (void)propto;
    CHECK_MODEL(m, fn);
    if (!grad)
        return fail(error_msg, fn, "grad is NULL (bs_log_density gives the "
                                   "density alone)");
    kiln_err err;
    err.message[0] = '\0';
    return result(density(m, jacobian, theta_unc, val, grad, &err),
                  error_msg, fn, &err);
}

int bs_log_density_hessian(const bs_model *m, bool propto, bool jacobian,
                           const double *theta_unc, double *val,
                           double *grad, double *hessian, char **error_msg)
{
    static const char fn[] = "bs_log_density_hessian";
    (void)propto;
    CHECK_MODEL(m, fn);
    kiln_err err;
    err.message[0] = '\0';
    return result(hessian_of(m, jacobian, theta_unc, val, grad, hessian,
                             &err),
                  error_msg, fn, &err);
}

int bs_log_density_hessian_vector_product(const bs_model *m, bool propto,
                                          bool jacobian,
                                          const double *theta_unc,
                                          const double *vector, double *val,
                                          double *hvp, char **error_msg)
{
    static const char fn[] = "bs_log_density_hessian_vector_product";
    (void)propto;
    CHECK_MODEL(m, fn);
    kiln_err err;
    err.message[0] = '\0';
    return result(hvp_of(m, jacobian, theta_unc, vector, val, hvp, &err),
                  error_msg, fn, &err);
}

/* ---- RNG, printing -------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

bs_rng *bs_rng_construct(unsigned int seed, char **error_msg)
{
    bs_rng *r = malloc(sizeof *r);
    if (!r) {
        fail(error_msg, "bs_rng_construct", "out of memory");
        return NULL;
    }
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
    return r;
}

void bs_rng_destruct(bs_rng *rng)
{
    free(rng);
}

int bs_set_print_callback(STREAM_CALLBACK callback, char **error_msg)
{
    (void)error_msg;
    atomic_store(&print_callback, callback);
    return 0;
}
