/*
 * excerpt.h — a short, escaped excerpt of untrusted bytes for a one-line
 * message (a data file's contents, a command-line value).
 *
 * Internal to kiln: compiled into libkiln (csv.c, npy.c) and into the
 * kiln tool (tools/kiln.c); the names carry no kiln_ prefix so that
 * libkiln does not export them.
 */
#ifndef KILN_EXCERPT_H
#define KILN_EXCERPT_H

#include <stddef.h>

/* At most this many bytes of the input are shown. */
#define EXCERPT_MAX 32
/* A buffer that holds any excerpt of at most `max` input bytes: every
 * byte may become 4 characters ("\xNN"), then "..." and the NUL. */
#define EXCERPT_SIZE(max) (4 * (size_t)(max) + 4)

/* Write into `buf` (`size` bytes, at least 4) the first bytes of `s`
 * (`n` bytes, may hold NULs), at most `max` of them and as many as fit
 * `size`; "..." follows when something was left out.  Printable ASCII is
 * copied except '\\' and '\'' (written "\\\\" and "\\'"); "\n", "\r" and
 * "\t" are written so; every other byte is "\xNN".  The result is one
 * line of printable ASCII that never contains an unescaped quote.
 * Returns `buf`.  Thread-safe (no state). */
const char *excerpt(char *buf, size_t size, const void *s, size_t n,
                    size_t max);

#endif
