/*
 * yaml_read.h — reading kiln's YAML files (policies, core/policy/policy.c; the
 * user's and site's configuration, core/policy/userconfig.c) with libyaml's
 * document API.
 *
 * A file is read whole (kiln_yaml_read_file), loaded as exactly one YAML
 * document (kiln_yaml_load) and walked node by node; every error names
 * FILE:LINE:COLUMN of the offending node and carries the reader's error
 * code.  Nothing is guessed: a value of the wrong YAML type (a quoted "3"
 * where a number belongs), a duplicate or unknown key is an error.
 *
 * Not thread-safe per reader; distinct readers are independent.
 */
#ifndef KILN_CORE_YAML_READ_H
#define KILN_CORE_YAML_READ_H

#include <kiln/kiln.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

typedef struct kiln_yaml {
    yaml_document_t doc;
    const char *file;   /* the name errors start with */
    kiln_err *err;
    int code;           /* the kiln_code of reader errors (KILN_ERR_POLICY) */
    void *user;         /* what the walk fills in */
} kiln_yaml;

/* Read the file at `path` (or the open `fd`) into *text (malloc'ed,
 * *len bytes, not NUL-terminated): at most max_bytes + 1 bytes, so that
 * kiln_yaml_load refuses a larger file at the position of its size cap
 * without reading all of it.  The fd variant sets errno and returns -1.
 * Errors: KILN_ERR_IO ("PATH: reason"), KILN_ERR_NOMEM. */
int kiln_yaml_read_fd(int fd, size_t max_bytes, char **text, size_t *len);
int kiln_yaml_read_file(const char *path, size_t max_bytes, char **text,
                        size_t *len, kiln_err *err);

/* Load `text` (`len` bytes) as one YAML document into r->doc; `what`
 * names the kind of file in errors ("policy").  r->file, r->err and
 * r->code must be set.  On success the caller calls kiln_yaml_done.
 * The text is first checked against the caps of yaml_caps.h (size,
 * flow nesting: libyaml is quadratic in it).
 * Errors (r->code, "FILE:LINE:COLUMN: ..."): a cap exceeded, a YAML
 * syntax error, a second document; KILN_ERR_NOMEM. */
int kiln_yaml_load(kiln_yaml *r, const char *text, size_t len,
                   const char *what);
void kiln_yaml_done(kiln_yaml *r);

/* Set r->err to "FILE:LINE:COLUMN: message" (n's start; "FILE: message"
 * when n is NULL) with code r->code.  Returns -1. */
int kiln_yaml_error(kiln_yaml *r, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Node i of the document, or NULL. */
yaml_node_t *kiln_yaml_node(kiln_yaml *r, int i);
/* "a mapping", "a list", "a quoted string" or "a scalar", for errors. */
const char *kiln_yaml_type_word(const yaml_node_t *n);
/* A scalar's text (NUL-terminated by libyaml). */
const char *kiln_yaml_sval(const yaml_node_t *n);
/* 1 when n is a plain null: empty, ~, null, Null, NULL. */
int kiln_yaml_is_null(const yaml_node_t *n);

/* Typed values; `what` names the key in errors.  Each returns 0 and sets
 * *out, or -1 with the error set. */
int kiln_yaml_number(kiln_yaml *r, const yaml_node_t *n, const char *what,
                     double *out);                  /* finite, plain */
int kiln_yaml_int(kiln_yaml *r, const yaml_node_t *n, const char *what,
                  int64_t lo, int64_t hi, int64_t *out);
int kiln_yaml_bool(kiln_yaml *r, const yaml_node_t *n, const char *what,
                   int *out);                       /* true/false, yes/no */
int kiln_yaml_string(kiln_yaml *r, const yaml_node_t *n, const char *what,
                     const char **out);             /* not null */
/* "512M", "2G", "1024" (bytes; K, M, G, T are powers of 1024). */
int kiln_yaml_size(kiln_yaml *r, const yaml_node_t *n, const char *what,
                   int64_t *out);
/* The schema version `v` (the value of top-level key `key`; NULL when the
 * key is missing, then the error names `root`) must be `schema`. */
int kiln_yaml_schema(kiln_yaml *r, const yaml_node_t *root,
                     const yaml_node_t *v, const char *key, int schema);
int kiln_yaml_expect_map(kiln_yaml *r, const yaml_node_t *n,
                         const char *what);
int kiln_yaml_expect_list(kiln_yaml *r, const yaml_node_t *n,
                          const char *what);

/* Walk a mapping: keys must be plain strings, each once; fn is called for
 * each pair in order and a non-zero return stops the walk. */
typedef int (*kiln_yaml_pair_fn)(kiln_yaml *r, const char *key,
                                 yaml_node_t *k, yaml_node_t *v, void *ctx);
int kiln_yaml_each_pair(kiln_yaml *r, yaml_node_t *map, const char *what,
                        kiln_yaml_pair_fn fn, void *ctx);
/* The error for an unknown key: "WHAT: unknown key 'KEY' (expected one
 * of: KNOWN)".  Returns -1. */
int kiln_yaml_unknown_key(kiln_yaml *r, yaml_node_t *k, const char *what,
                          const char *key, const char *known);

#endif
