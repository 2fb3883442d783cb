/*
 * io.h — reading and writing tensors from files: NumPy `.npy` files and
 * single columns of CSV files.
 *
 * Error conventions are those of <kiln/kiln.h>: a failing function returns
 * a non-zero kiln_code and, when `err` is not NULL, fills err->code and a
 * one-line err->message; on success `err` is left untouched.  Messages
 * about a file start with the path exactly as the caller passed it.
 * Nothing here calls abort() or exit(), and nothing leaks on error.
 *
 * Tensors returned by these functions own their `data`: it is allocated
 * with malloc() and the caller releases it with free().  `data` is never
 * NULL on success, even for a tensor with zero elements.
 */
#ifndef KILN_IO_H
#define KILN_IO_H

#include <kiln/kiln.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The data size limit when neither kiln_read_options.max_size nor
 * $KILN_DATA_MAX_SIZE sets one: 1 GiB. */
#define KILN_DATA_MAX_SIZE_DEFAULT ((uint64_t)1 << 30)

/* What the caller allows the readers below to read.  A model names its
 * data files and is untrusted, so these are the caller's choices, never
 * the model's.  Zero-initialise, then set struct_size to
 * sizeof(kiln_read_options); fields beyond struct_size are unset.  A NULL
 * options pointer means every field unset. */
typedef struct kiln_read_options {
    size_t struct_size;
    /* Largest file read, in bytes (a regular file's size, or the bytes
     * read from another file).  0 means $KILN_DATA_MAX_SIZE when set (a
     * size such as "4G", "512M" or "4096", parsed as
     * kiln_cache_parse_size does; any other value is an error), else
     * KILN_DATA_MAX_SIZE_DEFAULT (1 GiB). */
    uint64_t max_size;
    /* Non-zero to read files that are not regular files (FIFOs such as
     * bash's <(...), character devices, sockets), up to max_size bytes.
     * 0: they are refused before anything is read, without blocking
     * (the file is opened O_NONBLOCK).  Directories are always refused. */
    int allow_special;
} kiln_read_options;

/* Read the NumPy array file `path` into `*out`.
 *
 * Accepted files: format versions 1.0, 2.0 and 3.0 (2-byte or 4-byte
 * header length; the header is the usual Python dict literal with exactly
 * the keys 'descr', 'fortran_order' and 'shape', in any order, quoted with
 * ' or ").  The dtype ('descr') must be one of
 *     '<f8' -> KILN_F64   '<f4' -> KILN_F32
 *     '<i8' -> KILN_I64   '<i4' -> KILN_I32   '|b1' -> KILN_BOOL
 * where '=' may stand for '<' (and '<' or '=' for '|' on the one-byte
 * bool); every other dtype, big-endian ('>') included, is refused.
 * fortran_order must be False.  The shape is a tuple of non-negative
 * integers: () for a scalar (rank 0, one element), (n,) for a vector, up
 * to KILN_MAX_RANK dims.  The data must be exactly the number of bytes the
 * header describes (a shorter file is truncated, a longer one has trailing
 * data: both are errors).  Every bool byte must be 0 or 1.  Values are
 * little-endian in the file and converted to the host's byte order.
 *
 * On success `*out` is overwritten: dtype, rank, shape[0..rank-1] (the
 * other shape entries are 0) and `data`, a malloc'd buffer of
 * kiln_shape_numel(rank, shape) elements that the caller owns and frees
 * with free().  On error `*out` is left unchanged.
 *
 * Errors:
 *  KILN_ERR_ARG    path or out is NULL.
 *  KILN_ERR_IO     the file cannot be opened or read; the message is
 *                  "<path>: cannot open: <strerror>" or
 *                  "<path>: read error: <strerror>".
 *  KILN_ERR_PARSE  a malformed or unsupported file, with the reason, e.g.
 *                  "<path>: not a .npy file (bad magic)",
 *                  "<path>: unsupported .npy format version 4.0 (kiln reads
 *                   1.0, 2.0 and 3.0)",
 *                  "<path>: malformed header: <what is wrong>",
 *                  "<path>: unsupported dtype '>f8' (kiln reads
 *                   little-endian f64, f32, i64, i32, bool)",
 *                  "<path>: fortran_order arrays are not supported",
 *                  "<path>: rank 9 exceeds KILN_MAX_RANK (8)",
 *                  "<path>: negative dimension -3 in shape",
 *                  "<path>: shape (...) is too large (byte size overflows)",
 *                  "<path>: truncated: header says 100 elements (800 bytes),
 *                   file has 640",
 *                  "<path>: trailing data after the 100 elements (800
 *                   bytes) the header describes",
 *                  "<path>: bool element 7 has byte value 2 (must be 0 or 1)".
 *  KILN_ERR_NOMEM  the data buffer cannot be allocated.
 */
int kiln_npy_read(const char *path, kiln_tensor *out, kiln_err *err);

/* kiln_npy_read under the caller's read options `opt` (NULL: defaults,
 * which is what kiln_npy_read uses).  Errors: those of kiln_npy_read and
 * those listed under "Limits" after kiln_csv_read_column_opts. */
int kiln_npy_read_opts(const char *path, const kiln_read_options *opt,
                       kiln_tensor *out, kiln_err *err);

/* Write tensor `t` to `path` as a NumPy .npy file that np.load reads back
 * with the same dtype and shape ('<f8', '<f4', '<i8', '<i4' or '|b1';
 * fortran_order False).
 *
 * The file is format version 1.0 (2.0 only if the header would not fit a
 * 2-byte length, which cannot happen with KILN_MAX_RANK dims).  As NumPy
 * does, the header is padded with spaces and ends in '\n' so that the data
 * starts at a multiple of 64 bytes; the bytes are the ones np.save writes
 * for the same array.
 *
 * The write is atomic: the data goes to a new temporary file in the same
 * directory as `path` (".kiln-npy-<pid>-<n>.tmp"), which is flushed to
 * disk and then renamed over `path`.  On any error the temporary file is
 * removed and an existing file at `path` is left as it was.  A new file
 * gets the default permissions (0666 minus the umask); if `path` is a
 * symbolic link the link itself is replaced.  `path` must not name an
 * existing non-regular file (a directory, a device, ...).
 *
 * `t` must be valid: dtype one of the five kiln dtypes, rank 0 ..
 * KILN_MAX_RANK, every dim >= 0, data non-NULL unless the tensor has no
 * elements, and every bool byte 0 or 1.  `t` is only read.
 *
 * Errors:
 *  KILN_ERR_ARG    path or t is NULL, or `t` is invalid as above (message
 *                  says what is wrong).
 *  KILN_ERR_IO     the temporary file cannot be created, written, flushed
 *                  or renamed, or `path` names a non-regular file; the
 *                  message has the path and strerror.
 *  KILN_ERR_NOMEM  a small internal allocation failed.
 */
int kiln_npy_write(const char *path, const kiln_tensor *t, kiln_err *err);

/* Read the column named `column` of the CSV file `path` as a rank-1
 * tensor of `dtype`, one element per data row.
 *
 * The file follows RFC 4180: the first record is a header row of column
 * names; fields are separated by ','; a field may be quoted with '"', in
 * which case it may hold ',', '"' (written "") and line breaks; records
 * end with CRLF, LF or a lone CR, and the last line break is optional.
 * A UTF-8 byte-order mark at the start is skipped.  Completely empty lines
 * are skipped.  Every record must have as many fields as the header.
 * `column` is matched exactly (case-sensitive) against the header names
 * and must appear exactly once.
 *
 * Values (spaces and tabs around them are ignored):
 *  KILN_F64, KILN_F32  a number as strtod/strtof read it in the "C" locale
 *                      (whatever the program's locale): decimal or hex
 *                      notation, "nan", "inf", "infinity" (any case, with
 *                      an optional sign).  A finite number too large for
 *                      the dtype is an error; tiny ones round to 0.
 *  KILN_I64, KILN_I32  an optional sign and decimal digits only ("1.0" and
 *                      "1e3" are refused), within the dtype's range.
 *  KILN_BOOL           exactly one of 0, 1, true, false, True, False.
 * An empty field is a bad value.
 *
 * On success `*out` is overwritten: dtype `dtype`, rank 1, shape[0] = the
 * number of data rows (possibly 0; other shape entries are 0) and `data`,
 * a malloc'd buffer the caller owns and frees with free().  On error
 * `*out` is left unchanged.
 *
 * Errors:
 *  KILN_ERR_ARG    path, column or out is NULL, or dtype is not a kiln
 *                  dtype.
 *  KILN_ERR_IO     "<path>: cannot open: <strerror>" or
 *                  "<path>: read error: <strerror>".
 *  KILN_ERR_NAME   no such column, listing the header:
 *                  "radon.csv: no column 'flor' (columns: county,
 *                   county_code, floor, log_radon, uppm)"; or the name
 *                  appears more than once:
 *                  "<path>: column 'x' appears more than once (columns 2
 *                   and 5)".
 *  KILN_ERR_PARSE  "<path>: empty file (no header row)";
 *                  "<path>:<line>: expected 5 fields, found 4" (line where
 *                   the record starts);
 *                  "<path>:<line>:<col>: bad f64 value 'abc' in column 'x'"
 *                   (line and column, both 1-based, of the start of the
 *                   field; column counted in bytes; "(out of range)" is
 *                   appended for a number that does not fit the dtype);
 *                  "<path>:<line>:<col>: unterminated quoted field";
 *                  "<path>:<line>:<col>: unexpected character 'x' after a
 *                   closing quote".
 *  KILN_ERR_NOMEM  a buffer cannot be allocated.
 */
int kiln_csv_read_column(const char *path, const char *column,
                         kiln_dtype dtype, kiln_tensor *out, kiln_err *err);

/* kiln_csv_read_column under the caller's read options `opt` (NULL:
 * defaults, which is what kiln_csv_read_column uses).
 *
 * Limits (both readers, with or without _opts):
 *  KILN_ERR_IO     "<path>: is a FIFO; data is read only from regular
 *                   files unless the caller allows others (...)" (also
 *                   "is a character device", "is a block device", "is a
 *                   socket"), unless opt->allow_special; nothing is read
 *                   and the open never blocks.
 *                  "<path>: is a directory".
 *  KILN_ERR_PARSE  "<path>: 2147483648 bytes is over the data size limit
 *                   of 1073741824 bytes (raise it with
 *                   KILN_DATA_MAX_SIZE=SIZE, kiln run --data-max-size SIZE
 *                   or kiln_read_options.max_size)"; for a regular file
 *                   this is decided from its size before anything is read,
 *                   for another file after max_size + 1 bytes ("more than
 *                   N bytes").
 *  KILN_ERR_ARG    $KILN_DATA_MAX_SIZE is used and is not a positive size
 *                  ("KILN_DATA_MAX_SIZE: bad size 'abc' (...)").
 * Messages quote what was read (a header, a value, a dtype) only as a
 * short excerpt: at most 32 bytes of it, "..." marking a cut; a byte
 * outside printable ASCII is written \xNN (\n, \r and \t for those
 * three), and a backslash or single quote gets a backslash before it. */
int kiln_csv_read_column_opts(const char *path, const char *column,
                              kiln_dtype dtype, const kiln_read_options *opt,
                              kiln_tensor *out, kiln_err *err);

#ifdef __cplusplus
}
#endif
#endif
