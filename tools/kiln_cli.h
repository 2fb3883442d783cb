/*
 * kiln_cli.h — commands of the kiln CLI that live in their own files.
 * Each takes the arguments after the command word and returns the exit
 * status (0 ok, 1 error, 2 usage).
 */
#ifndef KILN_TOOLS_CLI_H
#define KILN_TOOLS_CLI_H

/* kiln explain FILE.kg [--policy P] [--json] (tools/kiln_policy.c) */
int kiln_cli_explain(int argc, char **argv);

/* kiln policy check [FILE] (tools/kiln_policy.c) */
int kiln_cli_policy(int argc, char **argv);

/* kiln cache stats|list|verify|prune|clear (tools/kiln_cache.c) */
int kiln_cli_cache(int argc, char **argv);

/* The per-kernel table of kiln run --cache-report (tools/kiln_cache.c):
 * key prefix, backend, hit/miss, compile or load ms. */
#include <stdio.h>
#include <kiln/kiln.h>
void kiln_cli_cache_report(const kiln_function *f, FILE *out);

#endif
