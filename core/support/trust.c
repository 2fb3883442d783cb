/*
 * trust.c — owner and mode checks, and opening directories and files
 * under them on descriptors (trust.h).
 */
#define _GNU_SOURCE     /* O_DIRECTORY, O_NOFOLLOW, AT_SYMLINK_NOFOLLOW */
#include "trust.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_LINKS 40            /* symlinks followed in one resolution */
#define PATHBUF 4096

void (*kiln_trust_test_hook)(const char *what, const char *path);

const char *kiln_trust_stat(const struct stat *st, int want_dir, int root_ok)
{
    if (want_dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
        return want_dir ? "not a directory" : "not a regular file";
    if (st->st_uid != geteuid() && !(root_ok && st->st_uid == 0))
        return "owned by another user";
    if (st->st_mode & (S_IWGRP | S_IWOTH))
        return "writable by group or others";
    return 0;
}

int kiln_trust_absolute(const char *path)
{
    return path && path[0] == '/';
}

void kiln_trust_fd_path(int fd, char *buf, size_t size)
{
    snprintf(buf, size, "/proc/self/fd/%d", fd);
}

/* An ancestor (or a directory holding a symlink followed): owned by root
 * or the user, and not writable by group or others unless sticky.  0, or
 * -2 with the reason in why[]. */
static int check_ancestor(const struct stat *st, const char *shown,
                          char *why, size_t size)
{
    if (st->st_uid != 0 && st->st_uid != geteuid()) {
        snprintf(why, size, "ancestor %s is owned by another user (uid %lu)",
                 shown, (unsigned long)st->st_uid);
        return -2;
    }
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX)) {
        snprintf(why, size, "ancestor %s is writable by group or others "
                 "(mode %04o, not sticky)", shown,
                 (unsigned)(st->st_mode & 07777));
        return -2;
    }
    return 0;
}

/* Append component c (or go up for "..") to the shown path. */
static void shown_step(char *shown, size_t size, const char *c)
{
    size_t n = strlen(shown);
    if (!strcmp(c, "..")) {
        char *s = strrchr(shown, '/');
        if (s)
            *s = '\0';
        return;
    }
    snprintf(shown + n, size - n, "/%s", c);
}

static int open_root(char *why, size_t size)
{
    int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        snprintf(why, size, "/: %s", strerror(errno));
    return fd;
}

/* kiln_trust_open_dir, and kiln_trust_make_dir when `create`: a missing
 * component is made (mode 0700) in the directory reached so far, which
 * has passed the ancestor check. */
static int walk(int at, const char *at_path, const char *path, int root_ok,
                int create, char *why, size_t size)
{
    char rest[2 * PATHBUF], shown[PATHBUF], comp[PATHBUF];
    if (!path || strlen(path) >= PATHBUF) {
        snprintf(why, size, "%.200s: path too long", path ? path : "(null)");
        return -2;
    }
    snprintf(rest, sizeof rest, "%s", path);
    int cur;
    if (path[0] == '/' || at < 0) {
        if (path[0] != '/') {
            snprintf(why, size, "%.200s: not an absolute path", path);
            return -2;
        }
        shown[0] = '\0';
        cur = open_root(why, size);
    } else {
        snprintf(shown, sizeof shown, "%s", at_path ? at_path : ".");
        cur = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cur < 0)
            snprintf(why, size, "%s: %s", shown, strerror(errno));
    }
    if (cur < 0)
        return -2;
    struct stat cst;
    if (fstat(cur, &cst) != 0) {
        snprintf(why, size, "%s: %s", shown[0] ? shown : "/",
                 strerror(errno));
        close(cur);
        return -2;
    }
    int links = 0, final_checked = 0;
    if (check_ancestor(&cst, shown[0] ? shown : "/", why, size)) {
        close(cur);
        return -2;
    }
    char *p = rest;
    for (;;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        memcpy(comp, p, len);
        comp[len] = '\0';
        p += len;
        const char *q = p;
        while (*q == '/')
            q++;
        int last = !*q;
        if (!strcmp(comp, "."))
            continue;
        struct stat lst;
        /* cur passed the ancestor check: making a directory in it makes
         * nothing where someone else decides (EEXIST: made meanwhile;
         * any other failure is the reason: fstatat below would say only
         * ENOENT, hiding EACCES, EROFS or ENOSPC) */
        if (create && strcmp(comp, "..") != 0 &&
            fstatat(cur, comp, &lst, AT_SYMLINK_NOFOLLOW) != 0 &&
            errno == ENOENT && mkdirat(cur, comp, 0700) != 0 &&
            errno != EEXIST) {
            int en = errno;
            shown_step(shown, sizeof shown, comp);
            snprintf(why, size, "%s: %s", shown, strerror(en));
            close(cur);
            return -1;
        }
        if (fstatat(cur, comp, &lst, AT_SYMLINK_NOFOLLOW) != 0) {
            int en = errno;
            shown_step(shown, sizeof shown, comp);
            snprintf(why, size, "%s: %s", shown, strerror(en));
            close(cur);
            return en == ENOENT ? -1 : -2;
        }
        if (S_ISLNK(lst.st_mode)) {
            /* the directory holding it passed check_ancestor: only root
             * or the user can change it, except in a sticky directory,
             * where the link's owner can: it must be root or the user */
            char lpath[2 * PATHBUF + 2];
            snprintf(lpath, sizeof lpath, "%s/%s", shown, comp);
            if ((cst.st_mode & (S_IWGRP | S_IWOTH)) && lst.st_uid != 0 &&
                lst.st_uid != geteuid()) {
                snprintf(why, size, "symlink %s is owned by another user "
                         "(uid %lu) in a shared directory", lpath,
                         (unsigned long)lst.st_uid);
                close(cur);
                return -2;
            }
            char target[PATHBUF];
            ssize_t tn = readlinkat(cur, comp, target, sizeof target - 1);
            if (tn <= 0 || ++links > MAX_LINKS ||
                (size_t)tn + strlen(p) + 2 > sizeof rest) {
                snprintf(why, size, "symlink %s: %s", lpath,
                         tn < 0 ? strerror(errno) : "too many or too long");
                close(cur);
                return -2;
            }
            target[tn] = '\0';
            /* rest becomes TARGET/REMAINDER (lengths checked above) */
            size_t pl = strlen(p);
            memmove(rest + tn + 1, p, pl + 1);
            memcpy(rest, target, (size_t)tn);
            rest[tn] = '/';
            p = rest;
            if (target[0] == '/') {
                close(cur);
                shown[0] = '\0';
                if ((cur = open_root(why, size)) < 0)
                    return -2;
                if (fstat(cur, &cst) != 0 ||
                    check_ancestor(&cst, "/", why, size)) {
                    close(cur);
                    return -2;
                }
            }
            continue;
        }
        int nfd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                        O_CLOEXEC);
        int en = errno;
        shown_step(shown, sizeof shown, comp);
        close(cur);
        if (nfd < 0) {
            snprintf(why, size, "%s: %s", shown,
                     en == ELOOP || en == ENOTDIR ? "not a directory"
                                                  : strerror(en));
            return en == ENOENT ? -1 : -2;
        }
        cur = nfd;
        if (fstat(cur, &cst) != 0) {
            snprintf(why, size, "%s: %s", shown, strerror(errno));
            close(cur);
            return -2;
        }
        if (last) {
            const char *bad = kiln_trust_stat(&cst, 1, root_ok);
            if (bad) {
                snprintf(why, size, "directory %s: %s", shown, bad);
                close(cur);
                return -2;
            }
            final_checked = 1;
        } else if (check_ancestor(&cst, shown, why, size)) {
            close(cur);
            return -2;
        }
    }
    if (!final_checked) {   /* "/" itself, or a path ending in "." */
        const char *bad = kiln_trust_stat(&cst, 1, root_ok);
        if (bad) {
            snprintf(why, size, "directory %s: %s", shown[0] ? shown : "/",
                     bad);
            close(cur);
            return -2;
        }
    }
    return cur;
}

int kiln_trust_open_dir(int at, const char *at_path, const char *path,
                        int root_ok, char *why, size_t size)
{
    return walk(at, at_path, path, root_ok, 0, why, size);
}

int kiln_trust_make_dir(const char *path, char *why, size_t size)
{
    return walk(-1, NULL, path, 0, 1, why, size);
}

int kiln_trust_open_file(int dirfd, const char *dir, const char *name,
                         int root_ok, int follow, char *why, size_t size)
{
    /* O_NONBLOCK: a FIFO planted in the file's place must not block */
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
                                     O_NONBLOCK);
    if (fd < 0 && errno == ELOOP && follow) {
        /* a symlink: dirfd passed the final-directory check, so only root
         * or the user made it; its target is checked like any path */
        char target[PATHBUF];
        ssize_t tn = readlinkat(dirfd, name, target, sizeof target - 1);
        if (tn <= 0) {
            snprintf(why, size, "symlink: %s",
                     tn < 0 ? strerror(errno) : "empty");
            return -2;
        }
        target[tn] = '\0';
        char *slash = strrchr(target, '/');
        if (!slash) {
            fd = openat(dirfd, target, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
                                           O_NONBLOCK);
        } else {
            *slash = '\0';
            char sub[PATHBUF + 100];
            int d2 = kiln_trust_open_dir(dirfd, dir,
                                         target[0] ? target : "/", root_ok,
                                         sub, sizeof sub);
            if (d2 < 0) {
                snprintf(why, size, "symlink into %s", sub);
                return -2;
            }
            fd = openat(d2, slash + 1, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
                                           O_NONBLOCK);
            int en = errno;
            close(d2);
            errno = en;
        }
    }
    if (fd < 0) {
        int en = errno;
        snprintf(why, size, "%s", en == ELOOP ? "a symlink" : strerror(en));
        return en == ENOENT ? -1 : -2;
    }
    struct stat st;
    const char *bad = fstat(fd, &st) != 0 ? strerror(errno)
                                          : kiln_trust_stat(&st, 0, root_ok);
    if (bad) {
        snprintf(why, size, "%s", bad);
        close(fd);
        return -2;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}
