/*
 * count_allocs.h — counting allocations in a test binary (include once,
 * in the file with main): the binary defines malloc, calloc, realloc and
 * free, which interposes them for libkiln and its plugins too; each
 * forwards to glibc's and malloc/calloc/realloc count into n_allocs
 * (atomically: a threaded test compares it while no other thread runs).
 * A test may set [skip_lo, skip_hi) to the code of one shared object
 * (e.g. the BLAS library, which kiln calls but cannot stop allocating):
 * allocations called directly from there count into n_skipped instead.
 * COUNT_ALLOCS is 0 (and nothing is defined) under ASan or TSan, which
 * own the allocator; tests that compare n_allocs skip then.
 */
#ifndef KILN_TESTS_COUNT_ALLOCS_H
#define KILN_TESTS_COUNT_ALLOCS_H

#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COUNT_ALLOCS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define COUNT_ALLOCS 0
#endif
#endif
#ifndef COUNT_ALLOCS
#define COUNT_ALLOCS 1
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
#include <stdatomic.h>
#include <stdint.h>
/* atomic: threads of a test may allocate at once */
static _Atomic long n_allocs, n_skipped;
static uintptr_t skip_lo, skip_hi;
static void count_from(void *caller)
{
    uintptr_t c = (uintptr_t)caller;
    if (c >= skip_lo && c < skip_hi)
        n_skipped++;
    else
        n_allocs++;
}
void *malloc(size_t n)
{
    count_from(__builtin_return_address(0));
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    count_from(__builtin_return_address(0));
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    count_from(__builtin_return_address(0));
    return __libc_realloc(p, n);
}
void free(void *p) { __libc_free(p); }
#endif

#endif
