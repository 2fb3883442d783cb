/*
 * yaml_read.c — the YAML reading shared by policies and configuration
 * files (yaml_read.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "yaml_read.h"
#include "yaml_caps.h"
#include "ir.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int kiln_yaml_error(kiln_yaml *r, const yaml_node_t *n, const char *fmt, ...)
{
    char raw[700], msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* the message quotes the file's text: control bytes are escaped (a
     * policy's key must not drive the terminal), and it stays one line */
    size_t o = 0;
    for (const unsigned char *c = (const unsigned char *)raw;
         *c && o + 5 < sizeof msg; c++) {
        if (*c < 0x20 || *c == 0x7f)
            o += (size_t)snprintf(msg + o, sizeof msg - o, "\\x%02x", *c);
        else
            msg[o++] = (char)*c;
    }
    msg[o] = '\0';
    if (n)
        kiln_seterr(r->err, r->code, "%s:%zu:%zu: %s", r->file,
                    n->start_mark.line + 1, n->start_mark.column + 1, msg);
    else
        kiln_seterr(r->err, r->code, "%s: %s", r->file, msg);
    return -1;
}

yaml_node_t *kiln_yaml_node(kiln_yaml *r, int i)
{
    return yaml_document_get_node(&r->doc, i);
}

const char *kiln_yaml_type_word(const yaml_node_t *n)
{
    if (n->type == YAML_MAPPING_NODE)
        return "a mapping";
    if (n->type == YAML_SEQUENCE_NODE)
        return "a list";
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return "a quoted string";
    return "a scalar";
}

const char *kiln_yaml_sval(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

int kiln_yaml_is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE ||
        n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = kiln_yaml_sval(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") ||
           !strcmp(s, "Null") || !strcmp(s, "NULL");
}

int kiln_yaml_number(kiln_yaml *r, const yaml_node_t *n, const char *what,
                     double *out)
{
    if (n->type != YAML_SCALAR_NODE ||
        n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return kiln_yaml_error(r, n, "%s: expected a number, got %s", what,
                               kiln_yaml_type_word(n));
    const char *s = kiln_yaml_sval(n);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno == ERANGE || !isfinite(v))
        return kiln_yaml_error(r, n, "%s: expected a number, got '%s'", what,
                               s);
    *out = v;
    return 0;
}

int kiln_yaml_int(kiln_yaml *r, const yaml_node_t *n, const char *what,
                  int64_t lo, int64_t hi, int64_t *out)
{
    double v;
    if (kiln_yaml_number(r, n, what, &v))
        return -1;
    if (v != floor(v) || v < (double)lo || v > (double)hi)
        return kiln_yaml_error(r, n, "%s: expected an integer from %lld to "
                               "%lld, got '%s'", what, (long long)lo,
                               (long long)hi, kiln_yaml_sval(n));
    *out = (int64_t)v;
    return 0;
}

int kiln_yaml_bool(kiln_yaml *r, const yaml_node_t *n, const char *what,
                   int *out)
{
    if (n->type == YAML_SCALAR_NODE &&
        n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        const char *s = kiln_yaml_sval(n);
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "yes")) {
            *out = 1;
            return 0;
        }
        if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "no")) {
            *out = 0;
            return 0;
        }
        return kiln_yaml_error(r, n, "%s: expected true or false, got '%s'",
                               what, s);
    }
    return kiln_yaml_error(r, n, "%s: expected true or false, got %s", what,
                           kiln_yaml_type_word(n));
}

int kiln_yaml_string(kiln_yaml *r, const yaml_node_t *n, const char *what,
                     const char **out)
{
    if (n->type != YAML_SCALAR_NODE || kiln_yaml_is_null(n))
        return kiln_yaml_error(r, n, "%s: expected a string, got %s", what,
                               n->type == YAML_SCALAR_NODE
                                   ? "null" : kiln_yaml_type_word(n));
    if (strlen(kiln_yaml_sval(n)) != n->data.scalar.length)
        return kiln_yaml_error(r, n, "%s: a NUL byte in the string", what);
    *out = kiln_yaml_sval(n);
    return 0;
}

int kiln_yaml_size(kiln_yaml *r, const yaml_node_t *v, const char *what,
                   int64_t *out)
{
    if (v->type == YAML_SCALAR_NODE &&
        v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        const char *s = kiln_yaml_sval(v);
        char *end;
        errno = 0;
        double x = strtod(s, &end);
        double mul = 1;
        if (end != s && *end && !end[1]) {
            switch (*end) {
            case 'K': case 'k': mul = 1024.0; end++; break;
            case 'M': mul = 1024.0 * 1024; end++; break;
            case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
            case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
            default: break;
            }
        }
        if (end != s && !*end && errno != ERANGE && x >= 0 &&
            x * mul < 9.0e18) {
            *out = (int64_t)(x * mul);
            return 0;
        }
        return kiln_yaml_error(r, v, "%s: expected a size in bytes such as "
                               "1073741824, 512M or 2G, got '%s'", what, s);
    }
    return kiln_yaml_error(r, v, "%s: expected a size in bytes such as 512M, "
                           "got %s", what, kiln_yaml_type_word(v));
}

int kiln_yaml_schema(kiln_yaml *r, const yaml_node_t *root,
                     const yaml_node_t *v, const char *key, int schema)
{
    if (!v)
        return kiln_yaml_error(r, root, "missing '%s: %d' (the schema "
                               "version)", key, schema);
    int64_t ver;
    if (kiln_yaml_int(r, v, key, 1, 1000000, &ver))
        return -1;
    if (ver != schema)
        return kiln_yaml_error(r, v, "%s: schema version %lld is not "
                               "supported (this kiln reads version %d)", key,
                               (long long)ver, schema);
    return 0;
}

int kiln_yaml_expect_map(kiln_yaml *r, const yaml_node_t *n, const char *what)
{
    if (n->type != YAML_MAPPING_NODE)
        return kiln_yaml_error(r, n, "%s: expected a mapping, got %s", what,
                               kiln_yaml_type_word(n));
    return 0;
}

int kiln_yaml_expect_list(kiln_yaml *r, const yaml_node_t *n,
                          const char *what)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return kiln_yaml_error(r, n, "%s: expected a list, got %s", what,
                               kiln_yaml_type_word(n));
    return 0;
}

int kiln_yaml_each_pair(kiln_yaml *r, yaml_node_t *map, const char *what,
                        kiln_yaml_pair_fn fn, void *ctx)
{
    if (kiln_yaml_expect_map(r, map, what))
        return -1;
    yaml_node_pair_t *b = map->data.mapping.pairs.start;
    yaml_node_pair_t *e = map->data.mapping.pairs.top;
    for (yaml_node_pair_t *q = b; q < e; q++) {
        yaml_node_t *k = kiln_yaml_node(r, q->key);
        yaml_node_t *v = kiln_yaml_node(r, q->value);
        if (!k || !v)
            return kiln_yaml_error(r, map, "%s: malformed mapping", what);
        if (k->type != YAML_SCALAR_NODE)
            return kiln_yaml_error(r, k, "%s: a key must be a string, got %s",
                                   what, kiln_yaml_type_word(k));
        if (strlen(kiln_yaml_sval(k)) != k->data.scalar.length)
            return kiln_yaml_error(r, k, "%s: a NUL byte in a key", what);
        for (yaml_node_pair_t *o = b; o < q; o++) {
            yaml_node_t *ok = kiln_yaml_node(r, o->key);
            if (ok && ok->type == YAML_SCALAR_NODE &&
                !strcmp(kiln_yaml_sval(ok), kiln_yaml_sval(k)))
                return kiln_yaml_error(r, k, "%s: duplicate key '%s' (first "
                                       "at line %zu)", what,
                                       kiln_yaml_sval(k),
                                       ok->start_mark.line + 1);
        }
        if (fn(r, kiln_yaml_sval(k), k, v, ctx))
            return -1;
    }
    return 0;
}

int kiln_yaml_unknown_key(kiln_yaml *r, yaml_node_t *k, const char *what,
                          const char *key, const char *known)
{
    return kiln_yaml_error(r, k, "%s: unknown key '%s' (expected one of: %s)",
                           what, key, known);
}

/* Report libyaml's error of `parser` (reading `text`, `len` bytes) as
 * FILE:LINE:COLUMN. */
static void yaml_fail(kiln_yaml *r, const yaml_parser_t *parser,
                      const char *text, size_t len)
{
    yaml_mark_t rm;
    const yaml_mark_t *m = &parser->problem_mark;
    if (parser->error == YAML_READER_ERROR) {
        /* the reader (bad encoding, control characters) reports a byte
         * offset, not a mark: count lines and columns to it */
        memset(&rm, 0, sizeof rm);
        for (size_t i = 0; i < parser->problem_offset && i < len; i++) {
            if (text[i] == '\n') {
                rm.line++;
                rm.column = 0;
            } else if (((unsigned char)text[i] & 0xc0) != 0x80) {
                rm.column++;          /* characters, not UTF-8 bytes */
            }
        }
        m = &rm;
    }
    if (parser->error == YAML_MEMORY_ERROR)
        kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
    else if (parser->context)
        kiln_seterr(r->err, r->code, "%s:%zu:%zu: YAML: %s %s (line %zu)",
                    r->file, m->line + 1, m->column + 1,
                    parser->problem ? parser->problem : "error",
                    parser->context, parser->context_mark.line + 1);
    else
        kiln_seterr(r->err, r->code, "%s:%zu:%zu: YAML: %s", r->file,
                    m->line + 1, m->column + 1,
                    parser->problem ? parser->problem : "syntax error");
}

/* An alias makes one node the child of several: the readers would copy it
 * once per use (a 1 MiB policy reusing a 5000-entry list 33,000 times
 * took 6 GB).  kiln's files do not need anchors: every node may have one
 * parent. */
static int refuse_aliases(kiln_yaml *r, const char *what)
{
    yaml_node_t *b = r->doc.nodes.start, *e = r->doc.nodes.top;
    size_t n = (size_t)(e - b);
    unsigned char *seen = calloc(n + 1, 1);
    if (!seen)
        return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
    int rc = 0;
    for (yaml_node_t *x = b; x < e && !rc; x++) {
        int kids[2], nk;
        if (x->type == YAML_SEQUENCE_NODE) {
            for (yaml_node_item_t *q = x->data.sequence.items.start;
                 q < x->data.sequence.items.top && !rc; q++) {
                if (*q < 1 || (size_t)*q > n || seen[*q]++)
                    rc = -1;
                if (rc)
                    kiln_yaml_error(r, kiln_yaml_node(r, *q), "YAML anchors "
                                    "and aliases are not supported in a %s "
                                    "(this node is used more than once)",
                                    what);
            }
        } else if (x->type == YAML_MAPPING_NODE) {
            for (yaml_node_pair_t *q = x->data.mapping.pairs.start;
                 q < x->data.mapping.pairs.top && !rc; q++) {
                kids[0] = q->key;
                kids[1] = q->value;
                for (nk = 0; nk < 2 && !rc; nk++) {
                    if (kids[nk] < 1 || (size_t)kids[nk] > n ||
                        seen[kids[nk]]++)
                        rc = -1;
                    if (rc)
                        kiln_yaml_error(r, kiln_yaml_node(r, kids[nk]),
                                        "YAML anchors and aliases are not "
                                        "supported in a %s (this node is "
                                        "used more than once)", what);
                }
            }
        }
    }
    free(seen);
    return rc;
}

int kiln_yaml_load(kiln_yaml *r, const char *text, size_t len,
                   const char *what)
{
    /* size and nesting caps before libyaml sees the text: libyaml is
     * quadratic in flow nesting (yaml_caps.c) */
    if (kiln_yaml_check_caps(text, len, r->file, what, r->err) != 0)
        return -1;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &r->doc)) {
        yaml_fail(r, &parser, text, len);
        yaml_parser_delete(&parser);
        return -1;
    }
    /* one document: a second (after `---`) would be silently ignored */
    yaml_document_t more;
    if (!yaml_parser_load(&parser, &more)) {
        yaml_fail(r, &parser, text, len);
        yaml_document_delete(&r->doc);
        yaml_parser_delete(&parser);
        return -1;
    }
    const yaml_node_t *mr = yaml_document_get_root_node(&more);
    int rc = 0;
    if (mr && !(mr->type == YAML_SCALAR_NODE && mr->data.scalar.length == 0)) {
        kiln_seterr(r->err, r->code, "%s:%zu:%zu: a %s is one YAML "
                    "document; a second one starts here", r->file,
                    more.start_mark.line + 1, more.start_mark.column + 1,
                    what);
        yaml_document_delete(&r->doc);
        rc = -1;
    }
    yaml_document_delete(&more);
    yaml_parser_delete(&parser);
    if (rc == 0 && (rc = refuse_aliases(r, what)) != 0)
        yaml_document_delete(&r->doc);
    return rc;
}

void kiln_yaml_done(kiln_yaml *r)
{
    yaml_document_delete(&r->doc);
}

int kiln_yaml_read_fd(int fd, size_t max_bytes, char **text, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        /* one byte over the cap is enough for kiln_yaml_load to refuse
         * the text at the cap's position: never read more */
        size_t want = cap - n;
        if (want > max_bytes + 1 - n)
            want = max_bytes + 1 - n;
        ssize_t got = read(fd, buf + n, want);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int eno = errno;
            free(buf);
            errno = eno;
            return -1;
        }
        n += (size_t)got;
        if (got == 0 || n > max_bytes)
            break;
        if (n == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    *text = buf;
    *len = n;
    return 0;
}

int kiln_yaml_read_file(const char *path, size_t max_bytes, char **text,
                        size_t *len, kiln_err *err)
{
    /* O_NONBLOCK: a FIFO in the file's place must not block the open */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return kiln_seterr(err, KILN_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int eno = errno;
        close(fd);
        return kiln_seterr(err, KILN_ERR_IO, "%s: %s", path,
                           S_ISDIR(st.st_mode) ? "is a directory"
                           : eno ? strerror(eno) : "not a regular file");
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    int rc = kiln_yaml_read_fd(fd, max_bytes, text, len);
    int eno = errno;
    close(fd);
    if (rc)
        return kiln_seterr(err, eno == ENOMEM ? KILN_ERR_NOMEM : KILN_ERR_IO,
                           "%s: %s", path, strerror(eno));
    return 0;
}
