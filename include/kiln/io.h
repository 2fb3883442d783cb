/*
 * io.h — reading and writing tensors from files: NumPy `.npy` files,
 * single columns of CSV files, CmdStan JSON data and safetensors files.
 *
 * Error conventions are those of <kiln/kiln.h>: a failing function returns
 * a non-zero kiln_code and, when `err` is not NULL, fills err->code and a
 * one-line err->message; on success `err` is left untouched.  Messages
 * about a file start with the path exactly as the caller passed it.
 * Nothing here calls abort() or exit(), and nothing leaks on error.
 *
 * Tensors returned by these functions own their `data`: it is allocated
 * with malloc() and the caller releases it with free().  `data` is never
 * NULL on success, even for a tensor with zero elements (except
 * kiln_safetensors_get: its tensors are borrowed from the open file, used
 * in place).
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

/* A data file held in memory (kiln_read_options.memfiles). */
typedef struct kiln_memfile {
    const char *path;   /* the path a reader is asked for, as the .kg
                         * parser resolves it (base_dir "/" the name, or
                         * the absolute name as written) */
    const void *data;   /* its bytes (not copied: valid while reading) */
    size_t size;
} kiln_memfile;

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
    /* Added in kiln 0.4 (check struct_size): data files served from
     * memory.  A reader (and the .kg parser's npy(), csv(), json()) asked
     * for a path equal to one entry's `path` reads that entry's bytes
     * instead of the file system; the size limit still applies.  With
     * memfiles_only non-zero every other path is refused ("<path>: not a
     * data file bound into the model", KILN_ERR_IO) and nothing is read
     * from disk: how a BridgeStan library reads the data bound into it
     * (docs/bridgestan.md). */
    const kiln_memfile *memfiles;
    size_t n_memfiles;
    int memfiles_only;
    /* Added for issue 30 (check struct_size): read only a part's rows.
     * With part_nparts >= 1 and part_axis naming a symbol, the .kg
     * parser reads each `shared` value whose declared type has that
     * symbol as a dim (`shared X: f64[N, K] = npy(...)`) as part
     * part_index of part_nparts of it (rows as kiln_model_new_partition
     * splits them): an npy() file is streamed in 1 MiB chunks through
     * the whole value's digest and only the part's rows are kept (memory
     * is the part's; the file is still read whole), a csv() or json()
     * source is read whole, then sliced.  The graph must then be made
     * that part (kiln_graph_partition, kiln_model_new_partition,
     * kiln_mpi_model_new with the same axis, part and count; any other
     * is refused).  0 / NULL: values are read whole.  The readers
     * (kiln_npy_read_opts, ...) ignore these fields. */
    const char *part_axis;
    int part_index, part_nparts;
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

/* ---- CmdStan JSON data (docs/ir.md, "Data") --------------------------
 *
 * A data set read from a CmdStan JSON data file
 * (https://mc-stan.org/docs/cmdstan-guide/json.html): one JSON object whose
 * members are variables.  A variable is a number (a scalar), or arrays
 * nested to any depth up to KILN_MAX_RANK whose leaves are numbers; every
 * array at one depth has the same length (rectangular).  Numbers are
 * integers (no '.', no exponent) or reals; the bare words NaN, Infinity,
 * -Infinity and the strings "NaN", "Inf", "-Inf", "Infinity",
 * "-Infinity" (any case) are reals.  An empty array `[]` is a size-0
 * array of any dtype (for a rank-2 target `[]` has shape (0, n) only when
 * the declared inner dims allow it: every dim after a 0 is unconstrained).
 * Parsed with json-c.  A kiln_json_data is immutable once made and may be
 * read from several threads at once.
 */
typedef struct kiln_json_data kiln_json_data;

/* Parse `len` bytes of JSON text.  `filename` names the text in messages
 * (NULL: "<json>").  Errors: KILN_ERR_ARG (text NULL), KILN_ERR_PARSE
 * ("FILE:LINE:COL: <json-c's reason>", "FILE: the top level must be an
 * object, found an array", "FILE: variable 'x': ragged array: element 2
 * of axis 0 has 3 entries, element 0 has 2", "FILE: variable 'x': rank 9
 * exceeds KILN_MAX_RANK (8)", "FILE: variable 'x': element [1][0] is a
 * string ('abc'), not a number", "FILE:3:2: duplicate key 'x' (first at
 * line 1)", "FILE:2:7: integer 18446744073709551616 is out of range
 * (...)": an integer outside -2^63 .. 2^64 - 1, which json-c cannot
 * store), KILN_ERR_NOMEM.  The text is JSON as json-c's strict mode reads
 * it (no comments, trailing commas, single quotes or text after the
 * object; valid UTF-8; bare NaN/Infinity only in that case); a JSON true,
 * false or null is not a number.
 * The caller frees the result with kiln_json_data_free. */
kiln_json_data *kiln_json_data_parse(const char *text, size_t len,
                                     const char *filename, kiln_err *err);

/* Read and parse the file `path` under the read options `opt` (NULL:
 * defaults; the same size limit and regular-file rule as
 * kiln_npy_read_opts).  Errors: those of kiln_json_data_parse with the
 * path as FILE, and the KILN_ERR_IO / KILN_ERR_PARSE errors of the
 * readers above. */
kiln_json_data *kiln_json_data_read(const char *path,
                                    const kiln_read_options *opt,
                                    kiln_err *err);

/* Free a data set.  NULL is allowed. */
void kiln_json_data_free(kiln_json_data *d);

/* Number of variables, and the name of variable i (0 <= i < n, in the
 * file's order); NULL for i out of range. */
int kiln_json_data_count(const kiln_json_data *d);
const char *kiln_json_data_key(const kiln_json_data *d, int i);

/* 1 when the data set has variable `name`, else 0. */
int kiln_json_data_has(const kiln_json_data *d, const char *name);

/* The shape of variable `name` as written: *rank and shape[0..rank-1]
 * (shape has KILN_MAX_RANK entries); *is_int is 1 when every leaf is an
 * integer (an empty array counts as integer).  Returns 0, or
 * KILN_ERR_NAME ("no variable 'x' in FILE (it has: a, b, c)"), or
 * KILN_ERR_ARG (d or name NULL); rank, shape and is_int may be NULL. */
int kiln_json_data_shape(const kiln_json_data *d, const char *name,
                         int *rank, int64_t *shape, int *is_int);

/* Variable `name` as a tensor of dtype `dt` and rank `rank` whose dims
 * must fit `dims`: a dim >= 0 must equal the data's size; a negative dim
 * (a symbol, KILN_DIM_UNKNOWN) takes the data's size (the caller checks
 * symbols for consistency).  Data ending in an empty array (shape (0),
 * (2, 0), ...) also fits a higher rank: the dims after its 0 are the
 * declared ones, a negative one 0.  Integer leaves convert to any dtype
 * (to bool only 0 and 1; to i32 and i64 only within range; to f64 and f32
 * rounded); real leaves only to f64 and f32 (an f32 overflow is an
 * error).  On success *out owns a malloc'd `data` (never NULL, even for
 * zero elements); on error *out is unchanged.
 * Errors: KILN_ERR_ARG (NULL d, name or out, dims NULL with rank > 0, a
 * bad dtype or rank), KILN_ERR_NAME (no such variable, as above),
 * KILN_ERR_SHAPE ("FILE: variable 'y': expected f64[8], found an array of
 * shape (7)"; "... expected f64[8], found a scalar"; a negative dim is
 * written '?'), KILN_ERR_TYPE ("FILE: variable 'k': expected i64[3],
 * found real values (element [1] is 2.5)", "... expected i32, found a
 * value out of range (3000000000)", "... expected bool[2], found a value
 * other than 0 and 1 (element [1] is 2)"), KILN_ERR_NOMEM.  Messages
 * quote values only as short excerpts. */
int kiln_json_data_get(const kiln_json_data *d, const char *name,
                       kiln_dtype dt, int rank, const int64_t *dims,
                       kiln_tensor *out, kiln_err *err);

/* ---- safetensors (issue 29) ------------------------------------------ */

/* An open safetensors file: the format models ship their weights in
 * (https://github.com/huggingface/safetensors: an unsigned 64-bit
 * little-endian header length N, N bytes of JSON, then the data).  The
 * reader is kiln's own (core/front/safetensors.c). */
typedef struct kiln_safetensors kiln_safetensors;

/* The largest JSON header accepted: the format's own cap, 100 MB. */
#define KILN_SAFETENSORS_HEADER_MAX ((uint64_t)100000000)

/* Open `path` under the caller's read options `opt` (NULL: defaults; the
 * file size limit and the refusal of non-regular files of the other
 * readers, see kiln_read_options).  A regular file is mapped read-only
 * (nothing read until used: the tensors are used in place); a memfile or
 * an allowed special file (a FIFO) is read into memory.
 * The header is JSON, parsed strictly (RFC 8259; duplicate keys
 * refused); every key but "__metadata__" (ignored) names a tensor, an
 * object with exactly the keys "dtype", "shape" (non-negative integers,
 * at most KILN_MAX_RANK) and "data_offsets" ([begin, end] in bytes from
 * the start of the data).  dtypes: F64, F32, I64, I32, BOOL (read in
 * place, as KILN_F64 .. KILN_BOOL), F16 and BF16 (converted to f32 on
 * first use: exact, NaN and infinities kept).  Each tensor's bytes must
 * lie inside the data, be exactly numel * itemsize long and overlap no
 * other tensor's.
 * On success *out is a handle the caller frees with
 * kiln_safetensors_close.  One thread at a time per handle.
 * Errors: KILN_ERR_ARG (NULL arguments), KILN_ERR_IO (as kiln_npy_read;
 * not a regular file), KILN_ERR_NOMEM, KILN_ERR_PARSE with the path and
 * the reason, e.g.
 *   "<path>: truncated: 5 bytes (a safetensors file starts with an
 *    8-byte header length)",
 *   "<path>: header length 200000000 is over the format's limit of
 *    100000000 bytes",
 *   "<path>: truncated: header length 4096 but only 100 bytes follow",
 *   "<path>:1:17: duplicate key 'w' (first at line 1)",
 *   "<path>: tensor 'w': unsupported dtype 'U8' (kiln reads F64, F32,
 *    I64, I32, BOOL, and F16/BF16 converted to f32; convert the file,
 *    e.g. with torch: t.to(torch.float32))",
 *   "<path>: tensor 'w': rank 9 exceeds KILN_MAX_RANK (8)",
 *   "<path>: tensor 'w': data_offsets [0, 64] give 64 bytes, but F32
 *    (4, 8) needs 128",
 *   "<path>: tensor 'w': data_offsets [0, 64] lie outside the 32 bytes
 *    of data",
 *   "<path>: tensors 'a' and 'b' overlap (bytes [0, 64) and [32, 96))",
 *   and the size limit's message. */
int kiln_safetensors_open(const char *path, const kiln_read_options *opt,
                          kiln_safetensors **out, kiln_err *err);

/* The number of tensors (>= 0); 0 for NULL. */
int kiln_safetensors_count(const kiln_safetensors *st);

/* Tensor i's name (owned by st, in the header's order) and, when t is
 * not NULL, its dtype as kiln reads it (F16/BF16: KILN_F32), rank and
 * shape (t->data set to NULL: see kiln_safetensors_get).  *file_dtype,
 * when not NULL, gets the file's dtype ("F32", "BF16", ...).  Returns
 * the name, or NULL when i is out of range. */
const char *kiln_safetensors_info(const kiln_safetensors *st, int i,
                                  kiln_tensor *t, const char **file_dtype);

/* Tensor `name` into *out: dtype, rank, shape and data, which points into
 * the mapping (F32, F64, I64, I32, BOOL on a little-endian host, aligned
 * for its dtype) or at a buffer st made once (F16/BF16 converted, a
 * misaligned tensor copied).  The data is read-only and owned by st:
 * valid until kiln_safetensors_close, or longer where a graph or function
 * bound to it holds the file (kiln_graph_bind_safetensors).  Every BOOL
 * byte must be 0 or 1.
 * Errors: KILN_ERR_ARG (NULL arguments), KILN_ERR_NAME ("<path>: no
 * tensor 'x' (did you mean 'y'?)"), KILN_ERR_PARSE (a bool byte not 0
 * or 1), KILN_ERR_NOMEM.  On error *out is left unchanged. */
int kiln_safetensors_get(kiln_safetensors *st, const char *name,
                         kiln_tensor *out, kiln_err *err);

/* Let go of st (NULL allowed).  The mapping itself goes when nothing
 * bound to it is left (graphs and functions keep it alive). */
void kiln_safetensors_close(kiln_safetensors *st);

#ifdef __cplusplus
}
#endif
#endif
