/*
 * userconfig.c — the user's and the site's configuration files (userconfig.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "userconfig.h"
#include "ir.h"
#include "trust.h"
#include "yaml_read.h"

#include <kiln/policy.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *kiln_config_user_path(char *buf, size_t n)
{
    const char *e = getenv("XDG_CONFIG_HOME");
    int w;
    if (e && kiln_trust_absolute(e))
        w = snprintf(buf, n, "%s/kiln/config.yaml", e);
    else if ((e = getenv("HOME")) && kiln_trust_absolute(e))
        w = snprintf(buf, n, "%s/.config/kiln/config.yaml", e);
    else
        return NULL;
    return w > 0 && (size_t)w < n ? buf : NULL;
}

const char *kiln_config_site_path(void)
{
    const char *e = getenv("KILN_SITE_CONFIG");
    return e && *e ? e : "/etc/kiln/config.yaml";
}

/* A relative $KILN_SITE_CONFIG would be read from the working directory
 * (a model's folder): it is ignored with one line. */
static const char *site_path_checked(FILE *diag, int quiet)
{
    const char *p = kiln_config_site_path();
    if (kiln_trust_absolute(p))
        return p;
    if (!quiet)
        fprintf(diag, "kiln: config: $KILN_SITE_CONFIG '%.200s' is not an "
                "absolute path; ignoring it\n", p);
    return NULL;
}

/* ---- the schema ------------------------------------------------------ */

static int abs_dir(kiln_yaml *r, yaml_node_t *v, const char *what,
                   const char **out)
{
    if (kiln_yaml_string(r, v, what, out))
        return -1;
    if (!kiln_trust_absolute(*out))
        return kiln_yaml_error(r, v, "%s: '%s' is not an absolute path (no "
                               "'~' or relative paths: they would depend on "
                               "the current directory)", what, *out);
    return 0;
}

static int cache_pair(kiln_yaml *r, const char *key, yaml_node_t *k,
                      yaml_node_t *v, void *ctx)
{
    kiln_config *c = r->user;
    (void)ctx;
    const char *s;
    if (!strcmp(key, "dir")) {
        if (abs_dir(r, v, "cache.dir", &s))
            return -1;
        free(c->cache_dir);
        if (!(c->cache_dir = strdup(s)))
            return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
        return 0;
    }
    if (!strcmp(key, "max_size"))
        return kiln_yaml_size(r, v, "cache.max_size", &c->cache_max_bytes);
    if (!strcmp(key, "read_only")) {
        if (kiln_yaml_expect_list(r, v, "cache.read_only"))
            return -1;
        yaml_node_item_t *b = v->data.sequence.items.start;
        yaml_node_item_t *e = v->data.sequence.items.top;
        size_t have = 0;
        while (c->cache_read_only && c->cache_read_only[have])
            have++;
        char **nv = realloc(c->cache_read_only,
                            sizeof *nv * (have + (size_t)(e - b) + 1));
        if (!nv)
            return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
        c->cache_read_only = nv;
        nv[have] = NULL;
        for (yaml_node_item_t *q = b; q < e; q++) {
            yaml_node_t *it = kiln_yaml_node(r, *q);
            if (!it || abs_dir(r, it, "cache.read_only", &s))
                return -1;
            if (!(nv[have] = strdup(s)))
                return kiln_seterr(r->err, KILN_ERR_NOMEM, "out of memory");
            nv[++have] = NULL;
        }
        return 0;
    }
    return kiln_yaml_unknown_key(r, k, "cache", key,
                                 "dir, max_size, read_only");
}

typedef struct top_ctx {
    yaml_node_t *version;
} top_ctx;

static int top_pair(kiln_yaml *r, const char *key, yaml_node_t *k,
                    yaml_node_t *v, void *ctx)
{
    top_ctx *t = ctx;
    if (!strcmp(key, "kiln_config")) {
        t->version = v;
        return 0;
    }
    if (!strcmp(key, "cache"))
        return kiln_yaml_is_null(v) ? 0
               : kiln_yaml_each_pair(r, v, "cache", cache_pair, NULL);
    return kiln_yaml_unknown_key(r, k, "configuration", key,
                                 "kiln_config, cache");
}

static int read_config(kiln_yaml *r, yaml_node_t *root)
{
    top_ctx t = {0};
    if (!root || (root->type == YAML_SCALAR_NODE && kiln_yaml_is_null(root)))
        return 0;                       /* an empty file sets nothing */
    if (kiln_yaml_each_pair(r, root, "configuration", top_pair, &t))
        return -1;
    if (kiln_yaml_schema(r, root, t.version, "kiln_config",
                         KILN_CONFIG_SCHEMA))
        return -1;
    return 0;
}

/* ---- reading one file ------------------------------------------------ */

/* The directory part of `path` into buf ("/" for "/x", "." for "x"). */
static void dir_of(const char *path, char *buf, size_t n)
{
    const char *s = strrchr(path, '/');
    size_t len = s ? (size_t)(s - path) : 1;
    if (s == path)
        len = 1;
    if (len >= n)
        len = n - 1;
    memcpy(buf, s ? path : ".", len);
    buf[len] = '\0';
}

/* Open `path` for reading after the checks of core/support/trust.h: its
 * directory and every ancestor, then the file by descriptor (one symlink
 * followed, its target checked the same way; a configuration names the caches
 * kiln loads code from).  Returns the fd, -1 when the file does not
 * exist, -2 (with *why set) when it is refused. */
static int open_checked(const char *path, int root_ok, char *why, size_t n)
{
    char dir[4096], w[8400];
    struct stat st;
    dir_of(path, dir, sizeof dir);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    int dfd = kiln_trust_open_dir(-1, NULL, dir, 1, w, sizeof w);
    if (dfd == -1 || (dfd < 0 && lstat(path, &st) != 0))
        return -1;          /* nothing there: nothing to refuse */
    if (dfd < 0) {
        snprintf(why, n, "%.4000s", w);
        return -2;
    }
    int fd = kiln_trust_open_file(dfd, dir, base, root_ok, 1, w, sizeof w);
    close(dfd);
    if (fd == -2)
        snprintf(why, n, "%.4000s", w);
    return fd;
}

static int load_one(kiln_config *c, const char *path, int root_ok,
                    FILE *diag, int quiet)
{
    char why[4200];
    int fd = open_checked(path, root_ok, why, sizeof why);
    if (fd == -1)
        return 0;
    if (fd == -2) {
        if (!quiet)
            fprintf(diag, "kiln: config: refusing %s: %s; ignoring it\n",
                    path, why);
        return 0;
    }
    char *text = NULL;
    size_t len = 0;
    int rc = kiln_yaml_read_fd(fd, KILN_POLICY_MAX_SIZE, &text, &len);
    int eno = errno;
    close(fd);
    if (rc) {
        if (!quiet)
            fprintf(diag, "kiln: config: %s: %s; ignoring it\n", path,
                    strerror(eno));
        return eno == ENOMEM ? -1 : 0;
    }
    kiln_config one = {NULL, NULL, -1};
    kiln_err err = {0, ""};
    kiln_yaml r;
    memset(&r, 0, sizeof r);
    r.file = path;
    r.err = &err;
    r.code = KILN_ERR_POLICY;
    r.user = &one;
    rc = kiln_yaml_load(&r, text, len, "configuration");
    free(text);
    if (rc == 0) {
        rc = read_config(&r, yaml_document_get_root_node(&r.doc));
        kiln_yaml_done(&r);
    }
    if (rc) {
        if (!quiet)
            fprintf(diag, "kiln: config: %s; ignoring %s\n", err.message,
                    path);
        kiln_config_free(&one);
        return err.code == KILN_ERR_NOMEM ? -1 : 0;
    }
    /* the user's file is read first: what it set wins, lists are joined */
    if (!c->cache_dir) {
        c->cache_dir = one.cache_dir;
        one.cache_dir = NULL;
    }
    if (c->cache_max_bytes < 0)
        c->cache_max_bytes = one.cache_max_bytes;
    size_t have = 0, add = 0;
    while (c->cache_read_only[have])
        have++;
    while (one.cache_read_only && one.cache_read_only[add])
        add++;
    if (add) {
        char **nv = realloc(c->cache_read_only, sizeof *nv * (have + add + 1));
        if (!nv) {
            kiln_config_free(&one);
            return -1;
        }
        memcpy(nv + have, one.cache_read_only, sizeof *nv * add);
        nv[have + add] = NULL;
        c->cache_read_only = nv;
        free(one.cache_read_only);
        one.cache_read_only = NULL;
    }
    kiln_config_free(&one);
    return 0;
}

int kiln_config_load(kiln_config *c, FILE *diag, int quiet)
{
    memset(c, 0, sizeof *c);
    c->cache_max_bytes = -1;
    if (!(c->cache_read_only = calloc(1, sizeof *c->cache_read_only)))
        return -1;
    if (!diag)
        diag = stderr;
    char buf[4096];
    const char *user = kiln_config_user_path(buf, sizeof buf);
    if (user && load_one(c, user, 0, diag, quiet))
        return -1;
    const char *site = site_path_checked(diag, quiet);
    return site ? load_one(c, site, 1, diag, quiet) : 0;
}

void kiln_config_free(kiln_config *c)
{
    free(c->cache_dir);
    for (char **p = c->cache_read_only; p && *p; p++)
        free(*p);
    free(c->cache_read_only);
    memset(c, 0, sizeof *c);
}
