/*
 * yaml_caps.c — size and nesting caps on the text of a policy or a
 * configuration file, checked before libyaml sees it (yaml_caps.h).
 *
 * libyaml's scanner is quadratic in the nesting of flow collections: 100 kB
 * of '[' takes about a minute.  A policy comes with a model and is
 * untrusted, so the text is scanned once here first:
 *  - its size is capped (KILN_POLICY_MAX_SIZE);
 *  - the nesting of flow collections ('[' and '{') is capped
 *    (KILN_POLICY_MAX_DEPTH); comments and quoted scalars are skipped as
 *    YAML does, so brackets in them do not count;
 *  - the number of '[' and '{' bytes anywhere in the text is capped
 *    (KILN_POLICY_MAX_COLLECTIONS): whatever this scan takes for a quote
 *    or a comment, libyaml never sees more nesting than that (a few
 *    milliseconds of scanning).
 * Block nesting (indentation, "- - -") is linear in libyaml and bounded by
 * the size cap.
 */
#include "yaml_caps.h"
#include "ir.h"

#include <kiln/policy.h>

#include <stdio.h>

/* Line and column (1-based; columns count UTF-8 characters, as libyaml's
 * marks do) of byte `off` of `text`. */
static void position(const char *text, size_t off, size_t *line,
                     size_t *col)
{
    size_t l = 1, c = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)text[i] & 0xc0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

static int cap_fail(const char *text, size_t off, const char *name,
                    kiln_err *err, const char *what)
{
    size_t line, col;
    position(text, off, &line, &col);
    return kiln_seterr(err, KILN_ERR_POLICY, "%s:%zu:%zu: %s", name, line,
                       col, what);
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int kiln_yaml_check_caps(const char *text, size_t len, const char *name,
                         const char *what, kiln_err *err)
{
    size_t depth = 0, opens = 0;
    char msg[200];

    if (len > KILN_POLICY_MAX_SIZE) {
        snprintf(msg, sizeof msg, "%s is larger than %u bytes (the "
                 "cap; a %s is a few kB)", what,
                 (unsigned)KILN_POLICY_MAX_SIZE, what);
        return cap_fail(text, KILN_POLICY_MAX_SIZE, name, err, msg);
    }
    /* the nesting of flow collections, then every '[' and '{' wherever
     * it is; the cap exceeded first in the text is reported */
    size_t deep_at = len, many_at = len;
    for (size_t i = 0; i < len && deep_at == len; i++) {
        char c = text[i];
        int token_start = i == 0 || is_space(text[i - 1]) ||
                          text[i - 1] == '[' || text[i - 1] == '{' ||
                          text[i - 1] == ',';
        if (c == '#' && (i == 0 || is_space(text[i - 1]))) {
            while (i < len && text[i] != '\n')
                i++;
        } else if ((c == '\'' || c == '"') && token_start) {
            /* a quoted scalar: '' escapes ' in single quotes, \ escapes
             * in double quotes; an unterminated one is libyaml's error */
            for (i++; i < len; i++) {
                if (c == '"' && text[i] == '\\')
                    i++;
                else if (text[i] == c) {
                    if (c == '\'' && i + 1 < len && text[i + 1] == '\'')
                        i++;
                    else
                        break;
                }
            }
        } else if (c == '[' || c == '{') {
            if (++depth > KILN_POLICY_MAX_DEPTH)
                deep_at = i;
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    for (size_t i = 0; i < len && many_at == len; i++)
        if ((text[i] == '[' || text[i] == '{') &&
            ++opens > KILN_POLICY_MAX_COLLECTIONS)
            many_at = i;
    if (deep_at < len && deep_at <= many_at) {
        snprintf(msg, sizeof msg, "'[' and '{' nested deeper than %u (the "
                 "cap)", (unsigned)KILN_POLICY_MAX_DEPTH);
        return cap_fail(text, deep_at, name, err, msg);
    }
    if (many_at < len) {
        snprintf(msg, sizeof msg, "more than %u '[' and '{' in a %s (the "
                 "cap)", (unsigned)KILN_POLICY_MAX_COLLECTIONS, what);
        return cap_fail(text, many_at, name, err, msg);
    }
    return 0;
}
