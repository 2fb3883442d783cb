/*
 * lex.h — the .kg lexer (core/front/lex.c, prefix kiln_lex_) and the
 * parser state it shares with the grammar (core/front/grammar.c): tokens,
 * positions, and the errors both report as "FILE:LINE:COL: message".
 */
#ifndef KILN_FRONT_LEX_H
#define KILN_FRONT_LEX_H

#include "ir.h"
#include "jsondata.h"
#include <kiln/io.h>

#include <stddef.h>
#include <string.h>

enum {
    T_EOF = 0, T_NL, T_IDENT, T_INT, T_FLOAT, T_STRING,
    T_LPAREN, T_RPAREN, T_LBRACK, T_RBRACK, T_COMMA, T_COLON, T_EQ,
    T_QUEST, T_MINUS
};

typedef struct tok {
    int kind;
    const char *s;   /* text (for T_STRING: between the quotes, escaped) */
    size_t n;
    int line, col;
} tok;

typedef struct parser {
    const char *src;
    size_t len, pos;
    int line;
    size_t line_start;
    int nest;            /* open ( and [: newlines inside them are skipped */
    size_t *open_at;     /* byte offset of each open ( and [ (nest used) */
    size_t open_cap;
    tok t;               /* current token */
    tok pk;              /* lookahead, valid when has_pk */
    int has_pk;
    const char *file;
    const char *base_dir;
    const kiln_read_options *data; /* the caller's limits on data files */
    kiln_graph *g;
    kiln_err e;
    int *def_line;       /* line where node i was named (0: unknown) */
    size_t def_cap;
    int *out_line;       /* line of output k */
    size_t out_cap;
    /* the JSON data file json() sources read last (its resolved path),
     * kept so that a model's many json() values read it once */
    char *json_path;
    kiln_json_data *json;
    /* likewise the safetensors file safetensors() sources read last */
    char *st_path;
    kiln_safetensors *st;
    /* issue 28: the graph blocks before the current one, which a later
     * block's `scan(..., body=NAME)` names (the last block is the graph
     * the text defines) */
    kiln_graph **bodies;
    int n_bodies, cap_bodies;
} parser;

/* Report an error at line:col (code: KILN_ERR_PARSE for syntax) into
 * p->e as "FILE:LINE:COL: message".  Returns -1. */
__attribute__((format(printf, 5, 6)))
int kiln_lex_fail_at(parser *p, int line, int col, int code,
                     const char *fmt, ...);

/* Prefix a builder error with a position. */
int kiln_lex_builder_fail(parser *p, int line, int col);

/* "out of memory" at the current token.  Returns -1. */
int kiln_lex_nomem(parser *p);

/* "'text'", "end of line", ... for messages. */
const char *kiln_lex_tok_desc(const tok *t, char *buf, size_t size);

/* "expected WHAT, found TOKEN" at the current token. */
int kiln_lex_expected(parser *p, const char *what);

/* Step to the next token (p->t; the lookahead first when there is one).
 * Returns 0, or -1 with p->e set. */
int kiln_lex_advance(parser *p);

/* The token after p->t (lexed once, kept), or NULL on a lexical error. */
const tok *kiln_lex_peek(parser *p);

/* Expect token kind k (what: for the message) and step over it. */
int kiln_lex_expect(parser *p, int k, const char *what);

/* Step over the newline that ends a statement (or stop at the end of
 * the text).  Returns 0 or -1. */
int kiln_lex_end_of_statement(parser *p);

/* A NUL-terminated copy of a token's text. */
char *kiln_lex_tok_str(const tok *t);

/* The decoded text of a string token. */
char *kiln_lex_str_value(const tok *t);

/* 1 when t is the identifier w. */
static inline int kiln_lex_is_word(const tok *t, const char *w)
{
    size_t n = strlen(w);
    return t->kind == T_IDENT && t->n == n && memcmp(t->s, w, n) == 0;
}

#endif
