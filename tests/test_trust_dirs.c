/*
 * test_trust_dirs.c — the trust primitive (core/support/trust.h) on its own:
 * paths through symlinks (merged /usr), "..", missing components, loops,
 * ancestors writable by others with and without the sticky bit, relative
 * resolution from a checked descriptor, files opened by descriptor (a
 * FIFO does not block, a symlink is refused unless followed), and the
 * name to dlopen a descriptor by.  Expected reasons are written from the
 * rule in docs/plugin-abi.md §13, not from the code.
 */
#define _GNU_SOURCE
#include "tap.h"
#include "trust.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char why[8192];

/* kiln_trust_open_dir(path) -> fd or -1/-2, closing the fd. */
static int try_dir(const char *path, int root_ok)
{
    why[0] = '\0';
    int fd = kiln_trust_open_dir(-1, NULL, path, root_ok, why, sizeof why);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    return fd;
}

int main(void)
{
    const char *b = getenv("KILN_BUILDDIR");
    char t[600], p[4000];
    char cwd[512];
    if (!b || b[0] != '/')
        b = getcwd(cwd, sizeof cwd) ? cwd : "/tmp";
    snprintf(t, sizeof t, "%s/tests/trust-dirs.%ld", b, (long)getpid());

    ok(try_dir("/", 1) == 0, "/ opens (root's, root_ok)");
    ok(try_dir("/usr/../usr/lib", 1) == 0, "/usr/../usr/lib: '..' is "
       "resolved on descriptors %s", why);
    struct stat st;
    if (lstat("/lib", &st) == 0 && S_ISLNK(st.st_mode))
        ok(try_dir("/lib", 1) == 0, "/lib, a symlink of merged /usr "
           "(usr/lib), is followed: root's directories throughout %s", why);
    else
        ok(1, "# SKIP /lib is not a symlink here");
    ok(try_dir("/no/such/dir/anywhere", 1) == -1 &&
       strstr(why, "/no: No such file"), "a missing component is -1, "
       "naming where the path stopped: %s", why);
    ok(try_dir("relative/dir", 1) == -2 && strstr(why, "not an absolute"),
       "a relative path without a base is refused: %s", why);

    /* T/a/b, T the parent anyone may write or not */
    snprintf(p, sizeof p, "mkdir -p '%s/a/b' && chmod 755 '%s' '%s/a' "
             "'%s/a/b'", t, t, t, t);
    ok(system(p) == 0, "setup %s", t);
    snprintf(p, sizeof p, "%s/a/b", t);
    ok(try_dir(p, 0) == 0, "T/a/b with every directory ours, 0755: opens "
       "%s", why);
    chmod(t, 0777);
    char want[4200];
    snprintf(want, sizeof want, "ancestor %s is writable by group or "
             "others (mode 0777, not sticky)", t);
    ok(try_dir(p, 0) == -2 && !strcmp(why, want), "T 0777: refused as an "
       "ancestor, with its mode: %s", why);
    chmod(t, 0775);
    ok(try_dir(p, 0) == -2 && strstr(why, "(mode 0775, not sticky)"),
       "T group-writable: refused too: %s", why);
    chmod(t, 01777);
    ok(try_dir(p, 0) == 0, "T 1777 (sticky, like /tmp): accepted %s", why);
    chmod(t, 0755);
    snprintf(p, sizeof p, "%s/a", t);
    chmod(p, 0757);
    snprintf(p, sizeof p, "%s/a/b", t);
    ok(try_dir(p, 0) == -2 && strstr(why, "/a is writable"),
       "a world-writable directory deeper down is found too: %s", why);
    snprintf(p, sizeof p, "%s/a", t);
    chmod(p, 0755);
    snprintf(p, sizeof p, "%s/a/b", t);
    chmod(p, 0777);
    snprintf(want, sizeof want, "directory %s/a/b: writable by group or "
             "others", t);
    ok(try_dir(p, 0) == -2 && !strcmp(why, want), "the directory itself "
       "world-writable: %s", why);
    chmod(p, 0755);
    if (geteuid() == 0) {
        int rc = chown(t, 65534, 65534);
        ok(rc == 0 && try_dir(p, 0) == -2 &&
           strstr(why, "is owned by another user (uid 65534)"),
           "an ancestor of another user (chown nobody): %s", why);
        if (chown(t, 0, 0) != 0)
            diag("chown back failed");
        rc = chown(p, 65534, 65534);
        ok(rc == 0 && try_dir(p, 1) == -2 &&
           strstr(why, "owned by another user"), "the directory itself of "
           "another user, even with root_ok: %s", why);
        if (chown(p, 0, 0) != 0)
            diag("chown back failed");
    } else {
        ok(1, "# SKIP ancestor of another user: needs root for chown");
        ok(1, "# SKIP directory of another user: needs root for chown");
    }

    /* symlinks: a loop, a link to a good directory in a good directory
     * (followed), the same link in a world-writable directory (refused:
     * the link's own directory is on the way) */
    snprintf(p, sizeof p, "%s/loop", t);
    if (symlink("loop", p) != 0)
        diag("symlink: %s", strerror(errno));
    ok(try_dir(p, 1) == -2 && strstr(why, "symlink"), "a symlink loop is "
       "refused, not followed forever: %s", why);
    snprintf(p, sizeof p, "%s/a/link", t);
    if (symlink("b", p) != 0)
        diag("symlink: %s", strerror(errno));
    ok(try_dir(p, 0) == 0, "a relative symlink in a good directory is "
       "followed %s", why);
    snprintf(p, sizeof p, "%s/a", t);
    chmod(p, 0777);
    snprintf(p, sizeof p, "%s/a/link", t);
    ok(try_dir(p, 0) == -2 && strstr(why, "/a is writable"),
       "the same symlink in a world-writable directory is refused, though "
       "its target's ancestors are fine: %s", why);
    snprintf(p, sizeof p, "%s/a", t);
    chmod(p, 0755);

    /* relative resolution from a checked descriptor; files in it */
    int tfd = kiln_trust_open_dir(-1, NULL, t, 0, why, sizeof why);
    int bfd = tfd < 0 ? -1 : kiln_trust_open_dir(tfd, t, "a/b", 0, why,
                                                 sizeof why);
    ok(tfd >= 0 && bfd >= 0, "a/b resolved from T's descriptor %s", why);
    snprintf(p, sizeof p, "%s/a/b", t);
    if (bfd >= 0) {
        int fd = openat(bfd, "f", O_WRONLY | O_CREAT, 0644);
        if (fd >= 0)
            close(fd);
        mkfifo(strcat(strcpy(want, p), "/fifo"), 0600);
        if (symlinkat("f", bfd, "lf") != 0)
            diag("symlinkat: %s", strerror(errno));
        fd = kiln_trust_open_file(bfd, p, "f", 0, 0, why, sizeof why);
        ok(fd >= 0, "a regular file of ours opens by descriptor %s", why);
        char name[64];
        if (fd >= 0) {
            kiln_trust_fd_path(fd, name, sizeof name);
            char self[64];
            snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
            ok(!strcmp(name, self), "its dlopen name is %s", name);
            close(fd);
        } else {
            ok(0, "no descriptor");
        }
        ok(kiln_trust_open_file(bfd, p, "fifo", 0, 0, why, sizeof why) ==
           -2 && !strcmp(why, "not a regular file"), "a FIFO is refused "
           "without blocking: %s", why);
        ok(kiln_trust_open_file(bfd, p, "lf", 0, 0, why, sizeof why) == -2 &&
           !strcmp(why, "a symlink"), "a symlink is refused when not "
           "followed: %s", why);
        fd = kiln_trust_open_file(bfd, p, "lf", 0, 1, why, sizeof why);
        ok(fd >= 0, "... and opened when followed (its directory checked) "
           "%s", why);
        if (fd >= 0)
            close(fd);
        ok(kiln_trust_open_file(bfd, p, "none", 0, 1, why, sizeof why) == -1,
           "a missing file is -1");
        fchmodat(bfd, "f", 0666, 0);
        ok(kiln_trust_open_file(bfd, p, "f", 0, 0, why, sizeof why) == -2 &&
           !strcmp(why, "writable by group or others"),
           "a world-writable file is refused: %s", why);
        close(bfd);
    } else {
        for (int i = 0; i < 7; i++)
            ok(0, "no descriptor for a/b");
    }
    if (tfd >= 0)
        close(tfd);

    /* kiln_trust_make_dir (a cache directory made on first use): T/w is
     * anyone's (0777) and holds a symlink "x" to T/v, a directory of
     * ours.  Making T/w/x/new must make nothing in T/v: a mkdir -p by
     * path made T/v/new before the check refused the path (found by an
     * attack on issue 24) */
    snprintf(p, sizeof p, "mkdir -p '%s/w' '%s/v' && chmod 777 '%s/w' && "
             "chmod 700 '%s/v' && ln -s '%s/v' '%s/w/x'", t, t, t, t, t, t);
    ok(system(p) == 0, "setup T/w (0777) with x -> T/v");
    snprintf(p, sizeof p, "%s/w/x/new", t);
    snprintf(want, sizeof want, "ancestor %s/w is writable by group or "
             "others (mode 0777, not sticky)", t);
    int mfd = kiln_trust_make_dir(p, why, sizeof why);
    ok(mfd == -2 && !strcmp(why, want), "making T/w/x/new is refused: %s",
       why);
    snprintf(p, sizeof p, "%s/v/new", t);
    ok(access(p, F_OK) != 0, "... and T/v/new was not made");
    snprintf(p, sizeof p, "%s/m/n/o", t);
    why[0] = '\0';
    mfd = kiln_trust_make_dir(p, why, sizeof why);
    ok(mfd >= 0 && stat(p, &st) == 0 && S_ISDIR(st.st_mode) &&
       (st.st_mode & 077) == 0, "T/m/n/o is made, mode 0700 %s", why);
    if (mfd >= 0)
        close(mfd);
    mfd = kiln_trust_make_dir(p, why, sizeof why);
    ok(mfd >= 0, "making it again opens it %s", why);
    if (mfd >= 0)
        close(mfd);
    snprintf(p, sizeof p, "%s/m/f", t);
    fclose(fopen(p, "w"));
    snprintf(p, sizeof p, "%s/m/f/sub", t);
    ok(kiln_trust_make_dir(p, why, sizeof why) == -2 &&
       strstr(why, "not a directory"), "a file on the way: refused: %s", why);

    snprintf(p, sizeof p, "rm -rf '%s'", t);
    if (system(p) != 0)
        diag("could not remove %s", t);
    return done_testing();
}
