/*
 * lex.c — the .kg lexer (docs/ir.md; prefix kiln_lex_): bytes to tokens
 * with their line and column, one token of lookahead, the open brackets
 * inside which newlines do not end a statement, and the error messages
 * every part of the parser reports through (kiln_lex_fail_at, "FILE:LINE:
 * COL: message").  The grammar (grammar.c) reads the tokens.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "lex.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors --------------------------------------------------------- */

__attribute__((format(printf, 5, 6)))
int kiln_lex_fail_at(parser *p, int line, int col, int code, const char *fmt,
                   ...)
{
    char msg[sizeof p->e.message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kiln_seterr(&p->e, code, "%s:%d:%d: %s", p->file, line, col, msg);
    return -1;
}

/* What a character that is no token means where it comes from (Stan,
 * NumPy): the hint after "unexpected character". */
static const char *char_hint(int c)
{
    switch (c) {
    case '+': case '*': case '/': case '^':
        return " (kiln has no operators: write add(a, b), sub, mul, div, "
               "pow; docs/stan-cheatsheet.md)";
    case '~':
        return " (kiln has no '~': add the density's term to the log "
               "density, e.g. logp = add(normal_lpdf(y, mu, sigma), ...))";
    case '<': case '>':
        return " (constraints follow the type: param sigma: f64 lower=0)";
    case ';':
        return " (a statement ends at the end of its line)";
    case '{': case '}':
        return " (kiln has no blocks: declare with param, shared, const, "
               "output)";
    default:
        return "";
    }
}

/* Prefix a builder error with a position. */
int kiln_lex_builder_fail(parser *p, int line, int col)
{
    kiln_err_prefix(&p->e, "%s:%d:%d: ", p->file, line, col);
    return -1;
}

int kiln_lex_nomem(parser *p)
{
    kiln_seterr(&p->e, KILN_ERR_NOMEM, "%s: out of memory", p->file);
    return -1;
}

/* "'text'", "end of line", ... for messages. */
const char *kiln_lex_tok_desc(const tok *t, char *buf, size_t size)
{
    switch (t->kind) {
    case T_EOF: return "end of file";
    case T_NL: return "end of line";
    case T_STRING:
        if (t->n > 40)
            snprintf(buf, size, "\"%.40s...\"", t->s);
        else
            snprintf(buf, size, "\"%.*s\"", (int)t->n, t->s);
        return buf;
    default:
        if (t->n > 40)
            snprintf(buf, size, "'%.40s...'", t->s);
        else
            snprintf(buf, size, "'%.*s'", (int)t->n, t->s);
        return buf;
    }
}

/* "expected WHAT, found TOKEN" at the current token. */
int kiln_lex_expected(parser *p, const char *what)
{
    char b[64];
    return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                   "expected %s, found %s", what, kiln_lex_tok_desc(&p->t, b, sizeof b));
}

/* ---- lexer ---------------------------------------------------------- */

static int is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(int c) { return c >= '0' && c <= '9'; }

static int is_alnum(int c) { return is_alpha(c) || is_digit(c); }

/* T_INT, T_FLOAT, or -1 when s[0..n) is not a number:
 * digits [. digits] [(e|E) [+|-] digits], with a digit before or after
 * the point. */
static int number_kind(const char *s, size_t n)
{
    size_t i = 0, nd = 0;
    int is_float = 0;
    while (i < n && is_digit((unsigned char)s[i]))
        i++, nd++;
    if (i < n && s[i] == '.') {
        is_float = 1;
        i++;
        while (i < n && is_digit((unsigned char)s[i]))
            i++, nd++;
    }
    if (nd == 0)
        return -1;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t ne = 0;
        is_float = 1;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        while (i < n && is_digit((unsigned char)s[i]))
            i++, ne++;
        if (ne == 0)
            return -1;
    }
    return i == n ? (is_float ? T_FLOAT : T_INT) : -1;
}

/* Remember an open ( or [ at byte offset pos. */
static int push_open(parser *p, size_t pos)
{
    if ((size_t)p->nest == p->open_cap) {
        size_t nc = p->open_cap ? 2 * p->open_cap : 16;
        size_t *q = nc > (size_t)INT32_MAX ? NULL
                                            : realloc(p->open_at,
                                                      nc * sizeof *q);
        if (!q)
            return kiln_lex_nomem(p);
        p->open_at = q;
        p->open_cap = nc;
    }
    p->open_at[p->nest++] = pos;
    return 0;
}

/* "'[' is not closed" at the innermost open bracket: the file ended, or a
 * statement keyword starts a line, inside ( ) or [ ] (where newlines are
 * skipped, so the error would otherwise surface later, at 'end'). */
static int unclosed(parser *p)
{
    size_t pos = p->open_at[p->nest - 1];
    int line = 1;
    size_t ls = 0;
    for (size_t i = 0; i < pos; i++)
        if (p->src[i] == '\n') {
            line++;
            ls = i + 1;
        }
    return kiln_lex_fail_at(p, line, (int)(pos - ls) + 1, KILN_ERR_PARSE,
                   "'%c' is not closed", p->src[pos]);
}

/* 1 when identifier t is a word that only starts a statement and stands
 * first on its line. */
static int is_statement_word_at_bol(const parser *p, const tok *t)
{
    static const char *const words[] = {"end", "input", "output", "shared",
                                        "const", "graph", "kiln", NULL};
    int w = 0;
    for (int i = 0; words[i] && !w; i++) {
        size_t n = strlen(words[i]);
        w = t->n == n && memcmp(t->s, words[i], n) == 0;
    }
    if (!w)
        return 0;
    for (const char *c = p->src + p->line_start; c < t->s; c++)
        if (*c != ' ' && *c != '\t' && *c != '\r' && *c != '\f' &&
            *c != '\v')
            return 0;
    return 1;
}

static int lex(parser *p, tok *t)
{
    for (;;) {
        if (p->pos >= p->len) {
            if (p->nest > 0)
                return unclosed(p);
            t->kind = T_EOF;
            t->s = "";
            t->n = 0;
            t->line = p->line;
            t->col = (int)(p->pos - p->line_start) + 1;
            return 0;
        }
        char c = p->src[p->pos];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            p->pos++;
            continue;
        }
        if (c == '#') {
            while (p->pos < p->len && p->src[p->pos] != '\n')
                p->pos++;
            continue;
        }
        if (c == '\n') {
            int line = p->line, col = (int)(p->pos - p->line_start) + 1;
            p->pos++;
            p->line++;
            p->line_start = p->pos;
            if (p->nest > 0)
                continue;
            t->kind = T_NL;
            t->s = "\n";
            t->n = 1;
            t->line = line;
            t->col = col;
            return 0;
        }
        break;
    }
    const char *s = p->src + p->pos;
    unsigned char c = (unsigned char)*s;
    t->s = s;
    t->line = p->line;
    t->col = (int)(p->pos - p->line_start) + 1;
    size_t i = 1;
    if (is_alpha(c)) {
        while (p->pos + i < p->len && is_alnum((unsigned char)s[i]))
            i++;
        t->kind = T_IDENT;
        t->n = i;
        if (p->nest > 0 && is_statement_word_at_bol(p, t))
            return unclosed(p);
    } else if (is_digit(c) ||
               (c == '.' && p->pos + 1 < p->len && is_digit((unsigned char)s[1]))) {
        /* take the whole run of number-like characters, then check it,
         * so that "1.2.3" is one bad literal and not "1.2" ".3" */
        while (p->pos + i < p->len) {
            unsigned char d = (unsigned char)s[i];
            if (is_alnum(d) || d == '.')
                i++;
            else if ((d == '+' || d == '-') && (s[i - 1] == 'e' || s[i - 1] == 'E'))
                i++;
            else
                break;
        }
        t->kind = number_kind(s, i);
        if (t->kind < 0)
            return kiln_lex_fail_at(p, t->line, t->col, KILN_ERR_PARSE,
                           "bad literal '%.*s'", i > 60 ? 60 : (int)i, s);
    } else if (c == '"') {
        for (;;) {
            if (p->pos + i >= p->len || s[i] == '\n')
                return kiln_lex_fail_at(p, t->line, t->col, KILN_ERR_PARSE,
                               "unterminated string");
            if (s[i] == '"')
                break;
            /* a NUL would silently cut a file name short */
            if (s[i] == '\0')
                return kiln_lex_fail_at(p, t->line,
                               (int)(p->pos + i - p->line_start) + 1,
                               KILN_ERR_PARSE, "NUL byte in string");
            /* a control byte (an escape sequence) would reach the
             * terminal in every message that names the string */
            if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                return kiln_lex_fail_at(p, t->line,
                               (int)(p->pos + i - p->line_start) + 1,
                               KILN_ERR_PARSE, "control byte 0x%02x in "
                               "string", (unsigned)(unsigned char)s[i]);
            if (s[i] == '\\') {
                if (p->pos + i + 1 >= p->len ||
                    (s[i + 1] != '\\' && s[i + 1] != '"'))
                    return kiln_lex_fail_at(p, t->line,
                                   (int)(p->pos + i - p->line_start) + 1,
                                   KILN_ERR_PARSE,
                                   "bad escape in string (only \\\\ and \\\" "
                                   "are allowed)");
                i++;
            }
            i++;
        }
        t->kind = T_STRING;
        t->s = s + 1;
        t->n = i - 1;
        p->pos += i + 1;
        return 0;
    } else {
        switch (c) {
        case '(':
        case '[':
            t->kind = c == '(' ? T_LPAREN : T_LBRACK;
            if (push_open(p, p->pos))
                return -1;
            break;
        case ')': t->kind = T_RPAREN; if (p->nest) p->nest--; break;
        case ']': t->kind = T_RBRACK; if (p->nest) p->nest--; break;
        case ',': t->kind = T_COMMA; break;
        case ':': t->kind = T_COLON; break;
        case '=': t->kind = T_EQ; break;
        case '?': t->kind = T_QUEST; break;
        case '-': t->kind = T_MINUS; break;
        default:
            if (c >= 0x21 && c < 0x7f)
                return kiln_lex_fail_at(p, t->line, t->col, KILN_ERR_PARSE,
                               "unexpected character '%c'%s", c,
                               char_hint(c));
            return kiln_lex_fail_at(p, t->line, t->col, KILN_ERR_PARSE,
                           "unexpected byte 0x%02x", c);
        }
    }
    t->n = i;
    p->pos += i;
    return 0;
}

int kiln_lex_advance(parser *p)
{
    if (p->has_pk) {
        p->t = p->pk;
        p->has_pk = 0;
        return 0;
    }
    return lex(p, &p->t);
}

const tok *kiln_lex_peek(parser *p)
{
    if (!p->has_pk) {
        if (lex(p, &p->pk))
            return NULL;
        p->has_pk = 1;
    }
    return &p->pk;
}

/* Expect token kind k (what: for the message) and step over it. */
int kiln_lex_expect(parser *p, int k, const char *what)
{
    if (p->t.kind != k)
        return kiln_lex_expected(p, what);
    return kiln_lex_advance(p);
}

int kiln_lex_end_of_statement(parser *p)
{
    if (p->t.kind == T_EOF)
        return 0;
    if (p->t.kind != T_NL)
        return kiln_lex_expected(p, "end of line");
    return kiln_lex_advance(p);
}

/* A NUL-terminated copy of a token's text. */
char *kiln_lex_tok_str(const tok *t)
{
    char *s = malloc(t->n + 1);
    if (s) {
        memcpy(s, t->s, t->n);
        s[t->n] = '\0';
    }
    return s;
}

/* The decoded text of a string token. */
char *kiln_lex_str_value(const tok *t)
{
    char *s = malloc(t->n + 1);
    if (!s)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->s[i] == '\\' && i + 1 < t->n)
            i++;
        s[k++] = t->s[i];
    }
    s[k] = '\0';
    return s;
}
