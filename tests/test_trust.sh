#!/bin/sh
# test_trust.sh — a model and the files next to it are data: they never
# name a directory kiln loads code from (design invariant 8; issue 13,
# docs/cache.md "Who is trusted for what").  The proof of concept: a model
# folder ships MODEL.policy.yaml pointing cache.read_only (or cache.dir)
# at a "cache" inside the folder; after `tar x` its entries belong to the
# victim and would pass every check.  Cache directories come only from
# the caller: options, environment, the user's or site's configuration.
# TAP output.
src=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
kiln="$build/tools/kiln"
tmp=${TMPDIR:-/tmp}/kiln_trust_sh.$$
mkdir -p "$tmp/model" "$tmp/user" "$tmp/xdg/kiln" || exit 1
trap 'rm -rf "$tmp"' EXIT
unset KILN_BACKEND KILN_POLICY KILN_CACHE KILN_CACHE_PATH
XDG_CONFIG_HOME="$tmp/xdg"; export XDG_CONFIG_HOME
KILN_SITE_CONFIG="$tmp/no-site-config.yaml"; export KILN_SITE_CONFIG
n=0
t() {  # t DESCRIPTION COMMAND...: ok when the command succeeds
    n=$((n + 1))
    desc=$1
    shift
    if "$@" >/dev/null 2>&1; then
        echo "ok $n - $desc"
    else
        echo "not ok $n - $desc"
    fi
}
if ! test -f "$build/backends/tcc/.libs/tcc.so"; then
    echo "1..0 # SKIP the tcc backend is not built (no cached artifacts)"
    exit 0
fi
ins="-i mu=0 -i log_tau=0 -i theta_t=0"
cp "$src/examples/eight_schools.kg" "$tmp/model/es.kg"
# the shipped "cache": real entries, owned by the user after extraction
KILN_CACHE_DIR="$tmp/model/.kcache" "$kiln" run "$tmp/model/es.kg" $ins \
    --backend tcc >/dev/null 2>&1
t "setup: the shipped cache has entries" test -n "$(ls "$tmp/model/.kcache")"

for key in read_only dir; do
    if [ $key = dir ]; then v=.kcache; else v='[.kcache]'; fi
    printf 'kiln_policy: 1\nbackends: [tcc, interp]\ndefault: tcc\ncache:\n  %s: %s\n' \
        $key "$v" >"$tmp/model/es.policy.yaml"
    (cd "$tmp/model" && KILN_CACHE_DIR="$tmp/user" "$kiln" run es.kg $ins \
        --cache-report >"$tmp/out" 2>"$tmp/err")
    rc=$?
    t "a model's policy naming cache.$key: kiln run fails" test $rc -ne 0
    t "... and says a policy may not name a directory, at its line" \
        grep -q "es.policy.yaml:5:3: cache.$key: a policy may not name a directory" "$tmp/err"
    t "... and loads nothing from the shipped cache" \
        sh -c "! grep -q ' hit ' '$tmp/err' '$tmp/out'"
done
rm -f "$tmp/model/es.policy.yaml"

# a relative $KILN_CACHE_PATH is refused, not resolved against the
# model's folder
(cd "$tmp/model" && KILN_CACHE_DIR="$tmp/user" KILN_CACHE_PATH=.kcache \
    "$kiln" run es.kg $ins --backend tcc --cache-report >"$tmp/out" 2>"$tmp/err")
t "a relative \$KILN_CACHE_PATH entry: the run goes on" test $? -eq 0
t "... says the entry is not absolute" \
    grep -q "KILN_CACHE_PATH entry '.kcache' is not an absolute path; skipped" "$tmp/err"
t "... and no kernel comes from it" sh -c "! grep -q ' hit ' '$tmp/err'"
rm -rf "$tmp/user"
(cd "$tmp/model" && KILN_CACHE_DIR=.kcache "$kiln" run es.kg $ins \
    --backend tcc >"$tmp/out" 2>"$tmp/err")
t "a relative \$KILN_CACHE_DIR is refused, naming it" \
    grep -q "KILN_CACHE_DIR '.kcache' is not an absolute path" "$tmp/err"

# the caller may name the same directory: absolute, from the environment
KILN_CACHE_DIR="$tmp/user" KILN_CACHE_PATH="$tmp/model/.kcache" \
    "$kiln" run "$tmp/model/es.kg" $ins --backend tcc --cache-report \
    >"$tmp/out" 2>"$tmp/err"
t "an absolute \$KILN_CACHE_PATH from the caller is a read-only cache" \
    grep -q ' hit ' "$tmp/err"

# ... or from the user's configuration file
printf 'kiln_config: 1\ncache:\n  read_only: ["%s"]\n' "$tmp/model/.kcache" \
    >"$tmp/xdg/kiln/config.yaml"
chmod 600 "$tmp/xdg/kiln/config.yaml"
rm -rf "$tmp/user"
KILN_CACHE_DIR="$tmp/user" "$kiln" run "$tmp/model/es.kg" $ins \
    --backend tcc --cache-report >"$tmp/out" 2>"$tmp/err"
t "cache.read_only in ~/.config/kiln/config.yaml is searched" \
    grep -q ' hit ' "$tmp/err"
KILN_CACHE_DIR="$tmp/user" "$kiln" cache verify >"$tmp/out" 2>"$tmp/err"
t "kiln cache verify checks the configuration's read-only cache too" \
    grep -q "0 bad entries in $tmp/model/.kcache" "$tmp/out"
chmod 666 "$tmp/xdg/kiln/config.yaml"
rm -rf "$tmp/user"
KILN_CACHE_DIR="$tmp/user" "$kiln" run "$tmp/model/es.kg" $ins \
    --backend tcc --cache-report >"$tmp/out" 2>"$tmp/err"
t "a world-writable configuration is refused, naming it" \
    grep -q "config: refusing $tmp/xdg/kiln/config.yaml: writable by group or others" "$tmp/err"
t "... and its caches are not searched" sh -c "! grep -q ' hit ' '$tmp/err'"
# the configuration names code directories: its own directory's ancestors
# are checked like a cache's (one someone else may write could swap it)
chmod 600 "$tmp/xdg/kiln/config.yaml"
chmod 777 "$tmp/xdg"
rm -rf "$tmp/user"
KILN_CACHE_DIR="$tmp/user" "$kiln" run "$tmp/model/es.kg" $ins \
    --backend tcc --cache-report >"$tmp/out" 2>"$tmp/err"
t "a configuration below a world-writable (not sticky) directory is refused, naming that ancestor" \
    grep -q "config: refusing $tmp/xdg/kiln/config.yaml: ancestor $tmp/xdg is writable by group or others (mode 0777, not sticky)" "$tmp/err"
t "... and its caches are not searched" sh -c "! grep -q ' hit ' '$tmp/err'"
chmod 755 "$tmp/xdg"
# the site configuration: the same schema, root or the user may own it
chmod 600 "$tmp/xdg/kiln/config.yaml"
mv "$tmp/xdg/kiln/config.yaml" "$tmp/site.yaml"
rm -rf "$tmp/user"
KILN_SITE_CONFIG="$tmp/site.yaml" KILN_CACHE_DIR="$tmp/user" \
    "$kiln" run "$tmp/model/es.kg" $ins --backend tcc --cache-report \
    >"$tmp/out" 2>"$tmp/err"
t "cache.read_only in the site configuration (\$KILN_SITE_CONFIG) is searched" \
    grep -q ' hit ' "$tmp/err"
printf 'kiln_config: 1\ncache:\n  read_only: [.kcache]\n' >"$tmp/site.yaml"
(cd "$tmp/model" && KILN_SITE_CONFIG="$tmp/site.yaml" \
    KILN_CACHE_DIR="$tmp/user" "$kiln" run es.kg $ins --backend tcc \
    >"$tmp/out" 2>"$tmp/err")
t "a relative read_only in a configuration is refused at its line" \
    grep -q "site.yaml:3:15: cache.read_only: '.kcache' is not an absolute path" "$tmp/err"

# a FIFO in place of MODEL.policy.yaml is refused, never waited on
rm -f "$tmp/model/es.policy.yaml"
if mkfifo "$tmp/model/es.policy.yaml" 2>/dev/null; then
    timeout 20 "$kiln" run "$tmp/model/es.kg" $ins >"$tmp/out" 2>"$tmp/err"
    rc=$?
    t "a FIFO as the model's policy: no hang, an error" sh -c "test $rc -ne 0 && test $rc -ne 124"
    t "... that says it is not a regular file" grep -q "es.policy.yaml: not a regular file" "$tmp/err"
    rm -f "$tmp/model/es.policy.yaml"
fi
# the configuration has the policy's caps (libyaml is quadratic in '[')
/usr/bin/env awk 'BEGIN { printf "kiln_config: 1\ncache: "; for (i = 0; i < 100000; i++) printf "["; print "" }' \
    >"$tmp/xdg/kiln/config.yaml"
chmod 600 "$tmp/xdg/kiln/config.yaml"
timeout 20 "$kiln" run "$tmp/model/es.kg" $ins >"$tmp/out" 2>"$tmp/err"
t "100 kB of '[' in the configuration: refused at the cap, the run goes on" \
    sh -c "test $? -eq 0 && grep -q \"config.yaml:2:40: '\\[' and '{' nested deeper than 32\" '$tmp/err'"
rm -f "$tmp/xdg/kiln/config.yaml"

# a relative $KILN_PLUGIN_PATH is skipped: a model folder's .so with a
# constructor must never be dlopened (found by an attack on this work)
printf '#include <stdio.h>\n__attribute__((constructor)) static void p(void) { fputs("PWNED\\n", stderr); }\n' \
    >"$tmp/model/evil.c"
if cc -shared -fPIC -o "$tmp/model/evil.so" "$tmp/model/evil.c" 2>/dev/null; then
    printf 'kiln_policy: 1\nbackends: [evil, interp]\ndefault: evil\n' \
        >"$tmp/model/es.policy.yaml"
    (cd "$tmp/model" && KILN_PLUGIN_PATH=. timeout 20 "$kiln" run es.kg $ins \
        >"$tmp/out" 2>"$tmp/err")
    t "a relative \$KILN_PLUGIN_PATH: the model folder's plugin never runs" \
        sh -c "! grep -q PWNED '$tmp/err'"
    t "... and the entry is named as skipped" \
        grep -q "plugin directory '.' is not an absolute path; skipped" "$tmp/err"
    rm -f "$tmp/model/es.policy.yaml"
fi
# a relative $KILN_SITE_CONFIG is ignored: it would be read from the
# model's folder
printf 'kiln_config: 1\ncache:\n  read_only: [/proc/self/cwd/.kcache]\n' \
    >"$tmp/model/site.yaml"
rm -rf "$tmp/user"
(cd "$tmp/model" && KILN_SITE_CONFIG=site.yaml KILN_CACHE_DIR="$tmp/user" \
    "$kiln" run es.kg $ins --backend tcc --cache-report >"$tmp/out" 2>"$tmp/err")
t "a relative \$KILN_SITE_CONFIG is ignored with one line" \
    grep -q "KILN_SITE_CONFIG 'site.yaml' is not an absolute path; ignoring it" "$tmp/err"
t "... and nothing is loaded from the caches it names" sh -c "! grep -q ' hit ' '$tmp/err'"
# a /proc file reports size 0 and reads back gigabytes: the data limit
# counts the bytes read
if test -r /proc/self/pagemap; then
    printf 'kiln 1\ngraph g\n  shared s: f64[4] = csv("/proc/self/pagemap", "x")\n  output y = add(s, 1.0)\nend\n' \
        >"$tmp/model/proc.kg"
    timeout 30 "$kiln" run "$tmp/model/proc.kg" --data-max-size 1M >"$tmp/out" 2>"$tmp/err"
    rc=$?
    t "csv() of /proc/self/pagemap stops at the data limit (no hang)" \
        sh -c "test $rc -ne 0 && test $rc -ne 124 && grep -q 'more than 1048576 bytes' '$tmp/err'"
fi
# inspection never creates a cache: a mistyped KILN_CACHE_DIR must not
# look like a valid empty cache
KILN_CACHE_DIR="$tmp/typo-cache" "$kiln" cache stats >"$tmp/out" 2>"$tmp/err"
t "kiln cache stats on a missing directory says so" grep -q "no user cache yet" "$tmp/out"
t "... and does not create it" test ! -e "$tmp/typo-cache"
KILN_CACHE_DIR="$tmp/typo-cache" "$kiln" cache clear >"$tmp/out" 2>"$tmp/err"
t "kiln cache clear does not create it either" test ! -e "$tmp/typo-cache"
echo "1..$n"
