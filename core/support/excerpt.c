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
