/*
 * loader.h — finding and loading backend plugins (prefix kiln_loader_).
 */
#ifndef KILN_CORE_LOADER_H
#define KILN_CORE_LOADER_H

#include <stdio.h>
#include <kiln/backend.h>

/* The backend named `name` ("interp", "tcc", ...), loaded once per
 * process and kept until exit.  A plugin is the file NAME.so in, in order:
 * the ':'-separated directories of `extra_path` (may be NULL), of
 * $KILN_PLUGIN_PATH, the install directory ($(pkglibdir)/backends), and
 * the build tree's backends/NAME/.libs (so that `make check` and the
 * uninstalled CLI work).  A file that cannot be opened, lacks the entry
 * symbol, speaks another ABI major or returns a bad descriptor is skipped
 * with a one-line diagnostic on `diag` (unless quiet) and the search goes
 * on.  "interp" is always found: when no plugin file serves it, the copy
 * built into libkiln is used.
 * Returns NULL when nothing serves `name` (message in err, code
 * KILN_ERR_BACKEND).  Thread-safe. */
const kiln_backend *kiln_loader_get(const char *name, const char *extra_path,
                                    FILE *diag, int quiet, kiln_err *err);

/* The built-in interpreter's descriptor (never NULL). */
const kiln_backend *kiln_loader_builtin_interp(void);

/* Validate a descriptor returned by a plugin's entry point: struct size,
 * ABI major, name and the required entry points.  Returns 0 or -1 with a
 * reason in buf. */
int kiln_loader_check(const kiln_backend *b, char *buf, size_t size);

/* 64-bit id of the build of backend `be`: XXH3-64 of its name, its
 * build_id string and the bytes of the plugin file it was loaded from (for
 * code built into libkiln, of the strings only).  The disk cache files
 * artifacts under it.  Thread-safe. */
uint64_t kiln_loader_build_hash(const kiln_backend *be);

#endif
