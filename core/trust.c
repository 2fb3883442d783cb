/*
 * trust.c — owner and mode checks (trust.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "trust.h"

#include <unistd.h>

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
