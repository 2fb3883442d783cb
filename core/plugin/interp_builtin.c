/*
 * interp_builtin.c — the interpreter backend compiled into libkiln as
 * well, so that one backend is always there even when no plugin can be
 * found (design invariant 5).  The plugin build (backends/interp) and
 * this one are the same source; only the entry symbol's name differs.
 */
#define KILN_INTERP_BUILTIN 1
#include "../../backends/interp/interp.c"
