/*
 * open_backend.h — a backend plugin of the build tree, opened directly
 * (dlopen of DIR/backends/NAME/.libs/NAME.so and its entry, at the host's
 * ABI), for tests that call a plugin's entry points themselves.  DIR NULL
 * is the current directory.  Returns the descriptor, or NULL when the
 * plugin is not built (or does not load).  Include once per test.
 */
#ifndef KILN_TESTS_OPEN_BACKEND_H
#define KILN_TESTS_OPEN_BACKEND_H

#include <kiln/backend.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const kiln_backend *open_backend(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/backends/%s/.libs/%s.so",
             dir ? dir : ".", name, name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return NULL;
    void *sym = dlsym(h, KILN_BACKEND_ENTRY);
    kiln_backend_entry_fn e;
    memcpy(&e, &sym, sizeof e);
    return sym ? e(KILN_ABI_MAJOR, KILN_ABI_MINOR, NULL, 0) : NULL;
}

#endif
