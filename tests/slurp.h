/*
 * slurp.h — read a whole file into memory, for tests (test_gen.c,
 * test_posteriordb.c).
 */
#ifndef KILN_TESTS_SLURP_H
#define KILN_TESTS_SLURP_H

#include <stdio.h>
#include <stdlib.h>

/* the whole of a file (NUL-terminated; *len its length when len is not
 * NULL), or NULL */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *p = malloc(cap);
    size_t r;
    while (p && (r = fread(p + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n - 1 == 0) {
            char *q = realloc(p, cap * 2);
            if (!q) {
                free(p);
                p = NULL;
                break;
            }
            p = q;
            cap *= 2;
        }
    }
    fclose(f);
    if (p)
        p[n] = 0;
    if (len)
        *len = n;
    return p;
}

#endif
