/*
 * trust.h — the checks kiln makes before it trusts a directory or file it
 * is about to load code, cached code or configuration from: plugins, the
 * llvm plugin's compiler module, cache roots (the user's and read-only
 * site caches), the user's and site's configuration, the BridgeStan
 * template.  Design invariants 4 and 8; docs/cache.md "Who is trusted for
 * what", docs/plugin-abi.md §13.
 *
 * The rule.  A directory is resolved from '/' one component at a time on
 * descriptors (openat, O_NOFOLLOW; a symlink met on the way is read and
 * its target resolved the same way), and every directory passed through
 * -- every ancestor of what is finally opened, and every directory that
 * holds a symlink followed -- must be owned by root or the effective user
 * and not writable by group or others, unless it is sticky (like /tmp); a
 * symlink in a sticky directory must itself belong to root or the user.
 * The final directory must be owned by the user (or root, `root_ok`) and
 * not writable by group or others.  Then a file is opened in it with
 * openat(O_NOFOLLOW) and fstat'ed (a regular file, owned by the user or
 * root when root_ok, not writable by group or others), and the caller
 * uses that descriptor only: dlopen(kiln_trust_fd_path()) for code,
 * read() for cached code, openat() below a cache root.  Nothing is looked
 * up by path again, so a rename or symlink swapped in after the checks
 * changes nothing.
 *
 * This file (trust.c) is linked into libkiln and, as its own copy, into
 * the llvm plugin (which cannot reach libkiln's internals): both check
 * with the same code.  Thread-safe; no global state but the test hook.
 */
#ifndef KILN_CORE_TRUST_H
#define KILN_CORE_TRUST_H

#include <stddef.h>
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

/* Open the directory `path` (absolute; a relative one is resolved from
 * the directory open at `at`, which must itself have been opened by this
 * function, and named `at_path` in messages) under the rule above.
 * Returns an O_RDONLY|O_DIRECTORY|O_CLOEXEC descriptor (the caller closes
 * it); -1 when the path does not exist (a missing component: why[] holds
 * "PATH: No such file or directory"); -2 when it is refused or cannot be
 * opened, with why[] one clause naming the directory and the reason, for
 * example "ancestor /scratch/proj is writable by group or others (mode
 * 0777, not sticky)" or "directory /x: owned by another user". */
int kiln_trust_open_dir(int at, const char *at_path, const char *path,
                        int root_ok, char *why, size_t size);

/* kiln_trust_open_dir(-1, NULL, path, 0, ...) that first makes each
 * missing directory (mode 0700, like mkdir -p) -- made only inside a
 * directory that has passed the ancestor check, never by path, so a
 * symlink planted in a directory someone else can write makes nothing
 * where it points.  Returns what kiln_trust_open_dir returns (-1: a
 * component could not be made; why[] says where). */
int kiln_trust_make_dir(const char *path, char *why, size_t size);

/* Open `name` (no '/') in the directory `dirfd` (from kiln_trust_open_dir,
 * named `dir` in messages) with O_NOFOLLOW and check the descriptor: a
 * regular file, owned by the user or root (root_ok), not writable by
 * group or others.  With `follow`, a symlink there is followed once: its
 * target's directory is opened with kiln_trust_open_dir (relative to
 * dirfd) and the file opened in it the same way ("symlink into directory
 * D: reason" when that directory is refused).  Returns a read-only
 * O_CLOEXEC descriptor, -1 when there is no such file, -2 when refused
 * (why[] says why, without the file's own name). */
int kiln_trust_open_file(int dirfd, const char *dir, const char *name,
                         int root_ok, int follow, char *why, size_t size);

/* "/proc/self/fd/N" for `fd` into buf: the name to dlopen a verified
 * descriptor by.  Keep fd open as long as the library stays loaded (the
 * dynamic loader remembers objects by that name). */
void kiln_trust_fd_path(int fd, char *buf, size_t size);

/* Test hook (tests only; NULL otherwise): called after a directory or
 * file has been checked and before it is used, with what is about to
 * happen ("plugin", "cache") and the path.  A test swaps the path there
 * to show that what is used is what was checked. */
extern void (*kiln_trust_test_hook)(const char *what, const char *path);

#endif
