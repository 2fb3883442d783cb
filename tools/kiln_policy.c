/*
 * kiln_policy.c — `kiln explain` and `kiln policy check` (docs/kiln.1,
 * docs/policy.md).  Part of the kiln CLI (tools/kiln.c dispatches here).
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <kiln/policy.h>
#include <kiln/cache.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"   /* kiln policy check: is a backend installed here */
#include "rewrite/rewrite.h" /* kiln explain --passes */
#include "kiln_cli.h"

static const char *kind_name(int kind)
{
    static const char *const names[] = {"?", "elemwise", "reduce", "join",
                                        "gather", "scatter", "dot",
                                        "loop", "scan", "recur",
                                        "linalg", "ode", "topk"};
    return kind > 0 && kind < 13 ? names[kind] : "?";
}

static const char *cache_word(int r)
{
    switch (r) {
    case KILN_CACHE_HIT: return "hit";
    case KILN_CACHE_MISS: return "miss";
    case KILN_CACHE_BAD: return "bad";
    default: return "-";
    }
}

/* s for one column of the text table: control characters (a rule name
 * from YAML may hold a newline) become '?'; NULL becomes "-". */
static const char *cell(const char *s, char *buf, size_t n)
{
    if (!s)
        return "-";
    size_t i = 0;
    for (; s[i] && i + 1 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    buf[i] = 0;
    return buf;
}

static const char *explain_usage =
    "usage: kiln explain FILE.kg [--policy POLICY.yaml] [--json] [--passes]\n";

/* kiln explain FILE.kg [--policy P] [--json]: compile with the policy that
 * would be selected and print, per kernel, what it chose and why. */
int kiln_cli_explain(int argc, char **argv)
{
    const char *file = NULL, *policy_file = NULL;
    int json = 0, passes = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--policy") == 0 && i + 1 < argc)
            policy_file = argv[++i];
        else if (strcmp(argv[i], "--passes") == 0)
            passes = 1;   /* the graph after each rewrite pass */
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (argv[i][0] != '-' && !file)
            file = argv[i];
        else {
            fprintf(stderr, "kiln: explain: %s '%s'\n%s",
                    argv[i][0] == '-' ? "unknown or incomplete option"
                                      : "more than one model file",
                    argv[i], explain_usage);
            return 2;
        }
    }
    if (!file) {
        fputs(explain_usage, stderr);
        return 2;
    }
    if (passes && json) {
        fputs("kiln: explain --passes prints graph text; it has no --json "
              "form\n", stderr);
        return 2;
    }
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_file(file, &err);
    if (!g) {
        fprintf(stderr, "kiln: %s\n", err.message);
        return 1;
    }
    kiln_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.policy_file = policy_file;
    opt.model_path = file;
    opt.quiet = 1;      /* the table gives every fallback's reason */
    const char *how = NULL;
    kiln_policy *pol = NULL;
    const char *explicit = getenv("KILN_BACKEND");
    if (!explicit || !*explicit) {
        pol = kiln_policy_select(&opt, &how, &err);
        if (!pol) {
            fprintf(stderr, "kiln: %s\n", err.message);
            kiln_graph_free(g);
            return 1;
        }
        opt.policy = pol;
    }
    kiln_rw_config rwc;
    if (passes && (kiln_rw_config_for(&opt, &rwc, &err) ||
                   kiln_rw_explain(g, &rwc, stdout, &err))) {
        fprintf(stderr, "kiln: %s\n", err.message);
        kiln_graph_free(g);
        kiln_policy_free(pol);
        return 1;
    }
    kiln_function *f = kiln_compile(g, &opt, &err);
    kiln_graph_free(g);
    if (!f) {
        fprintf(stderr, "kiln: %s\n", err.message);
        kiln_policy_free(pol);
        return 1;
    }
    int n = kiln_function_n_kernels(f);
    if (json) {
        printf("{\"policy\": ");
        kiln_cli_json_str(stdout, pol ? kiln_policy_source(pol) : NULL);
        printf(", \"selected_by\": ");
        kiln_cli_json_str(stdout, pol ? how : "KILN_BACKEND");
        printf(", \"chain\": [");
        for (int c = 0; pol && c < kiln_policy_n_backends(pol); c++) {
            printf("%s", c ? ", " : "");
            kiln_cli_json_str(stdout, kiln_policy_backend(pol, c));
        }
        printf("], \"kernels\": [");
    } else {
        if (pol) {
            printf("policy: %s (%s)\nchain:", kiln_policy_source(pol), how);
            for (int c = 0; c < kiln_policy_n_backends(pol); c++)
                printf("%s %s", c ? "," : "", kiln_policy_backend(pol, c));
            printf("\n");
        } else {
            printf("policy: none ($KILN_BACKEND=%s overrides it)\n",
                   explicit);
        }
        printf("%-5s %-16s %-9s %5s %5s %10s %12s %-18s %-7s %-7s %-7s "
               "%-7s %-10s %s\n", "#", "kernel", "kind", "width", "ops",
               "elements", "cost", "rule", "chosen", "backend", "start",
               "tier1", "key", "cache");
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        kiln_kernel_info k;
        memset(&k, 0, sizeof k);
        k.struct_size = sizeof k;
        if (kiln_function_kernel_info(f, i, &k, &err)) {
            fprintf(stderr, "kiln: %s\n", err.message);
            rc = 1;
            break;
        }
        kiln_kernel_report rep;
        memset(&rep, 0, sizeof rep);
        rep.struct_size = sizeof rep;
        char hex[KILN_KEY_HEX + 1] = "";
        int have_rep = kiln_function_kernel_report(f, i, &rep) == 0;
        if (have_rep)
            kiln_key_hex(&rep.key, hex);
        /* tiers: the backend it starts on, the one it may move to */
        kiln_cli_tier tier;
        if (kiln_cli_kernel_tier(f, i, &tier)) {
            fprintf(stderr, "kiln: no tier information for kernel %d\n", i);
            rc = 1;
            break;
        }
        char elems[32];
        if (k.facts.elements >= 0)
            snprintf(elems, sizeof elems, "%lld",
                     (long long)k.facts.elements);
        else
            snprintf(elems, sizeof elems, "symbolic");
        if (json) {
            printf("%s{\"index\": %d, \"label\": ", i ? ", " : "", i);
            kiln_cli_json_str(stdout, k.facts.label);
            printf(", \"op\": ");
            kiln_cli_json_str(stdout, k.facts.op);
            printf(", \"kind\": \"%s\", \"width\": %d, \"scalar_ops\": %d, "
                   "\"elements\": %lld, \"cost\": %.6g, \"rule\": ",
                   kind_name(k.facts.kind), k.facts.width,
                   k.facts.scalar_ops, (long long)k.facts.elements,
                   k.facts.cost);
            kiln_cli_json_str(stdout, k.rule);
            printf(", \"chosen\": ");
            kiln_cli_json_str(stdout, k.chosen);
            printf(", \"backend\": ");
            kiln_cli_json_str(stdout, k.backend);
            printf(", \"fallback\": ");
            kiln_cli_json_str(stdout, k.fallback);
            printf(", \"compile_ms_estimate\": %.6g, \"key\": ",
                   k.compile_ms_estimate);
            kiln_cli_json_str(stdout, have_rep ? hex : NULL);
            printf(", \"cache\": ");
            kiln_cli_json_str(stdout,
                              have_rep ? cache_word(rep.cache) : NULL);
            printf(", \"cache_note\": ");
            kiln_cli_json_str(stdout,
                              have_rep && !rep.written ? rep.note : NULL);
            printf(", \"fused_nodes\": %d, \"fused\": ", k.fused_nodes);
            kiln_cli_json_str(stdout, k.fused);
            printf(", \"split\": ");
            kiln_cli_json_str(stdout, k.split);
            printf(", \"start\": ");
            kiln_cli_json_str(stdout, tier.start);
            printf(", \"tier\": %d, \"tier1\": ", tier.info.tier);
            kiln_cli_json_str(stdout, tier.info.tier1);
            printf(", \"tier_state\": \"%s\"}",
                   kiln_cli_tier_state_name(tier.info.state));
        } else {
            char rb[64];
            printf("%-5d %-16.16s %-9s %5d %5d %10s %12.4g %-18.18s %-7s "
                   "%-7s %-7s %-7s %-10.10s %s", i, k.facts.label,
                   kind_name(k.facts.kind), k.facts.width,
                   k.facts.scalar_ops, elems, k.facts.cost,
                   cell(k.rule, rb, sizeof rb), k.chosen,
                   k.backend ? k.backend : "?", tier.start ? tier.start : "?",
                   tier.info.tier1 ? tier.info.tier1 : "-",
                   have_rep ? hex : "-",
                   have_rep ? cache_word(rep.cache) : "-");
            if (have_rep && rep.written)
                printf(" (stored)");
            else if (have_rep && rep.note)
                printf(" (not %s: %s)",
                       rep.cache == KILN_CACHE_NONE ? "cached" : "stored",
                       rep.note);
            if (k.fallback)
                printf("  (fallback: %s)", k.fallback);
            printf("\n");
            /* a fused kernel: the nodes it computes (the first 64; --json
             * has them all), and why it ends */
            if (k.fused) {
                const char *e = k.fused;
                for (int c = 0; c < 64 && e; c++) {
                    e = strstr(e, ", ");
                    if (e)
                        e += 2;
                }
                int shown = e ? (int)(e - 2 - k.fused) : (int)strlen(k.fused);
                printf("      fused %d nodes: %.*s", k.fused_nodes, shown,
                       k.fused);
                if (e)
                    printf(", ... (%d more)", k.fused_nodes - 64);
                if (k.split)
                    printf("; split at the %s", k.split);
                printf("\n");
            }
        }
    }
    /* hoisting: values computed from data only, stored when the data are
     * bound (or kept per call: over hoist.max_size) */
    int nh = kiln_function_n_hoisted(f);
    if (json)
        printf("], \"hoisted\": [");
    else if (nh)
        printf("hoisted (computed when the data are bound):\n");
    for (int i = 0; i < nh; i++) {
        int64_t bytes = -1;
        int per_call = 0;
        const char *lbl = kiln_function_hoisted_info(f, i, &bytes, &per_call);
        if (json) {
            printf("%s{\"value\": ", i ? ", " : "");
            kiln_cli_json_str(stdout, lbl);
            printf(", \"bytes\": %lld, \"stored\": %s}", (long long)bytes,
                   per_call ? "false" : "true");
        } else
            printf("      %s  %lld bytes%s\n", lbl, (long long)bytes,
                   !per_call ? ""
                   : bytes < 0 ? "  (size not known when compiled: computed "
                                 "at every call)"
                               : "  (over hoist.max_size: computed at every "
                                 "call)");
    }
    if (json)
        printf("]}\n");
    /* explain does not wait for tier-1 compiles the compile queued (the
     * rules' llvm kernels under a tiered policy): drop them */
    kiln_function_tier_forbid(f);
    kiln_policy_free(pol);
    kiln_cli_function_free(f, rc);
    return rc;
}

static const char *policy_usage =
    "usage: kiln policy check [POLICY.yaml]   (default: the installed "
    "default policy)\n";

/* kiln policy check [FILE]: parse and validate; say which backends of the
 * chain are not installed here (a warning, not an error). */
int kiln_cli_policy(int argc, char **argv)
{
    if (argc < 1 || strcmp(argv[0], "check") != 0 || argc > 2) {
        fputs(policy_usage, stderr);
        return 2;
    }
    const char *file = argc == 2 ? argv[1] : kiln_policy_default_path();
    if (!file) {
        fprintf(stderr, "kiln: no default policy installed (looked for "
                "policy/default.yaml in the data directory)\n");
        return 1;
    }
    kiln_err err = {0, ""};
    kiln_policy *p = kiln_policy_load_file(file, &err);
    if (!p) {
        fprintf(stderr, "kiln: %s\n", err.message);
        return 1;
    }
    printf("%s: ok (schema %d; backends:", file, KILN_POLICY_SCHEMA);
    for (int c = 0; c < kiln_policy_n_backends(p); c++)
        printf("%s %s", c ? "," : "", kiln_policy_backend(p, c));
    printf("; %d rule%s)\n", kiln_policy_n_rules(p),
           kiln_policy_n_rules(p) == 1 ? "" : "s");
    for (int c = 0; c < kiln_policy_n_backends(p); c++) {
        const char *b = kiln_policy_backend(p, c);
        if (!kiln_loader_get(b, NULL, NULL, 1, NULL))
            printf("note: backend '%s' is not installed here; its kernels "
                   "will fall back down the chain\n", b);
    }
    /* the tiers' backends need not be in the chain: say so for them too */
    kiln_policy_knobs kn;
    memset(&kn, 0, sizeof kn);
    kn.struct_size = sizeof kn;
    if (kiln_policy_get_knobs(p, &kn) == 0 && kn.tiers_enabled) {
        for (int i = 0; kn.tier0 && kn.tier0[i]; i++)
            if (!kiln_loader_get(kn.tier0[i], NULL, NULL, 1, NULL))
                printf("note: tier-0 backend '%s' is not installed here\n",
                       kn.tier0[i]);
        if (kn.tier1 && !kiln_loader_get(kn.tier1, NULL, NULL, 1, NULL))
            printf("note: tier-1 backend '%s' is not installed here; "
                   "kernels will not tier up\n", kn.tier1);
    }
    kiln_policy_free(p);
    return 0;
}
