/*
 * datafile.c — opening a data file under the caller's kiln_read_options
 * (datafile.h, <kiln/io.h>).
 *
 * A model names its data files, and a model is untrusted: it must not make
 * kiln block on a FIFO, read a device until memory runs out or load a file
 * of any size.  Whether such files are read, and how much, is the caller's
 * choice (kiln_read_options, $KILN_DATA_MAX_SIZE, kiln run's flags), never
 * the model's.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "datafile.h"
#include "excerpt.h"
#include "ir.h"

#include <kiln/cache.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

/* Is field `f` inside the caller's struct_size? */
#define OPT_HAS(opt, f) \
    ((opt) && (opt)->struct_size >= offsetof(kiln_read_options, f) + \
                                     sizeof((opt)->f))

int data_max_size(const kiln_read_options *opt, uint64_t *max, kiln_err *err)
{
    const char *e;
    uint64_t v;

    if (OPT_HAS(opt, max_size) && opt->max_size > 0) {
        *max = opt->max_size;
        return 0;
    }
    e = getenv("KILN_DATA_MAX_SIZE");
    if (!e || !*e) {
        *max = KILN_DATA_MAX_SIZE_DEFAULT;
        return 0;
    }
    if (kiln_cache_parse_size(e, &v) != 0 || v == 0) {
        char shown[EXCERPT_SIZE(EXCERPT_MAX)];
        return kiln_seterr(err, KILN_ERR_ARG,
                           "KILN_DATA_MAX_SIZE: bad size '%s' (a positive "
                           "number of bytes with an optional K, M, G or T "
                           "suffix, e.g. 4G)",
                           excerpt(shown, sizeof shown, e, strlen(e),
                                   EXCERPT_MAX));
    }
    *max = v;
    return 0;
}

int data_too_large(const char *path, const char *what, uint64_t max,
                   kiln_err *err)
{
    return kiln_seterr(err, KILN_ERR_PARSE,
                       "%s: %s is over the data size limit of %" PRIu64
                       " bytes (raise it with KILN_DATA_MAX_SIZE=SIZE, "
                       "kiln run --data-max-size SIZE or "
                       "kiln_read_options.max_size)", path, what, max);
}

static const char *file_kind(mode_t m)
{
    if (S_ISFIFO(m))
        return "is a FIFO";
    if (S_ISCHR(m))
        return "is a character device";
    if (S_ISBLK(m))
        return "is a block device";
    if (S_ISSOCK(m))
        return "is a socket";
    return "not a regular file";
}

const kiln_memfile *data_memfile(const char *path,
                                 const kiln_read_options *opt, int *only)
{
    *only = OPT_HAS(opt, memfiles_only) && opt->memfiles_only;
    if (!OPT_HAS(opt, n_memfiles) || !opt->memfiles)
        return NULL;
    for (size_t i = 0; i < opt->n_memfiles; i++)
        if (opt->memfiles[i].path && strcmp(opt->memfiles[i].path, path) == 0)
            return &opt->memfiles[i];
    return NULL;
}

/* Open a kiln_memfile as a stream (fmemopen wants at least one byte). */
static int memfile_open(const char *path, const kiln_memfile *mf,
                        uint64_t max, data_file *df, kiln_err *err)
{
    static const char empty[1] = { 0 };
    if ((uint64_t)mf->size > max) {
        char what[40];
        snprintf(what, sizeof what, "%" PRIu64 " bytes", (uint64_t)mf->size);
        return data_too_large(path, what, max, err);
    }
    df->f = mf->size ? fmemopen((void *)mf->data, mf->size, "rb")
                     : fmemopen((void *)empty, 1, "rb");
    if (!df->f)
        return kiln_seterr(err, KILN_ERR_NOMEM, "%s: cannot open: %s", path,
                           strerror(errno));
    if (!mf->size)
        (void)fgetc(df->f); /* at the end: an empty file */
    df->regular = 1;
    df->size = (uint64_t)mf->size;
    df->max = max;
    return 0;
}

int data_open(const char *path, const kiln_read_options *opt, data_file *df,
              kiln_err *err)
{
    int special = OPT_HAS(opt, allow_special) && opt->allow_special;
    struct stat st;
    uint64_t max;
    int fd, rc;

    if ((rc = data_max_size(opt, &max, err)) != 0)
        return rc;
    int only;
    const kiln_memfile *mf = data_memfile(path, opt, &only);
    if (mf)
        return memfile_open(path, mf, max, df, err);
    if (only)
        return kiln_seterr(err, KILN_ERR_IO, "%s: not a data file bound into "
                           "the model", path);
    /* Without allow_special, O_NONBLOCK: opening a FIFO with no writer
     * returns at once (and the FIFO is then refused) instead of waiting. */
    fd = open(path, O_RDONLY | O_CLOEXEC | (special ? 0 : O_NONBLOCK));
    if (fd < 0)
        return kiln_seterr(err, KILN_ERR_IO, "%s: cannot open: %s", path,
                           strerror(errno));
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return kiln_seterr(err, KILN_ERR_IO, "%s: cannot stat: %s", path,
                           strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return kiln_seterr(err, KILN_ERR_IO, "%s: is a directory", path);
    }
    if (!S_ISREG(st.st_mode) && !special) {
        close(fd);
        return kiln_seterr(err, KILN_ERR_IO,
                           "%s: %s; data is read only from regular files "
                           "unless the caller allows others (kiln run "
                           "--data-allow-special, "
                           "kiln_read_options.allow_special)", path,
                           file_kind(st.st_mode));
    }
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > max) {
        char what[40];
        close(fd);
        snprintf(what, sizeof what, "%" PRIu64 " bytes",
                 (uint64_t)st.st_size);
        return data_too_large(path, what, max, err);
    }
    if (!special) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }
    df->f = fdopen(fd, "rb");
    if (!df->f) {
        int e = errno;
        close(fd);
        return kiln_seterr(err, KILN_ERR_NOMEM, "%s: cannot open: %s", path,
                           strerror(e));
    }
    df->regular = S_ISREG(st.st_mode);
    df->size = df->regular ? (uint64_t)st.st_size : 0;
    df->max = max;
    return 0;
}

int data_read_all(const char *path, data_file *df, char **out, size_t *len,
                  kiln_err *err)
{
    char *buf = NULL;
    size_t n = 0, cap;
    int rc = 0;
    /* read at most max + 1 bytes: one more than the limit says the file
     * (a FIFO, or a regular file that grew) is over it */
    cap = df->regular && df->size < df->max ? (size_t)df->size + 1 : 65536;
    for (;;) {
        if (n == cap || !buf) {
            size_t nc = !buf ? cap : cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
            char *nb = realloc(buf, nc);
            if (!nb) {
                rc = kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory",
                                 path);
                goto fail;
            }
            buf = nb;
            cap = nc;
        }
        size_t want = cap - n;
        if ((uint64_t)n + want > df->max + 1)
            want = (size_t)(df->max + 1 - n);
        size_t got = want ? fread(buf + n, 1, want, df->f) : 0;
        n += got;
        if ((uint64_t)n > df->max) {
            char what[48];
            snprintf(what, sizeof what, "more than %" PRIu64 " bytes",
                     df->max);
            rc = data_too_large(path, what, df->max, err);
            goto fail;
        }
        if (got < want)
            break;
    }
    if (ferror(df->f)) {
        rc = kiln_seterr(err, KILN_ERR_IO, "%s: read error: %s", path,
                         strerror(errno));
        goto fail;
    }
    fclose(df->f);
    *out = buf;
    *len = n;
    return 0;
fail:
    free(buf);
    fclose(df->f);
    return rc;
}
