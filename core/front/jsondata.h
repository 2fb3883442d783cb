/*
 * jsondata.h — binding a graph's shared values from CmdStan JSON data
 * (core/front/json.c; the reader itself is public, <kiln/io.h>).  Internal to
 * kiln: used by `kiln run --data`.  Not named json.h: json-c's headers
 * are on the include path.
 */
#ifndef KILN_JSONDATA_H
#define KILN_JSONDATA_H

#include <kiln/io.h>

#include "ir.h"

/* Bind every shared value of g that has no value yet and whose name is a
 * variable of d: kiln_json_data_get with its declared dtype, rank and
 * dims (a symbol takes the data's size), then kiln_ir_bind_shared, which
 * checks that each symbol has one size across the shared values.  Shared
 * values d does not have are left unbound; variables of d that no shared
 * value uses are ignored.  *n_bound (when not NULL) counts the values
 * bound.  Returns 0, or the error of kiln_json_data_get or (prefixed with
 * "FILE: ") of kiln_ir_bind_shared; values bound before the error stay
 * bound. */
int kiln_json_data_bind_graph(kiln_graph *g, const kiln_json_data *d,
                              int *n_bound, kiln_err *err);

struct json_object;

/* Parse `len` bytes of `text` as one JSON object, strictly (RFC 8259,
 * UTF-8 checked, nothing but whitespace after it), refusing duplicate
 * top-level keys ("FILE:L:C: duplicate key 'k' (first at line L)"),
 * keys in single quotes and integers json-c cannot store; messages start
 * with `file`.  Returns 0 with *out the object (the caller drops it with
 * json_object_put), or KILN_ERR_PARSE / KILN_ERR_NOMEM with err set.
 * (The CmdStan JSON reader and the safetensors header.) */
int kiln_json_strict_object(const char *text, size_t len, const char *file,
                            struct json_object **out, kiln_err *err);

#endif
