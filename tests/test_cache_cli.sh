#!/bin/sh
# test_cache_cli.sh — the disk cache from the command line (TAP):
# kiln run --cache-report / --no-cache, KILN_CACHE modes, and kiln cache
# stats|list|verify|prune|clear on a cache of tcc (else llvm) kernels.
top=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
kiln="$build/tools/kiln"
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
n=0
failed=0
ok() {  # ok COND-EXIT-STATUS DESCRIPTION
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
export KILN_CACHE_DIR="$tmp/cache"
export KILN_CACHE_MIN_COMPILE_MS=0
unset KILN_CACHE KILN_CACHE_PATH KILN_CACHE_MAX_SIZE KILN_BACKEND
model="$top/examples/eight_schools.kg"
run() { "$kiln" run "$model" --random-inputs 7 "$@"; }

backend=""
for b in tcc llvm; do
  if KILN_CACHE=off run --backend $b --cache-report 2>&1 >/dev/null | grep -q " $b "; then
    backend=$b; break
  fi
done
if [ -z "$backend" ]; then
  echo "ok 1 - # SKIP no tcc or llvm backend built"
  echo "1..1"
  exit 0
fi
echo "# backend $backend, cache $KILN_CACHE_DIR"

"$kiln" --help >"$tmp/out" 2>&1
grep -q -- '--cache-report' "$tmp/out" && grep -q 'kiln cache stats' "$tmp/out"
ok $? "usage mentions --cache-report and kiln cache"

KILN_CACHE=off run --backend interp --json >"$tmp/ref" 2>/dev/null
sed 's/"timing".*//' "$tmp/ref" >"$tmp/ref.out"

run --backend $backend --json --cache-report >"$tmp/cold" 2>"$tmp/cold.err"
ok $? "cold run"
grep -q ' miss ' "$tmp/cold.err" && ! grep -q ' hit ' "$tmp/cold.err"
ok $? "cold: the report shows misses, no hits"
grep -q '(stored)' "$tmp/cold.err"; ok $? "cold: entries stored"
misses=$(grep -c ' miss ' "$tmp/cold.err")
dups=$(grep -c ' dup ' "$tmp/cold.err")
[ "$dups" -gt 0 ]; ok $? "repeated kernels share code ($dups dup lines)"

run --backend $backend --json --cache-report >"$tmp/warm" 2>"$tmp/warm.err"
hits=$(grep -c ' hit ' "$tmp/warm.err")
[ "$hits" = "$misses" ] && ! grep -q ' miss ' "$tmp/warm.err"
ok $? "warm: $hits hits = $misses cold misses, no misses"
sed 's/"timing".*//' "$tmp/warm" >"$tmp/warm.out"
cmp -s "$tmp/warm.out" "$tmp/ref.out"; ok $? "warm results equal the interpreter's"
grep -Eq '^ +[0-9]+  [0-9a-f]{12}  ' "$tmp/warm.err"; ok $? "report lines carry a 12-digit key prefix"

"$kiln" cache stats >"$tmp/stats"
ok $? "kiln cache stats"
grep -q "^entries        $misses\$" "$tmp/stats"; ok $? "stats: $misses entries"
grep -q "^hits           $hits " "$tmp/stats"; ok $? "stats: $hits hits"
grep -q "^directory      $KILN_CACHE_DIR\$" "$tmp/stats"; ok $? "stats: the directory"

"$kiln" cache list >"$tmp/list"
[ "$(wc -l <"$tmp/list")" = "$misses" ] && grep -q " $backend " "$tmp/list"
ok $? "list: one line per entry"
"$kiln" cache verify >"$tmp/verify"; ok $? "verify: all good"
grep -q '^0 bad entries' "$tmp/verify"; ok $? "verify says 0 bad"

# damage one entry: verify reports it (exit 1), --remove removes it
entry=$(find "$KILN_CACHE_DIR" -type f -name '01*' | head -1)
printf 'X' | dd of="$entry" bs=1 seek=200 conv=notrunc 2>/dev/null
"$kiln" cache verify >"$tmp/verify" 2>&1
[ $? = 1 ] && grep -q 'BAD: checksum mismatch' "$tmp/verify"
ok $? "verify finds a corrupted entry and exits 1"
run --backend $backend --cache-report >/dev/null 2>"$tmp/bad.err"
grep -q "kiln: cache: bad entry $entry: checksum mismatch" "$tmp/bad.err" && grep -q ' bad ' "$tmp/bad.err"
ok $? "a run reports the bad entry in one line and recompiles it"
"$kiln" cache verify >/dev/null; ok $? "... after which every entry verifies"

# modes
KILN_CACHE=off run --backend $backend --cache-report 2>"$tmp/off.err" >/dev/null
! grep -Eq ' (hit|miss) ' "$tmp/off.err"; ok $? "KILN_CACHE=off: cache not consulted"
run --backend $backend --no-cache --cache-report 2>"$tmp/nc.err" >/dev/null
! grep -Eq ' (hit|miss) ' "$tmp/nc.err"; ok $? "--no-cache: cache not consulted"
KILN_CACHE=recache run --backend $backend --cache-report 2>"$tmp/re.err" >/dev/null
grep -q ' miss ' "$tmp/re.err" && ! grep -q ' hit ' "$tmp/re.err"; ok $? "KILN_CACHE=recache compiles again"
KILN_CACHE=bogus run --backend $backend 2>"$tmp/bogus.err" >/dev/null
[ $? = 0 ] && grep -q "KILN_CACHE='bogus'" "$tmp/bogus.err"; ok $? "a bad KILN_CACHE is reported, the run goes on"

# read-only site cache: a second user cache that is empty, the first as site
mv "$KILN_CACHE_DIR" "$tmp/site"
KILN_CACHE_PATH="$tmp/site" run --backend $backend --cache-report 2>"$tmp/site.err" >/dev/null
[ "$(grep -c ' hit ' "$tmp/site.err")" = "$misses" ]; ok $? "KILN_CACHE_PATH: a site cache serves hits"
[ ! -d "$KILN_CACHE_DIR" ] || [ -z "$(find "$KILN_CACHE_DIR" -type f -name '01*')" ]
ok $? "... and nothing was written to the user cache"
mv "$tmp/site" "$KILN_CACHE_DIR.site"
rm -rf "$KILN_CACHE_DIR"
mv "$KILN_CACHE_DIR.site" "$KILN_CACHE_DIR"

# unsafe cache root
chmod 0777 "$KILN_CACHE_DIR"
run --backend $backend 2>"$tmp/perm.err" >"$tmp/perm.out"
[ $? = 0 ] && grep -q "refusing $KILN_CACHE_DIR: writable by group or others" "$tmp/perm.err"
ok $? "a world-writable cache directory is refused; the run goes on"
"$kiln" cache stats >/dev/null 2>"$tmp/perm2.err"
[ $? = 1 ] && grep -q "refusing" "$tmp/perm2.err"; ok $? "kiln cache stats refuses it too"
chmod 0700 "$KILN_CACHE_DIR"

"$kiln" cache prune --max-size 1 >"$tmp/prune"
grep -q '^removed [1-9]' "$tmp/prune"; ok $? "prune --max-size 1 removes entries"
"$kiln" cache prune --max-size lots >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q -- '--max-size takes a size' "$tmp/err"; ok $? "prune rejects a bad size"
run --backend $backend >/dev/null 2>&1
"$kiln" cache clear; ok $? "clear"
grep -q '^entries        0$' "$tmp/x" 2>/dev/null || "$kiln" cache stats | grep -q '^entries        0$'
ok $? "clear leaves no entries"
"$kiln" cache frobnicate >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "unknown cache command 'frobnicate'" "$tmp/err"; ok $? "unknown subcommand: usage error"

# llvm: a process whose kernels all come from the cache never loads libLLVM
if KILN_CACHE=off run --backend llvm --cache-report 2>&1 >/dev/null | grep -q " llvm "; then
  export KILN_CACHE_DIR="$tmp/llvm-cache"
  run --backend llvm --json >/dev/null 2>&1
  LD_DEBUG=files run --backend llvm --json --cache-report >"$tmp/l.out" 2>"$tmp/l.err"
  ! grep -Eq ' (miss|bad) ' "$tmp/l.err" && grep -q ' hit ' "$tmp/l.err"
  ok $? "llvm warm: every kernel from the cache"
  ! grep -q 'libLLVM' "$tmp/l.err"; ok $? "llvm warm: libLLVM is not loaded"
  sed 's/"timing".*//' "$tmp/l.out" >"$tmp/l.cmp"
  cmp -s "$tmp/l.cmp" "$tmp/ref.out"; ok $? "llvm warm: results equal the interpreter's"
  dir=$(ls "$KILN_CACHE_DIR" | grep '^llvm-')
  case $dir in *native*) false ;; llvm-*-x86_64-f*m*-*|llvm-*-*) true ;; *) false ;; esac
  ok $? "llvm entries live under the CPU's target id ($dir)"
  run --backend llvm --json --generic-target --cache-report >"$tmp/g.out" 2>"$tmp/g.err"
  grep -q ' miss ' "$tmp/g.err" && ls "$KILN_CACHE_DIR" | grep -q -- '-generic$'
  ok $? "--generic-target: compiled again, filed under a generic target"
  sed 's/"timing".*//' "$tmp/g.out" >"$tmp/g.cmp"
  cmp -s "$tmp/g.cmp" "$tmp/ref.out"; ok $? "--generic-target: results equal the interpreter's"
fi

echo "1..$n"
[ $failed = 0 ]
