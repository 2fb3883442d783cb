/*
 * tmpfiles.h — helpers of the data reader tests (test_npy.c, test_csv.c,
 * test_json.c): small files in a fresh temporary directory, and a locale
 * whose decimal point is ','.
 *
 *   if (!tmp_make("kiln-json")) ...        $TMPDIR (or /tmp)/kiln-json-XXXXXX
 *   const char *p = PUT("a.csv", "x\n1\n"); write a literal, get its path
 *   tpath("b.csv")                         a path in the directory
 *   rm_tree(tmpdir);                       remove it all at the end
 *   comma_locale()                         LC_NUMERIC with a ',' decimal
 *                                          point, or NULL (then "C")
 *
 * Header-only (static functions; every test that includes it calls
 * rm_tree); a test includes it once.
 */
#ifndef KILN_TESTS_TMPFILES_H
#define KILN_TESTS_TMPFILES_H

#include <dirent.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[4096];

/* Create the directory; 0 (with errno) when it cannot be made. */
static inline int tmp_make(const char *prefix)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/%s-XXXXXX",
             base && *base ? base : "/tmp", prefix);
    return mkdtemp(tmpdir) != NULL;
}

/* `name` in the directory; the last 4 results stay valid. */
static inline const char *tpath(const char *name)
{
    static char buf[4][4200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

/* Write n bytes of text to `name`; returns its path. */
static inline const char *put(const char *name, const char *text, size_t n)
{
    const char *p = tpath(name);
    FILE *f = fopen(p, "wb");
    if (f) {
        if (n)
            fwrite(text, 1, n, f);
        fclose(f);
    }
    return p;
}

#define PUT(name, lit) put(name, lit, sizeof(lit) - 1)

/* Remove `dir` and everything below it (made writable first). */
static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[8192];
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            chmod(p, 0700);
            rm_tree(p);
        } else {
            unlink(p);
        }
    }
    closedir(d);
    rmdir(dir);
}

/* Set LC_NUMERIC to an installed locale whose decimal point is ',' and
 * return its name; NULL (LC_NUMERIC back to "C") when there is none.  The
 * caller sets "C" again when done. */
static inline const char *comma_locale(void)
{
    static const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8",
                                  "fr_FR.utf8", "de_DE", NULL};
    const char *got = NULL;
    for (int i = 0; names[i] && !got; i++)
        got = setlocale(LC_NUMERIC, names[i]);
    if (!got || strcmp(localeconv()->decimal_point, ".") == 0) {
        setlocale(LC_NUMERIC, "C");
        return NULL;
    }
    return got;
}

#endif
