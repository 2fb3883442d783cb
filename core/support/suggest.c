/*
 * suggest.c — "did you mean": the closest of a set of names (suggest.h).
 */
#include "suggest.h"
#include "excerpt.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define NAME_MAX_LEN 64

/* The distance in half units (a case-only difference costs 1, another
 * edit 2). */
static int half_distance(const char *a, size_t la, const char *b, size_t lb)
{
    if (la > NAME_MAX_LEN || lb > NAME_MAX_LEN)
        return INT_MAX / 2;
    /* costs doubled: a case-only difference costs 1, any other edit 2 */
    int d[NAME_MAX_LEN + 1][NAME_MAX_LEN + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = 2 * (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = 2 * (int)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            unsigned char x = (unsigned char)a[i - 1];
            unsigned char y = (unsigned char)b[j - 1];
            int sub = x == y ? 0 : tolower(x) == tolower(y) ? 1 : 2;
            int v = d[i - 1][j - 1] + sub;
            if (d[i - 1][j] + 2 < v)
                v = d[i - 1][j] + 2;
            if (d[i][j - 1] + 2 < v)
                v = d[i][j - 1] + 2;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
                a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 2 < v)
                v = d[i - 2][j - 2] + 2;
            d[i][j] = v;
        }
    }
    return d[la][lb];
}

int kiln_suggest_distance(const char *a, size_t la, const char *b, size_t lb)
{
    return (half_distance(a, la, b, lb) + 1) / 2;
}

void kiln_suggest_init(kiln_suggestion *s, const char *name, size_t len)
{
    s->name = name;
    s->len = len;
    s->best = NULL;
    s->best_dist = INT_MAX;
}

void kiln_suggest_offer(kiln_suggestion *s, const char *cand)
{
    if (!cand || !s->name)
        return;
    size_t lc = strlen(cand);
    if (lc == s->len && memcmp(cand, s->name, lc) == 0)
        return; /* the name itself is no suggestion */
    int limit = 2 * (s->len <= 4 ? 1 : s->len <= 8 ? 2 : 3);
    int dist = half_distance(s->name, s->len, cand, lc);
    if (dist <= limit && (size_t)dist < 2 * s->len && dist < s->best_dist) {
        s->best = cand;
        s->best_dist = dist;
    }
}

const char *kiln_suggest(const char *name, const char *const *cand,
                         int n_cand)
{
    if (!name || !cand)
        return NULL;
    kiln_suggestion s;
    kiln_suggest_init(&s, name, strlen(name));
    for (int i = 0; i < n_cand; i++)
        kiln_suggest_offer(&s, cand[i]);
    return s.best;
}

const char *kiln_suggest_text(const kiln_suggestion *s, char *buf,
                              size_t size)
{
    if (size == 0)
        return buf;
    buf[0] = '\0';
    if (s->best) {
        /* a candidate may come from a data file (a JSON key, a CSV
         * header): escaped, so that control bytes never reach a terminal */
        char shown[EXCERPT_SIZE(64)];
        excerpt(shown, sizeof shown, s->best, strlen(s->best), 64);
        snprintf(buf, size, "; did you mean '%s'?", shown);
    }
    return buf;
}

int name_is_close(const char *want, const char *name, size_t n)
{
    /* one did-you-mean rule for all of kiln (suggest.h) */
    kiln_suggestion sg;
    kiln_suggest_init(&sg, name, n);
    kiln_suggest_offer(&sg, want);
    return sg.best != NULL;
}
