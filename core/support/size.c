/*
 * size.c — byte sizes as people write them ("512MiB", "1.5G", "4096"):
 * kiln_cache_parse_size (public, include/kiln/cache.h).  Used by the
 * cache's limits (core/cache) and by the data readers' size limit
 * (core/front/datafile.c), so it sits below both.
 */
#include <kiln/cache.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

int kiln_cache_parse_size(const char *s, uint64_t *bytes)
{
    if (!s || !bytes)
        return -1;
    /* digits with at most one '.', then a unit: no signs, exponents or
     * hex, which strtod would take */
    const char *q = s;
    int digits = 0, dots = 0;
    for (; (*q >= '0' && *q <= '9') || *q == '.'; q++) {
        digits += *q != '.';
        dots += *q == '.';
    }
    if (!digits || dots > 1)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end != q || errno || !(v >= 0))
        return -1;
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end)
        return -1;
    v *= mult;
    if (v >= 1.8e19)
        return -1;
    *bytes = (uint64_t)v;
    return 0;
}
