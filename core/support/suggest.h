/*
 * suggest.h — "did you mean": the closest of a set of names to a name
 * that matched none of them (an unknown op, input, backend, data
 * variable, pass).  Internal to kiln, compiled into libkiln and usable by
 * the kiln tool (the symbols carry the kiln_ prefix and are exported).
 */
#ifndef KILN_SUGGEST_H
#define KILN_SUGGEST_H

#include <stddef.h>

/* The optimal-string-alignment distance between a (la bytes) and b (lb
 * bytes): insertions, deletions, substitutions and transpositions of two
 * adjacent characters each cost 1, a substitution that changes only a
 * letter's case 1/2 (the total is rounded up).  Names longer than 64 bytes
 * give a large distance.  Thread-safe (no state). */
int kiln_suggest_distance(const char *a, size_t la, const char *b, size_t lb);

/* The candidate closest to `name` (n_cand names, NULL entries skipped),
 * or NULL when none is close enough to be a likely misspelling: the
 * distance must be at most 1 for names of up to 4 characters, 2 up to 8,
 * else 3, and smaller than the name's length.  The first of equally close
 * candidates wins.  (Limits count a case-only difference as half an edit:
 * 'Y' suggests 'y'.)  The result points into `cand`.  Thread-safe. */
const char *kiln_suggest(const char *name, const char *const *cand,
                         int n_cand);

/* Incremental form, for candidates that are not in an array: start with
 * kiln_suggest_init, offer each candidate, read best (NULL: none close
 * enough).  The state keeps pointers to the offered names. */
typedef struct kiln_suggestion {
    const char *name;
    size_t len;
    const char *best;
    int best_dist;
} kiln_suggestion;

void kiln_suggest_init(kiln_suggestion *s, const char *name, size_t len);
void kiln_suggest_offer(kiln_suggestion *s, const char *cand);

/* "; did you mean 'X'?" for s's best candidate into buf, or "" when there
 * is none.  Returns buf. */
const char *kiln_suggest_text(const kiln_suggestion *s, char *buf,
                              size_t size);

/* 1 when `name` (n bytes) is close to `want` (a typo of it), by the one
 * rule of kiln_suggest (suggest.h: an edit distance of at most 1 for
 * names up to 4 bytes, 2 up to 8, else 3; names over 64 bytes are never
 * close).  For "did you mean" hints that show a name only when it is
 * nearly what the user wrote.  Thread-safe. */
int name_is_close(const char *want, const char *name, size_t n);

#endif
