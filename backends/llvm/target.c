/*
 * target.c — the llvm backend's target id (kiln_backend.target, ABI 1.3):
 * which machine its code runs on, computed *without* LLVM so that a
 * process loading cached kernels never needs libLLVM (docs/cache.md).
 *
 * On x86-64 the id is "x86_64-f<family>m<model>-<hash>", where the hash
 * (FNV-1a, 32 bits: a short name for the directory, not a cache key) is
 * taken over the CPUID feature words LLVM's host detection reads (leaves
 * 1, 7.0, 7.1, 0xd.1, 0x80000001: SSE…AVX-512, FMA, BMI, …) and XCR0
 * (the vector state the OS enables).  Two machines with the same id get
 * the same LLVMGetHostCPUName/Features, so code compiled on one runs on
 * the other; a node with another CPU generation gets another directory.
 * With generic_target the code is compiled for the baseline "x86-64" CPU
 * and the id is "x86_64-generic".  Other architectures use uname -m and a
 * hash of the kernel's cpuinfo "flags"/"Features" line.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

static uint32_t kl_fnv(uint32_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 16777619u;
    }
    return h;
}

static int kl_host_target(int generic, char *buf, size_t size)
{
    int n;
#if defined(__x86_64__)
    if (generic) {
        n = snprintf(buf, size, "x86_64-generic");
        return n < 0 || (size_t)n >= size ? -1 : 0;
    }
    unsigned a = 0, b = 0, c = 0, d = 0, max = __get_cpuid_max(0, NULL);
    uint32_t h = 2166136261u;
    unsigned fam = 0, model = 0;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        fam = (a >> 8) & 0xf;
        model = (a >> 4) & 0xf;
        if (fam == 0xf)
            fam += (a >> 20) & 0xff;
        if (fam == 0x6 || fam >= 0xf)
            model |= ((a >> 16) & 0xf) << 4;
        uint32_t w[2] = {c, d};
        h = kl_fnv(h, w, sizeof w);
        if (c & (1u << 27)) {                 /* OSXSAVE: read XCR0 */
            uint32_t lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            h = kl_fnv(h, &lo, sizeof lo);
        }
    }
    if (max >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        uint32_t w[3] = {b, c, d};
        h = kl_fnv(h, w, sizeof w);
        __cpuid_count(7, 1, a, b, c, d);
        h = kl_fnv(h, &a, sizeof a);
    }
    if (max >= 0xd) {
        __cpuid_count(0xd, 1, a, b, c, d);
        h = kl_fnv(h, &a, sizeof a);
    }
    if (__get_cpuid(0x80000001, &a, &b, &c, &d)) {
        uint32_t w[2] = {c, d};
        h = kl_fnv(h, w, sizeof w);
    }
    n = snprintf(buf, size, "x86_64-f%xm%x-%08x", fam, model, (unsigned)h);
#else
    struct utsname u;
    const char *m = uname(&u) == 0 ? u.machine : "unknown";
    if (generic) {
        n = snprintf(buf, size, "%.60s-generic", m);
        return n < 0 || (size_t)n >= size ? -1 : 0;
    }
    uint32_t h = 2166136261u;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8)) {
            h = kl_fnv(h, line, strlen(line));
            break;
        }
    }
    if (f)
        fclose(f);
    n = snprintf(buf, size, "%.60s-%08x", m, (unsigned)h);
#endif
    return n < 0 || (size_t)n >= size ? -1 : 0;
}
