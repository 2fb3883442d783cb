/*
 * policy_caps.h — limits checked on a policy's text before libyaml sees
 * it (docs/policy.md, "Limits").  Internal to libkiln.
 */
#ifndef KILN_POLICY_CAPS_H
#define KILN_POLICY_CAPS_H

#include <kiln/kiln.h>

#include <stddef.h>

/* Check `text` (`len` bytes, named `name` in messages) against
 * KILN_POLICY_MAX_SIZE, KILN_POLICY_MAX_DEPTH and
 * KILN_POLICY_MAX_COLLECTIONS (<kiln/policy.h>).  Returns 0, or
 * KILN_ERR_POLICY with "NAME:LINE:COLUMN: ..." (the position where a cap
 * was exceeded) in err.  Linear in len; thread-safe. */
int policy_check_caps(const char *text, size_t len, const char *name,
                      kiln_err *err);

#endif
