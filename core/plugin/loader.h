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
 * $KILN_PLUGIN_PATH, the install directory ($(pkglibdir)/backends), and —
 * only when libkiln itself was loaded from a build tree (see
 * kiln_loader_build_top) — that tree's backends/NAME/.libs and
 * plugins/NAME/.libs.  A file whose directory, the file itself (symlinks
 * followed) or a symlink's target directory is not owned by the user or
 * root, or is writable by group or others, is refused with a one-line
 * diagnostic naming it; a file that cannot be opened, lacks the entry
 * symbol, speaks another ABI major or returns a bad descriptor is skipped
 * likewise (diagnostics go to `diag`, none when quiet) and the search goes
 * on.  "interp" is always found: when no plugin file serves it, the copy
 * built into libkiln is used.
 * Returns NULL when nothing serves `name` (message in err, code
 * KILN_ERR_BACKEND, naming every directory searched).  Thread-safe. */
const kiln_backend *kiln_loader_get(const char *name, const char *extra_path,
                                    FILE *diag, int quiet, kiln_err *err);

/* The build tree this libkiln was loaded from: DIR when the library is
 * DIR/.libs/libkiln.so* and DIR/libkiln.la is libtool's uninstalled
 * library file (installed=no); its absolute path goes to buf.  Returns 0,
 * or -1 for an installed (or otherwise placed) library and when buf is too
 * small.  Nothing about the build tree is compiled in.  Thread-safe. */
int kiln_loader_build_top(char *buf, size_t size);

/* The names of the backends installed where kiln_loader_get looks
 * (`extra_path`, $KILN_PLUGIN_PATH, the install directory, the build
 * tree), comma-separated without spaces, "interp" first, into buf
 * (size bytes; names that do not fit are left out).  A plugin file
 * counts when its name is a valid backend name and its bytes mention the
 * entry symbol: files are read, never loaded, so a name listed may still
 * be refused by kiln_loader_get (ownership, ABI).  For "did you mean"
 * and "available: ..." in messages.  Returns buf.  Thread-safe. */
const char *kiln_loader_names(const char *extra_path, char *buf, size_t size);

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
