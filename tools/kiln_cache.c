/*
 * kiln_cache.c — `kiln cache stats|list|verify|prune|clear` and the
 * per-kernel report of `kiln run --cache-report` (docs/cache.md).
 */
#define _POSIX_C_SOURCE 200809L  /* gmtime_r */
#include "kiln_cli.h"

#include <kiln/cache.h>
#include <kiln/kiln.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char cache_usage[] =
    "usage: kiln cache stats | list | verify [--remove] |\n"
    "                  prune [--max-size SIZE] | clear\n"
    "The cache is $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else "
    "~/.cache/kiln;\n"
    "list and verify also cover the read-only caches of $KILN_CACHE_PATH.\n";

static void human(uint64_t b, char *buf, size_t size)
{
    if (b >= (uint64_t)1 << 30)
        snprintf(buf, size, "%.2f GiB", (double)b / (1 << 30));
    else if (b >= (uint64_t)1 << 20)
        snprintf(buf, size, "%.2f MiB", (double)b / (1 << 20));
    else if (b >= 1024)
        snprintf(buf, size, "%.1f KiB", (double)b / 1024);
    else
        snprintf(buf, size, "%llu B", (unsigned long long)b);
}

typedef struct tally {
    int bad, removed, kept;
} tally;

static int print_entry(const kiln_cache_entry *e, void *ctx)
{
    tally *ty = ctx;
    char when[32] = "?";
    time_t t = (time_t)e->mtime;
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (e->ok)
        printf("%s  %-8s %9llu B  %8.3f ms  %s  %s\n", e->key, e->backend,
               (unsigned long long)e->bytes, 1e3 * e->compile_seconds, when,
               e->dir);
    else if (e->removed)
        printf("%s  BAD: %s  (%s)  removed\n", e->key, e->problem, e->path);
    else if (e->not_removed)
        printf("%s  BAD: %s  (%s)  NOT removed: %s\n", e->key, e->problem,
               e->path, e->not_removed);
    else
        printf("%s  BAD: %s  (%s)\n", e->key, e->problem, e->path);
    if (!e->ok && ty) {
        ty->bad++;
        ty->removed += e->removed;
        ty->kept += !e->removed;
    }
    return 0;
}

/* list or verify one cache; 0, 1 (bad entries found and not all removed)
 * or -1 (the cache could not be read: said on stderr). */
static int look_at(kiln_cache *c, int verify, int remove_bad)
{
    kiln_err err = {0, ""};
    tally t = {0, 0, 0};
    int ro = kiln_cache_is_read_only(c);
    if (ro)
        printf("read-only cache %s:\n", kiln_cache_dir(c));
    int rc = verify ? kiln_cache_verify(c, remove_bad, print_entry, &t, &err)
                    : kiln_cache_list(c, print_entry, &t, &err);
    if (rc) {
        fprintf(stderr, "kiln: %s\n", err.message[0] ? err.message
                                                      : "cache: error");
        return -1;
    }
    if (!verify)
        return 0;
    if (!remove_bad || t.bad == 0)
        printf("%d bad entr%s in %s\n", t.bad, t.bad == 1 ? "y" : "ies",
               kiln_cache_dir(c));
    else
        printf("%d bad entr%s in %s: %d removed, %d not removed\n", t.bad,
               t.bad == 1 ? "y" : "ies", kiln_cache_dir(c), t.removed,
               t.kept);
    if (remove_bad && t.kept)
        fprintf(stderr, "kiln: cache verify --remove: %d bad entr%s left in "
                "%s (see above why)\n", t.kept, t.kept == 1 ? "y" : "ies",
                kiln_cache_dir(c));
    return remove_bad ? t.kept > 0 : t.bad > 0;
}

/* list/verify: the user cache, then every read-only cache. */
static int look_at_all(kiln_cache *user, int verify, int remove_bad)
{
    int worst = user ? look_at(user, verify, remove_bad) : 0;
    char **ro = kiln_cache_read_only_dirs();
    if (!ro) {
        fprintf(stderr, "kiln: out of memory\n");
        return 1;
    }
    for (int i = 0; ro[i]; i++) {
        kiln_err err = {0, ""};
        kiln_cache *c = kiln_cache_open_read_only(ro[i], &err);
        if (!c) {
            /* a cache kiln refuses is not used either: say so */
            fprintf(stderr, "kiln: %s (listed in KILN_CACHE_PATH or a "
                    "configuration file)\n",
                    err.message);
            worst = worst < 0 ? worst : -1;
            continue;
        }
        int r = look_at(c, verify, remove_bad);
        if (r < 0 || (r > 0 && worst >= 0))
            worst = r;
        kiln_cache_close(c);
    }
    kiln_cache_free_dirs(ro);
    return worst != 0;
}

int kiln_cli_cache(int argc, char **argv)
{
    if (argc < 1) {
        fputs(cache_usage, stderr);
        return 2;
    }
    const char *sub = argv[0];
    uint64_t max = 0;
    int remove_bad = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(sub, "prune") == 0 && strcmp(argv[i], "--max-size") == 0 &&
            i + 1 == argc) {
            fprintf(stderr, "kiln: --max-size needs a value such as 512M\n");
            return 2;
        }
        if (strcmp(sub, "prune") == 0 && strcmp(argv[i], "--max-size") == 0 &&
            i + 1 < argc) {
            if (kiln_cache_parse_size(argv[++i], &max) != 0 || max == 0) {
                fprintf(stderr, "kiln: --max-size takes a size above 0 such "
                        "as 512M or 2G, got '%s' (to empty the cache: kiln "
                        "cache clear)\n", argv[i]);
                return 2;
            }
        } else if (strcmp(sub, "verify") == 0 &&
                   strcmp(argv[i], "--remove") == 0) {
            remove_bad = 1;
        } else {
            fprintf(stderr, "kiln: cache %s: unexpected '%s'\n%s", sub,
                    argv[i], cache_usage);
            return 2;
        }
    }
    int known = !strcmp(sub, "stats") || !strcmp(sub, "list") ||
                !strcmp(sub, "verify") || !strcmp(sub, "prune") ||
                !strcmp(sub, "clear");
    if (!known) {
        fprintf(stderr, "kiln: unknown cache command '%s'\n%s", sub,
                cache_usage);
        return 2;
    }
    const char *ms = getenv("KILN_CACHE_MAX_SIZE");
    uint64_t v;
    if (ms && *ms && (kiln_cache_parse_size(ms, &v) != 0 || v == 0))
        fprintf(stderr, "kiln: cache: KILN_CACHE_MAX_SIZE='%s' is not a size "
                "such as 512M or 2G; using the default\n", ms);
    kiln_err err = {0, ""};
    /* never create the cache: a mistyped KILN_CACHE_DIR must not look
     * like a valid, empty cache */
    kiln_cache *c = kiln_cache_open(NULL, 0, &err);
    if (!c && strstr(err.message, "No such file or directory")) {
        printf("no user cache yet (%s)\n", err.message);
        if (!strcmp(sub, "list") || !strcmp(sub, "verify"))
            return look_at_all(NULL, !strcmp(sub, "verify"), remove_bad);
        return 0;
    }
    if (!c) {
        fprintf(stderr, "kiln: %s\n", err.message);
        return 1;
    }
    int rc = 0;
    if (!strcmp(sub, "stats")) {
        kiln_cache_stats st;
        rc = kiln_cache_get_stats(c, &st, &err);
        if (rc == 0) {
            char b[32], m[32];
            human(st.bytes, b, sizeof b);
            human(st.max_bytes, m, sizeof m);
            double tot = (double)(st.hits + st.misses);
            printf("directory      %s\n", kiln_cache_dir(c));
            printf("entries        %llu\n", (unsigned long long)st.entries);
            printf("size           %s of %s\n", b, m);
            printf("hits           %llu (%.1f %%)\n",
                   (unsigned long long)st.hits,
                   tot > 0 ? 100.0 * (double)st.hits / tot : 0.0);
            printf("misses         %llu\n", (unsigned long long)st.misses);
            printf("writes         %llu\n", (unsigned long long)st.writes);
            printf("bad entries    %llu\n", (unsigned long long)st.bad);
            printf("compile saved  %.3f s\n", st.saved_seconds);
        }
    } else if (!strcmp(sub, "list") || !strcmp(sub, "verify")) {
        int r = look_at_all(c, !strcmp(sub, "verify"), remove_bad);
        kiln_cache_close(c);
        return r;
    } else {
        uint64_t removed = 0;
        rc = !strcmp(sub, "prune") ? kiln_cache_prune(c, max, &removed, &err)
                                   : kiln_cache_clear(c, &removed, &err);
        printf("removed %llu entr%s from %s\n", (unsigned long long)removed,
               removed == 1 ? "y" : "ies", kiln_cache_dir(c));
    }
    if (rc && err.message[0])
        fprintf(stderr, "kiln: %s\n", err.message);
    kiln_cache_close(c);
    return rc ? 1 : 0;
}

void kiln_cli_cache_report(const kiln_function *f, FILE *out)
{
    static const char *what[] = {"-", "hit", "miss", "bad", "dup"};
    int n = kiln_function_n_kernels(f);
    int hits = 0, misses = 0, dups = 0;
    double ms = 0, saved = 0;
    fprintf(out, "kernel  key           backend  cache        ms  stored    "
            "op\n");
    for (int i = 0; i < n; i++) {
        kiln_kernel_report r;
        memset(&r, 0, sizeof r);
        r.struct_size = sizeof r;
        if (kiln_function_kernel_report(f, i, &r))
            continue;
        char hex[KILN_KEY_HEX + 1];
        kiln_key_hex(&r.key, hex);
        int c = r.cache >= 0 && r.cache <= 4 ? r.cache : 0;
        char note[200] = "";
        if (r.note && (r.cache == KILN_CACHE_MISS ||
                       r.cache == KILN_CACHE_BAD ||
                       r.cache == KILN_CACHE_NONE))
            snprintf(note, sizeof note, "  (not %s: %s)",
                     r.cache == KILN_CACHE_NONE ? "cached" : "stored",
                     r.note);
        fprintf(out, "%6d  %.12s  %-7s  %-5s  %8.3f  %-8s  %s%s\n", i, hex,
                r.backend ? r.backend : "?", what[c],
                1e3 * r.compile_seconds, r.written ? "(stored)" : "",
                r.label ? r.label : "", note);
        hits += r.cache == KILN_CACHE_HIT;
        dups += r.cache == KILN_CACHE_SHARED;
        misses += r.cache == KILN_CACHE_MISS || r.cache == KILN_CACHE_BAD;
        ms += 1e3 * r.compile_seconds;
        saved += 1e3 * r.saved_seconds;
    }
    fprintf(out, "%d kernels (%d repeats sharing code): %d hit%s, %d miss%s "
            "(bad entries included); "
            "%.3f ms compiling or loading, %.3f ms of compiling saved\n", n,
            dups, hits, hits == 1 ? "" : "s", misses, misses == 1 ? "" : "es",
            ms, saved);
}
