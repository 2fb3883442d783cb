/*
 * yaml_caps.h — limits checked on a policy's text before libyaml sees
 * it (docs/policy.md, "Limits").  Internal to libkiln.
 */
#ifndef KILN_YAML_CAPS_H
#define KILN_YAML_CAPS_H

#include <kiln/kiln.h>

#include <stddef.h>

/* Check `text` (`len` bytes, named `name` in messages; `what`, e.g. "policy",
 * names the kind of file) against KILN_POLICY_MAX_SIZE, KILN_POLICY_MAX_DEPTH
 * and KILN_POLICY_MAX_COLLECTIONS (<kiln/policy.h>).  Returns 0, or
 * KILN_ERR_POLICY with "NAME:LINE:COLUMN: ..." (the position where a cap
 * was exceeded) in err.  Linear in len; thread-safe. */
int kiln_yaml_check_caps(const char *text, size_t len, const char *name,
                         const char *what, kiln_err *err);

#endif
