/*
 * kiln.h — the public C API of kiln: dtypes, errors, compiling a graph to a
 * function and calling it.  Graphs are built with <kiln/graph.h> or parsed
 * from the `.kg` text format (docs/ir.md).
 *
 * Conventions used by every function in this header:
 *  - a function that can fail takes a `kiln_err *err` last; on failure it
 *    returns NULL or a non-zero kiln_code and fills err->code and
 *    err->message (a NUL-terminated, one-line English message).  `err` may
 *    be NULL when the caller does not want the message.  On success `err`
 *    is left untouched.
 *  - nothing in the library calls abort() or exit(); every bad input is an
 *    error return.
 *  - tensors are dense and C-ordered (row-major); shapes are in elements,
 *    sizes in bytes.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_VERSION_STRING "0.1.0"

/* Largest tensor rank kiln handles (shapes are fixed arrays of this size). */
#define KILN_MAX_RANK 8

/* Element types.  Sizes: f64 8, f32 4, i64 8, i32 4, bool 1 byte (0 or 1). */
typedef enum kiln_dtype {
    KILN_F64 = 0,
    KILN_F32 = 1,
    KILN_I64 = 2,
    KILN_I32 = 3,
    KILN_BOOL = 4,
    KILN_NDTYPES = 5
} kiln_dtype;

/* Error codes.  KILN_OK is 0; every other value is an error. */
typedef enum kiln_code {
    KILN_OK = 0,
    KILN_ERR_PARSE,   /* malformed .kg text: message starts "file:line:col: " */
    KILN_ERR_TYPE,    /* dtype mismatch, unknown op, bad arity or attribute */
    KILN_ERR_SHAPE,   /* shapes that do not match: message names both */
    KILN_ERR_NAME,    /* undefined or duplicate name */
    KILN_ERR_IO,      /* a file could not be read or written */
    KILN_ERR_NOMEM,   /* an allocation failed */
    KILN_ERR_BACKEND, /* no backend could compile or load a kernel */
    KILN_ERR_ARG,     /* a bad argument to an API function */
    KILN_ERR_RUNTIME  /* an error while running (e.g. index out of bounds) */
} kiln_code;

/* Caller-owned error record; see the conventions above. */
typedef struct kiln_err {
    int code;            /* a kiln_code */
    char message[1024];  /* one line, NUL-terminated */
} kiln_err;

/* A dense C-ordered tensor that the caller owns.  `data` points at
 * shape[0]*...*shape[rank-1] elements of `dtype` (one element for rank 0). */
typedef struct kiln_tensor {
    kiln_dtype dtype;
    int rank;                       /* 0 .. KILN_MAX_RANK */
    int64_t shape[KILN_MAX_RANK];   /* only the first `rank` are read */
    void *data;
} kiln_tensor;

typedef struct kiln_graph kiln_graph;       /* see <kiln/graph.h> */
typedef struct kiln_function kiln_function; /* a compiled graph */

/* Name of a dtype ("f64", "f32", "i64", "i32", "bool"), or "?" when out of
 * range.  The string is static. */
const char *kiln_dtype_name(kiln_dtype dt);

/* Size of one element of `dt` in bytes (0 when out of range). */
size_t kiln_dtype_size(kiln_dtype dt);

/* Parse a dtype name as printed by kiln_dtype_name.  Returns 0 and sets
 * *out, or -1 when `name` is not a dtype. */
int kiln_dtype_parse(const char *name, kiln_dtype *out);

/* Number of elements of a shape (1 for rank 0). */
int64_t kiln_shape_numel(int rank, const int64_t *shape);

/* Options for kiln_compile.  Zero-initialise, then set struct_size to
 * sizeof(kiln_options); fields beyond struct_size are treated as unset, so
 * that a program built against an older kiln keeps working. */
typedef struct kiln_options {
    size_t struct_size;
    /* Backend to compile every kernel with ("interp", or the name of a
     * plugin found on the plugin path); NULL means the default ("interp"
     * until the policy issue lands).  A backend that is missing or refuses
     * a kernel falls back to "interp" with a one-line diagnostic. */
    const char *backend;
    /* Extra plugin directories, ':'-separated, searched before
     * $KILN_PLUGIN_PATH and the install directory.  NULL for none. */
    const char *plugin_path;
    /* Where one-line diagnostics (fallbacks, skipped plugins) go: a
     * FILE* cast to void*, or NULL for stderr. */
    void *diag;
    /* 1 to silence diagnostics. */
    int quiet;
} kiln_options;

/* Compile `g` to a function.  The graph is validated and lowered to kernels;
 * each kernel is compiled with the chosen backend; buffers for
 * intermediates are planned once.  `g` is only read: the function keeps
 * its own copy of every constant and shared value, so `g` may be freed
 * right after.  `opt` may be NULL for defaults.
 * Errors: KILN_ERR_ARG (g NULL or has no output), KILN_ERR_TYPE or
 * KILN_ERR_SHAPE (invalid graph), KILN_ERR_BACKEND (no backend could
 * compile a kernel, interp included), KILN_ERR_NOMEM.
 * Returns a function the caller frees with kiln_function_free. */
kiln_function *kiln_compile(const kiln_graph *g, const kiln_options *opt,
                            kiln_err *err);

/* Free a function and everything it owns (output buffers included).
 * NULL is allowed. */
void kiln_function_free(kiln_function *f);

/* Run the function once.
 * `inputs` has kiln_function_n_inputs(f) tensors in declaration order
 * (`input` statements of the graph); each must have the declared dtype and
 * rank, the declared static dims, and the same size for every use of one
 * symbolic dim.  `outputs` has kiln_function_n_outputs(f) slots that are
 * overwritten: dtype, rank and shape are set and `data` points at memory
 * owned by `f`, valid until the next call of f or kiln_function_free.
 * A steady-state call (same input shapes as the previous call) allocates
 * nothing.
 * Errors: KILN_ERR_ARG (NULL arguments), KILN_ERR_TYPE (a dtype differs;
 * message names the input and both dtypes), KILN_ERR_SHAPE (a rank or dim
 * differs, or shapes cannot broadcast; message names the input or node and
 * both shapes), KILN_ERR_RUNTIME (e.g. an index out of bounds),
 * KILN_ERR_NOMEM.  On error the outputs are unspecified. */
int kiln_function_call(kiln_function *f, const kiln_tensor *inputs,
                       kiln_tensor *outputs, kiln_err *err);

/* Number of inputs / shared values / outputs of a compiled function. */
int kiln_function_n_inputs(const kiln_function *f);
int kiln_function_n_shared(const kiln_function *f);
int kiln_function_n_outputs(const kiln_function *f);

/* Name of input, shared value or output `i` (0-based, declaration order).
 * The string is owned by `f`.  NULL when `i` is out of range. */
const char *kiln_function_input_name(const kiln_function *f, int i);
const char *kiln_function_shared_name(const kiln_function *f, int i);
const char *kiln_function_output_name(const kiln_function *f, int i);

/* Declared type of input `i`: dtype, rank and dims, where a dim is >= 0
 * when static and -1 when symbolic or unknown; `symbols`, when not NULL,
 * receives for each dim the symbol's name (owned by f) or NULL.
 * Returns 0, or -1 when `i` is out of range. */
int kiln_function_input_type(const kiln_function *f, int i, kiln_dtype *dtype,
                             int *rank, int64_t dims[KILN_MAX_RANK],
                             const char *symbols[KILN_MAX_RANK]);

/* Replace the value of shared value `name` with a copy of `value`, which
 * must have the same dtype and shape as the current value (no recompile).
 * Errors: KILN_ERR_NAME (no shared value of that name), KILN_ERR_TYPE,
 * KILN_ERR_SHAPE (message names both shapes).  The old value is kept on
 * error. */
int kiln_function_bind_shared(kiln_function *f, const char *name,
                              const kiln_tensor *value, kiln_err *err);

/* Number of kernels the function runs per call, and the backend that
 * compiled kernel `i` ("interp", "tcc", ...; owned by f, NULL when out of
 * range).  For tools and tests. */
int kiln_function_n_kernels(const kiln_function *f);
const char *kiln_function_kernel_backend(const kiln_function *f, int i);

#ifdef __cplusplus
}
#endif
#endif
