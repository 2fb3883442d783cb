/*
 * datafile.h — opening a data file (.npy, .csv) under the caller's
 * kiln_read_options: the size limit and the refusal of non-regular files
 * (see <kiln/io.h>).  Internal to libkiln.
 */
#ifndef KILN_DATAFILE_H
#define KILN_DATAFILE_H

#include <kiln/io.h>

#include <stdint.h>
#include <stdio.h>

typedef struct data_file {
    FILE *f;          /* open for reading ("rb") */
    int regular;      /* a regular file: `size` is its size */
    uint64_t size;
    uint64_t max;     /* the size limit in force, in bytes */
} data_file;

/* The size limit `opt` asks for: opt->max_size when set, else
 * $KILN_DATA_MAX_SIZE when set, else KILN_DATA_MAX_SIZE_DEFAULT.
 * Returns 0, or KILN_ERR_ARG (err says why) for a bad environment value. */
int data_max_size(const kiln_read_options *opt, uint64_t *max,
                  kiln_err *err);

/* Open `path` for reading under `opt` (NULL: defaults).  A file that is
 * not regular is refused unless opt->allow_special, and then opened
 * blocking; without it the file is opened non-blocking, so that a FIFO
 * never blocks before it is refused.  A regular file larger than the
 * limit is refused before any byte is read.  Returns 0 with *df filled
 * (close df->f with fclose; a path among opt->memfiles is read from
 * memory, see <kiln/io.h>), or an error code with err set:
 * KILN_ERR_IO ("<path>: cannot open: ...", "<path>: not a regular file
 * ...", "<path>: is a directory"), KILN_ERR_ARG (bad KILN_DATA_MAX_SIZE),
 * KILN_ERR_PARSE (over the size limit). */
int data_open(const char *path, const kiln_read_options *opt, data_file *df,
              kiln_err *err);

/* The entry of opt->memfiles for `path` (NULL: none); *only is set when
 * opt->memfiles_only forbids reading other paths from disk. */
const kiln_memfile *data_memfile(const char *path,
                                 const kiln_read_options *opt, int *only);

/* The error for a file over the limit: `what` says how much was found
 * ("2147483648 bytes", "more than 1024 bytes").  Returns KILN_ERR_PARSE. */
int data_too_large(const char *path, const char *what, uint64_t max,
                   kiln_err *err);

/* Read all of df (opened by data_open) into a new buffer *out of *len
 * bytes (malloc'd, at least one byte; the caller frees it), up to the
 * size limit; df->f is closed either way.  Returns 0, or KILN_ERR_PARSE
 * (over the limit), KILN_ERR_IO ("<path>: read error: ..."),
 * KILN_ERR_NOMEM with err set. */
int data_read_all(const char *path, data_file *df, char **out, size_t *len,
                  kiln_err *err);

#endif
