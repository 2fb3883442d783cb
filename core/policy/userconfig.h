/*
 * userconfig.h — the user's and the site's kiln configuration: the settings
 * that name directories kiln loads code from, which a policy may not
 * (design invariant 8; docs/cache.md, "Who is trusted for what").
 *
 * Two YAML files, both optional, same schema (docs/cache.md):
 *
 *   kiln_config: 1
 *   cache:
 *     dir: /home/me/.cache/kiln       # the user cache (absolute)
 *     read_only: [/shared/kiln-cache] # site caches, searched after it
 *     max_size: 4G                    # the user cache's cap
 *
 * - the user's: $XDG_CONFIG_HOME/kiln/config.yaml, else
 *   $HOME/.config/kiln/config.yaml (only absolute XDG_CONFIG_HOME and
 *   HOME are used, as the XDG base directory specification says);
 * - the site's: $KILN_SITE_CONFIG when set, else /etc/kiln/config.yaml.
 *
 * The user's settings override the site's; read_only lists are joined
 * (the user's first).  Each file must be a regular file owned by the user
 * or root and not writable by group or others, in a directory of the same
 * kind; a file that fails these checks or does not parse is ignored with
 * one diagnostic line naming it.  A missing file is silently nothing.
 * The text has the caps of a policy (KILN_POLICY_MAX_SIZE, flow nesting;
 * core/front/yaml_caps.c).
 */
#ifndef KILN_CORE_USERCONFIG_H
#define KILN_CORE_USERCONFIG_H

#include <stdint.h>
#include <stdio.h>

#define KILN_CONFIG_SCHEMA 1

typedef struct kiln_config {
    char *cache_dir;          /* absolute, or NULL: not set */
    char **cache_read_only;   /* NULL-terminated, absolute; never NULL */
    int64_t cache_max_bytes;  /* -1: not set; 0: no cap */
} kiln_config;

/* Read both files into *c (zeroed first).  Diagnostics go to `diag`
 * (stderr when NULL) unless `quiet`.  Returns 0, or -1 when out of
 * memory (*c then holds what was read so far and must still be freed).
 * Thread-safe: reads the environment and the files only. */
int kiln_config_load(kiln_config *c, FILE *diag, int quiet);

/* Free what kiln_config_load allocated; *c is zeroed. */
void kiln_config_free(kiln_config *c);

/* The user's configuration file's path into buf (NUL-terminated), or
 * NULL when neither XDG_CONFIG_HOME nor HOME is absolute. */
const char *kiln_config_user_path(char *buf, size_t n);

/* The site's configuration file's path. */
const char *kiln_config_site_path(void);

#endif
