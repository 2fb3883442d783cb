/*
 * kiln_bridgestan.c — `kiln bridgestan MODEL.kg -o LIB.so [--logp NAME]`:
 * write a shared library exporting BridgeStan's C API for a model
 * (docs/bridgestan.md).  The library is a copy of kiln's template
 * (tools/bridgestan_shim.c, installed as $(pkglibdir)/bridgestan.so) with
 * the model's text appended in a trailer (tools/bs_trailer.h).
 */
#define _XOPEN_SOURCE 700   /* realpath */
#include "kiln_cli.h"

#include "bs_trailer.h"
#include "install_dirs.h"   /* KILN_PKGLIB_DIR */
#include <kiln/model.h>

#include "ir.h"             /* the graph's outputs, for --logp */
#include "loader.h"         /* kiln_loader_build_top */
#include "trust.h"          /* the template is opened as code is */

#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char bs_usage[] =
    "usage: kiln bridgestan MODEL.kg -o LIB.so [--logp NAME] "
    "[--mpi | --mpi-axis N]\n"
    "Writes LIB.so, a library exporting BridgeStan's C API for the model\n"
    "(a copy of kiln's template with the model appended; "
    "$KILN_BRIDGESTAN_TEMPLATE\n"
    "names another template).  --mpi-axis N (--mpi: the model's declared\n"
    "axis) makes a library that runs under MPI, the data split over the\n"
    "ranks along N (bridgestan-mpi.so; $KILN_BRIDGESTAN_MPI_TEMPLATE).\n"
    "See docs/bridgestan.md.\n";

/* The whole regular file at path, NUL-terminated, at most `max` bytes.
 * NULL with a message in why. */
static char *slurp_fd(int fd, const char *path, uint64_t max, size_t *len,
                      char *why, size_t why_size)
{
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, why_size, "%s: not a regular file", path);
        goto out;
    }
    if ((uint64_t)st.st_size > max) {
        snprintf(why, why_size, "%s: %lld bytes is over the limit of %llu",
                 path, (long long)st.st_size, (unsigned long long)max);
        goto out;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        snprintf(why, why_size, "out of memory reading %s", path);
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(why, why_size, "cannot read %s: %s", path,
                     r < 0 ? strerror(errno) : "file shrank");
            free(buf);
            buf = NULL;
            goto out;
        }
        got += (size_t)r;
    }
    buf[got] = '\0';
    *len = got;
out:
    close(fd);
    return buf;
}

static char *slurp(const char *path, uint64_t max, size_t *len, char *why,
                   size_t why_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(why, why_size, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    return slurp_fd(fd, path, max, len, why, why_size);   /* closes fd */
}

/* The template library: $KILN_BRIDGESTAN_TEMPLATE (the caller's
 * environment may name code; a model may not), else the one built beside
 * this libkiln when it runs from its build tree, else the installed one.
 * With mpi, the MPI template: $KILN_BRIDGESTAN_MPI_TEMPLATE, else
 * bridgestan-mpi.so found the same way (built only by configure
 * --with-mpi). */
static const char *find_template(int mpi, char *buf, size_t size)
{
    const char *env = getenv(mpi ? "KILN_BRIDGESTAN_MPI_TEMPLATE"
                                 : "KILN_BRIDGESTAN_TEMPLATE");
    const char *name = mpi ? "bridgestan-mpi.so" : "bridgestan.so";
    if (env && *env)
        return env;
    char top[3000];
    struct stat st;
    if (kiln_loader_build_top(top, sizeof top) == 0) {
        snprintf(buf, size, "%s/tools/.libs/%s", top, name);
        if (stat(buf, &st) == 0)
            return buf;
    }
    snprintf(buf, size, "%s/%s", KILN_PKGLIB_DIR, name);
    return buf;
}

/* The output's directory ("." for a bare name) into buf. */
static void dir_of(const char *path, char *buf, size_t size);

/* Open the template under core/support/trust.h's rule -- every model library
 * made from it runs its code: its directory with every ancestor checked, then
 * the file by descriptor, which is what is read.  The fd, or -1 with a
 * message in why. */
static int open_template(const char *tmpl, char *why, size_t size)
{
    char abs[PATH_MAX + 2], dir[PATH_MAX + 2], w[8400], cwd[PATH_MAX];
    size_t tl = strlen(tmpl), cl = 0;
    if (tmpl[0] != '/' && getcwd(cwd, sizeof cwd))
        cl = strlen(cwd) + 1;
    if ((tmpl[0] != '/' && !cl) || cl + tl >= PATH_MAX) {
        snprintf(why, size, "cannot resolve %.200s", tmpl);
        return -1;
    }
    if (cl) {                   /* CWD/TEMPLATE */
        memcpy(abs, cwd, cl - 1);
        abs[cl - 1] = '/';
    }
    memcpy(abs + cl, tmpl, tl + 1);
    dir_of(abs, dir, sizeof dir);
    const char *base = strrchr(abs, '/') + 1;
    int dfd = kiln_trust_open_dir(-1, NULL, dir, 1, w, sizeof w);
    int fd = dfd < 0 ? dfd : kiln_trust_open_file(dfd, dir, base, 1, 1, w,
                                                  sizeof w);
    if (dfd >= 0)
        close(dfd);
    /* (a message cut at `size` is still one clear line) */
    int n = 0;
    if (fd == -1)
        n = snprintf(why, size, "cannot open %.1500s: %s", tmpl,
                     strerror(ENOENT));
    else if (fd < 0)
        n = snprintf(why, size, "refusing %.1500s: %.2000s", tmpl, w);
    (void)n;
    return fd;
}

/* 1 when a and b name the same existing file. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* The output's directory ("." for a bare name) into buf. */
static void dir_of(const char *path, char *buf, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, size, ".");
    else if (slash == path)
        snprintf(buf, size, "/");
    else
        snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

/* Write template + text + meta + footer to a temporary file beside `out`
 * and rename it into place: an existing `out` is replaced whole or not at
 * all.  0, or 1 with a message on stderr. */
static int write_library(const char *out, size_t tmpl_len,
                         const char *tmpl_bytes, const char *text,
                         size_t text_len, const unsigned char *data,
                         size_t data_len, const char *meta, size_t meta_len)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 32];
    dir_of(out, dir, sizeof dir);
    const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, base) >=
        sizeof tmp) {
        fprintf(stderr, "kiln: bridgestan: output path too long: %s\n", out);
        return 1;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "kiln: bridgestan: cannot create a file in %s: %s\n",
                dir, strerror(errno));
        return 1;
    }
    bst_footer f = {text_len, meta_len, 0, BST_VERSION, (uint32_t)data_len};
    f.checksum = bst_fnv1a(bst_fnv1a(bst_fnv1a(BST_FNV_INIT, text, text_len),
                                     data, data_len),
                           meta, meta_len);
    unsigned char foot[BST_FOOTER];
    bst_footer_encode(foot, &f);
    mode_t mask = umask(0);
    umask(mask);
    FILE *fp = fdopen(fd, "wb");
    if (!fp || fwrite(tmpl_bytes, 1, tmpl_len, fp) != tmpl_len ||
        fwrite(text, 1, text_len, fp) != text_len ||
        (data_len && fwrite(data, 1, data_len, fp) != data_len) ||
        fwrite(meta, 1, meta_len, fp) != meta_len ||
        fwrite(foot, 1, sizeof foot, fp) != sizeof foot ||
        fflush(fp) != 0 || fchmod(fd, 0755 & ~mask) != 0 || fsync(fd) != 0) {
        fprintf(stderr, "kiln: bridgestan: cannot write %s: %s\n", tmp,
                strerror(errno));
        if (fp)
            fclose(fp);
        else
            close(fd);
        unlink(tmp);
        return 1;
    }
    if (fclose(fp) != 0 || rename(tmp, out) != 0) {
        fprintf(stderr, "kiln: bridgestan: cannot write %s: %s\n", out,
                strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}

/* The data region (bs_trailer.h): every data file the model's shared
 * values read (npy(), csv(), json(); a file named twice is bound once),
 * by the path the parser resolves against base_dir, with its bytes.
 * *nfiles counts them.  0, or 1 with a message on stderr. */
static int bind_data(const kiln_graph *g, const char *base_dir,
                     unsigned char **data, size_t *len, int *nfiles)
{
    unsigned char *d = NULL;
    size_t n = 0;
    int rc = 1;
    *nfiles = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const char *src = g->nodes[i].source;
        const char *q = src ? strchr(src, '"') : NULL;
        if (!q)
            continue;
        /* the file name: the first string of `kind("path"[, "col"])`,
         * escaped with backslashes (core/front/grammar.c, put_escaped) */
        char name[PATH_MAX], full[2 * PATH_MAX + 2], why[PATH_MAX + 200];
        size_t k = 0;
        for (q++; *q && *q != '"' && k + 1 < sizeof name; q++) {
            if (*q == '\\' && q[1])
                q++;
            name[k++] = *q;
        }
        name[k] = '\0';
        if (name[0] == '/')
            snprintf(full, sizeof full, "%s", name);
        else
            snprintf(full, sizeof full, "%s/%s", base_dir, name);
        int seen = 0;
        for (uint64_t at = 0; at < n && !seen;) {
            const char *path;
            const unsigned char *bytes;
            uint64_t size;
            if (bst_data_next(d, n, &at, &path, &bytes, &size) != 1)
                break;
            seen = strcmp(path, full) == 0;
        }
        if (seen)
            continue;
        size_t flen = 0;
        char *bytes = slurp(full, BST_DATA_MAX, &flen, why, sizeof why);
        if (!bytes) {
            fprintf(stderr, "kiln: bridgestan: binding data file: %s\n", why);
            goto out;
        }
        size_t add = strlen(full) + 1 + 8 + flen;
        if (n + add > BST_DATA_MAX) {
            fprintf(stderr, "kiln: bridgestan: the model's data files are "
                    "over %llu bytes in all; a library binds at most that "
                    "much\n", (unsigned long long)BST_DATA_MAX);
            free(bytes);
            goto out;
        }
        unsigned char *nd = realloc(d, n + add);
        if (!nd) {
            fputs("kiln: out of memory\n", stderr);
            free(bytes);
            goto out;
        }
        d = nd;
        memcpy(d + n, full, strlen(full) + 1);
        n += strlen(full) + 1;
        bst_put(d + n, flen, 8);
        memcpy(d + n + 8, bytes, flen);
        n += 8 + flen;
        free(bytes);
        (*nfiles)++;
    }
    rc = 0;
out:
    if (rc) {
        free(d);
        d = NULL;
        n = 0;
    }
    *data = d;
    *len = n;
    return rc;
}

/* Parse the model again from the bound data only, as the library will
 * (memfiles_only): every file it reads must be among them.  0, or 1 with
 * a message on stderr. */
static int check_bound(const char *text, const char *model,
                       const char *base_dir, const unsigned char *data,
                       size_t data_len)
{
    kiln_memfile *mf = NULL;
    kiln_read_options ro;
    memset(&ro, 0, sizeof ro);
    ro.struct_size = sizeof ro;
    ro.memfiles_only = 1;
    if (bst_data_memfiles(data, data_len, &mf, &ro.n_memfiles) != 0) {
        fputs("kiln: out of memory\n", stderr);
        return 1;
    }
    ro.memfiles = mf;
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string_opts(text, model, base_dir, &ro, &err);
    free(mf);
    if (!g) {
        fprintf(stderr, "kiln: bridgestan: the data bound into the library "
                "do not reproduce the model: %s\n", err.message);
        return 1;
    }
    kiln_graph_free(g);
    return 0;
}

/* The metadata block (bs_trailer.h): nfields NUL-terminated strings.
 * malloc'd; NULL when out of memory. */
static char *make_meta(const char *field[BST_NFIELDS], int nfields,
                       size_t *len)
{
    size_t n = 0;
    for (int i = 0; i < nfields; i++)
        n += strlen(field[i]) + 1;
    char *m = malloc(n), *p = m;
    if (!m)
        return NULL;
    for (int i = 0; i < nfields; i++) {
        size_t k = strlen(field[i]) + 1;
        memcpy(p, field[i], k);
        p += k;
    }
    *len = n;
    return m;
}

/* --logp NAME must be one of g's outputs: 0, or 1 with a message. */
static int check_logp(const kiln_graph *g, const char *logp)
{
    for (int i = 0; i < g->n_outputs; i++)
        if (strcmp(g->outputs[i].name, logp) == 0)
            return 0;
    fprintf(stderr, "kiln: bridgestan: --logp '%s': the model has no output "
            "of that name (outputs:", logp);
    for (int i = 0; i < g->n_outputs; i++)
        fprintf(stderr, "%s %s", i ? "," : "", g->outputs[i].name);
    fprintf(stderr, "%s)\n", g->n_outputs ? "" : " none");
    return 1;
}

/* The axis of an MPI library: `axis` (--mpi-axis), else the model's
 * declared one; checked by partitioning a copy of the model (part 0 of 1,
 * no data: what can be checked before the data), and no transformed
 * parameter or generated quantity may depend on it (a rank's
 * param_constrain cannot compute it: it was refused only there).  The
 * name, owned by g or the caller; NULL with a message on stderr. */
static const char *mpi_axis(kiln_graph *g, const char *text,
                            const char *model, const char *base_dir,
                            const char *axis)
{
    kiln_err err = {0, ""};
    /* the option given, for the messages */
    char opt[160];
    if (axis)
        snprintf(opt, sizeof opt, "--mpi-axis %.120s", axis);
    else
        snprintf(opt, sizeof opt, "--mpi");
    if (!axis) {
        axis = kiln_graph_partition_axis(g);
        if (!axis) {
            fprintf(stderr, "kiln: bridgestan: --mpi: %s declares no "
                    "observation axis (`partition N`); name one with "
                    "--mpi-axis N\n", model);
            return NULL;
        }
    }
    kiln_graph *copy = kiln_parse_string(text, model, base_dir, &err);
    kiln_partition p = {axis, 0, 1};
    if (!copy || kiln_graph_partition(copy, &p, &err) != 0) {
        fprintf(stderr, "kiln: bridgestan: %s: %s: %s\n", opt, model,
                err.message);
        axis = NULL;
    }
    kiln_graph_free(copy);
    int sym = -1;
    for (int k = 0; axis && k < g->n_symbols; k++)
        if (g->symbols[k] && strcmp(g->symbols[k], axis) == 0)
            sym = k;
    for (int j = 0; axis && sym >= 0 && j < g->n_outputs; j++) {
        const kiln_output *o = &g->outputs[j];
        if (o->kind != KILN_OUTPUT_TP && o->kind != KILN_OUTPUT_GQ)
            continue;
        int dep = kiln_ir_part_depends(g, sym, o->value, &err);
        if (dep == 0)
            continue;
        if (dep < 0)
            fprintf(stderr, "kiln: bridgestan: %s: %s: %s\n", opt, model,
                    err.message);
        else
            fprintf(stderr, "kiln: bridgestan: %s: %s: %s '%s' depends on "
                    "the axis '%s': under MPI no rank can compute it "
                    "(param_constrain would refuse it); compute it from "
                    "the draws, or build a serial library\n", opt, model,
                    o->kind == KILN_OUTPUT_TP ? "transformed parameter"
                                              : "generated quantity",
                    o->name, axis);
        axis = NULL;
    }
    return axis;
}

int kiln_cli_bridgestan(int argc, char **argv)
{
    const char *model = NULL, *out = NULL, *logp = NULL, *axis = NULL;
    int mpi = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) &&
            i + 1 < argc)
            out = argv[++i];
        else if (strcmp(a, "--logp") == 0 && i + 1 < argc)
            logp = argv[++i];
        else if (strcmp(a, "--mpi-axis") == 0 && i + 1 < argc) {
            axis = argv[++i];
            mpi = 1;
        } else if (strcmp(a, "--mpi") == 0)
            mpi = 1;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(bs_usage, stdout);
            return 0;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kiln: unknown or incomplete option '%s'\n%s", a,
                    bs_usage);
            return 2;
        } else if (!model)
            model = a;
        else {
            fprintf(stderr, "kiln: more than one model file ('%s', '%s')\n",
                    model, a);
            return 2;
        }
    }
    if (!model || !out || !*out) {
        fputs(bs_usage, stderr);
        return 2;
    }
    if (logp && !*logp) {
        fputs("kiln: bridgestan: --logp needs a name\n", stderr);
        return 2;
    }
    if (axis && !*axis) {
        fputs("kiln: bridgestan: --mpi-axis needs a name\n", stderr);
        return 2;
    }

    /* the model: read once, parsed from the same bytes that are embedded
     * (errors as kiln check's; nothing is written) */
    char why[PATH_MAX + 200], abs[PATH_MAX], base_dir[PATH_MAX];
    size_t text_len = 0, tmpl_len = 0, meta_len = 0;
    char *text = slurp(model, BST_TEXT_MAX, &text_len, why, sizeof why);
    char *tmpl_bytes = NULL, *meta = NULL;
    unsigned char *data = NULL;
    size_t data_len = 0;
    kiln_graph *g = NULL;
    int rc = 1;
    if (!text) {
        fprintf(stderr, "kiln: %s\n", why);
        return 1;
    }
    if (memchr(text, 0, text_len)) {
        fprintf(stderr, "kiln: %s: the model holds a NUL byte\n", model);
        goto out;
    }
    if (!realpath(model, abs)) {
        fprintf(stderr, "kiln: %s: %s\n", model, strerror(errno));
        goto out;
    }
    dir_of(abs, base_dir, sizeof base_dir);
    kiln_err err = {0, ""};
    g = kiln_parse_string(text, model, base_dir, &err);
    if (!g) {
        fprintf(stderr, "kiln: %s\n", err.message);
        goto out;
    }
    if (logp && check_logp(g, logp))
        goto out;
    /* what can be checked before any data: a float scalar log density,
     * at least one parameter */
    const char *chosen = NULL;
    if (kiln_model_check_graph(g, logp, &chosen, &err)) {
        fprintf(stderr, "kiln: bridgestan: %s: %s\n", model, err.message);
        goto out;
    }
    if (mpi && !(axis = mpi_axis(g, text, model, base_dir, axis)))
        goto out;

    /* the output may not be the model itself, nor the template */
    char tbuf[PATH_MAX + 64];
    const char *tmpl = find_template(mpi, tbuf, sizeof tbuf);
    if (same_file(out, model)) {
        fprintf(stderr, "kiln: bridgestan: -o %s is the model file itself\n",
                out);
        goto out;
    }
    if (same_file(out, tmpl)) {
        fprintf(stderr, "kiln: bridgestan: -o %s is the template library "
                "itself\n", out);
        goto out;
    }
    struct stat st;
    if (stat(out, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "kiln: bridgestan: -o %s is a directory\n", out);
        goto out;
    }
    /* the library is renamed into place: that would replace a FIFO or a
     * device (-o /dev/null as root) with a regular file */
    if (stat(out, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "kiln: bridgestan: -o %s exists and is not a regular "
                "file\n", out);
        goto out;
    }

    /* the template: a shared library without a trailer */
    int tfd = open_template(tmpl, why, sizeof why);
    tmpl_bytes = tfd < 0 ? NULL : slurp_fd(tfd, tmpl, (uint64_t)1 << 30,
                                           &tmpl_len, why, sizeof why);
    if (!tmpl_bytes) {
        if (mpi)
            fprintf(stderr, "kiln: bridgestan: no MPI template library: %s "
                    "(kiln builds bridgestan-mpi.so when configured "
                    "--with-mpi; KILN_BRIDGESTAN_MPI_TEMPLATE names "
                    "one)\n", why);
        else
            fprintf(stderr, "kiln: bridgestan: no template library: %s (set "
                    "KILN_BRIDGESTAN_TEMPLATE to kiln's bridgestan.so)\n",
                    why);
        goto out;
    }
    bst_footer f;
    if (tmpl_len < 64 || memcmp(tmpl_bytes, "\177ELF", 4) != 0 ||
        bst_footer_decode((const unsigned char *)tmpl_bytes + tmpl_len -
                              BST_FOOTER, &f)) {
        fprintf(stderr, "kiln: bridgestan: %s is not kiln's BridgeStan "
                "template (%s)\n", tmpl,
                tmpl_len >= 64 && memcmp(tmpl_bytes, "\177ELF", 4) == 0
                    ? "it already holds a model" : "not an ELF file");
        goto out;
    }

    const char *slash = strrchr(abs, '/');
    const char *field[BST_NFIELDS];
    field[BST_LOGP] = logp ? logp : "";
    field[BST_GRAPH] = kiln_graph_name(g);
    field[BST_BASE_DIR] = base_dir;
    field[BST_FILE] = slash ? slash + 1 : abs;
    field[BST_MPI_AXIS] = mpi ? axis : "";
    meta = make_meta(field, mpi ? BST_NFIELDS : BST_NFIELDS_SERIAL,
                     &meta_len);
    if (!meta) {
        fputs("kiln: out of memory\n", stderr);
        goto out;
    }
    if (meta_len > BST_META_MAX) {   /* the library could not read it */
        fprintf(stderr, "kiln: bridgestan: the metadata (the --logp name, "
                "the graph's name, the model's directory and file name) is "
                "%zu bytes, over the limit of %llu\n", meta_len,
                (unsigned long long)BST_META_MAX);
        goto out;
    }
    if (!bst_base_dir_ok(base_dir)) { /* realpath gives absolute paths */
        fprintf(stderr, "kiln: bridgestan: %s: the model's directory is "
                "not absolute\n", base_dir);
        goto out;
    }
    int nfiles = 0;
    if (bind_data(g, base_dir, &data, &data_len, &nfiles))
        goto out;
    if (nfiles && check_bound(text, model, base_dir, data, data_len))
        goto out;
    if (write_library(out, tmpl_len, tmpl_bytes, text, text_len, data,
                      data_len, meta, meta_len))
        goto out;
    printf("%s: BridgeStan library of graph '%s' (%s), log density '%s'",
           out, kiln_graph_name(g), abs, chosen);
    if (mpi)
        printf("; under MPI, split along '%s'", axis);
    if (nfiles)
        printf("; %d data file%s bound into it (%zu bytes)", nfiles,
               nfiles > 1 ? "s" : "", data_len);
    putchar('\n');
    rc = 0;
out:
    kiln_graph_free(g);
    free(text);
    free(tmpl_bytes);
    free(meta);
    free(data);
    return rc;
}
