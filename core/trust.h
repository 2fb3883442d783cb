/*
 * trust.h — the owner and mode checks kiln makes before it trusts a file
 * or directory it is about to load code or configuration from (cache
 * entries and their directories, the user's and site's configuration).
 * Design invariants 4 and 8; docs/cache.md, "Who is trusted for what".
 */
#ifndef KILN_CORE_TRUST_H
#define KILN_CORE_TRUST_H

#include <sys/stat.h>

/* Why `st` must not be trusted, or NULL when it may be: it must be a
 * directory (want_dir) or a regular file, owned by the effective user
 * (or by root when `root_ok`: site caches, site configuration), and not
 * writable by group or others.  The string is static. */
const char *kiln_trust_stat(const struct stat *st, int want_dir, int root_ok);

/* 1 when `path` is absolute (starts with '/'), else 0.  Every directory
 * kiln loads code from must be absolute: a relative one would depend on
 * the working directory, which a downloaded model's folder can be. */
int kiln_trust_absolute(const char *path);

#endif
