/*
 * excerpt.c — a short, escaped excerpt of untrusted bytes (excerpt.h).
 */
#include "excerpt.h"

#include <stdio.h>
#include <string.h>

const char *excerpt(char *buf, size_t size, const void *s, size_t n,
                    size_t max)
{
    const unsigned char *p = s;
    size_t j = 0, i = 0;

    if (!buf || size < 4) {
        if (buf && size)
            buf[0] = '\0';
        return buf;
    }
    for (; i < n && i < max; i++) {
        char tmp[5];
        size_t k;
        unsigned char c = p[i];
        if (c == '\\' || c == '\'') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            k = 2;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            tmp[0] = '\\';
            tmp[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            k = 2;
        } else if (c >= 0x20 && c < 0x7f) {
            tmp[0] = (char)c;
            k = 1;
        } else {
            snprintf(tmp, sizeof tmp, "\\x%02x", (unsigned)c);
            k = 4;
        }
        /* keep room for "..." and the NUL */
        if (j + k + 4 > size)
            break;
        memcpy(buf + j, tmp, k);
        j += k;
    }
    if (i < n) {
        memcpy(buf + j, "...", 3);
        j += 3;
    }
    buf[j] = '\0';
    return buf;
}

int name_is_close(const char *want, const char *name, size_t n)
{
    size_t m = strlen(want);
    if (m > 64 || n > 64 || m == 0 || n == 0)
        return 0;
    size_t lim = m <= 4 ? 1 : m <= 8 ? 2 : 3;
    if ((m > n ? m - n : n - m) > lim)
        return 0;
    /* Damerau-Levenshtein (optimal string alignment), three rows */
    size_t r0[65], r1[65], r2[65], *pp = r0, *p = r1, *c = r2;
    for (size_t j = 0; j <= n; j++)
        p[j] = j;
    for (size_t i = 1; i <= m; i++) {
        c[0] = i;
        for (size_t j = 1; j <= n; j++) {
            size_t cost = want[i - 1] != name[j - 1];
            size_t d = p[j - 1] + cost;
            if (p[j] + 1 < d)
                d = p[j] + 1;
            if (c[j - 1] + 1 < d)
                d = c[j - 1] + 1;
            if (i > 1 && j > 1 && want[i - 1] == name[j - 2] &&
                want[i - 2] == name[j - 1] && pp[j - 2] + 1 < d)
                d = pp[j - 2] + 1;
            c[j] = d;
        }
        size_t *t = pp;
        pp = p;
        p = c;
        c = t;
    }
    return p[n] <= lim;
}
