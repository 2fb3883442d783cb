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
# hoisting's prep program (docs/architecture.md, "Data-only values") stores
# kernels of its own that --cache-report (the per-call program's kernels)
# does not list: the counts below are the per-call program's
export KILN_PASSES=-hoist
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
# unfused, eight schools repeats kernels (exp of two scalars, ...); fused,
# it has none to repeat
KILN_CACHE_DIR="$tmp/dup-cache" run --backend $backend --passes -fuse \
  --cache-report >/dev/null 2>"$tmp/dup.err"
dups=$(grep -c ' dup ' "$tmp/dup.err")
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
[ $? = 1 ] && grep -q "KILN_CACHE='bogus' is not one of on, off" "$tmp/bogus.err"
ok $? "a KILN_CACHE that means nothing is refused with a clear error"
# values in any case, and the usual booleans
okc=0
for v in ON On yes TRUE 1; do
  KILN_CACHE=$v run --backend $backend --cache-report 2>"$tmp/on.err" >/dev/null || okc=1
  grep -q ' hit ' "$tmp/on.err" || okc=1
done
for v in OFF no False 0; do
  KILN_CACHE=$v run --backend $backend --cache-report 2>"$tmp/off2.err" >/dev/null || okc=1
  ! grep -Eq ' (hit|miss) ' "$tmp/off2.err" || okc=1
done
ok $okc "KILN_CACHE takes on/off/yes/no/true/false/1/0 in any case"
KILN_CACHE_MIN_COMPILE_MS=abc run --backend $backend 2>"$tmp/ms.err" >/dev/null
[ $? = 1 ] && grep -q "KILN_CACHE_MIN_COMPILE_MS='abc' is not a number" "$tmp/ms.err"
ok $? "KILN_CACHE_MIN_COMPILE_MS=abc is refused with a clear error"
KILN_CACHE_MIN_COMPILE_MS=1e3 run --backend $backend 2>"$tmp/ms.err" >/dev/null
[ $? = 1 ]; ok $? "... and so is 1e3 (strict: digits and one point)"

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

# a cache root whose parent others may write (not sticky): they could
# rename the root away and put anything in its place, so it is refused,
# the run goes on without it, and verify says so rather than "0 bad"
mkdir -p "$tmp/shared"
cp -a "$KILN_CACHE_DIR" "$tmp/shared/kc"
chmod 0777 "$tmp/shared"
KILN_CACHE_DIR="$tmp/shared/kc" run --backend $backend --cache-report >"$tmp/anc.out" 2>"$tmp/anc.err"
[ $? = 0 ] && [ "$(grep -c kiln: "$tmp/anc.err")" = 1 ] &&
  grep -q "kiln: cache: refusing $tmp/shared/kc: ancestor $tmp/shared is writable by group or others (mode 0777, not sticky)" "$tmp/anc.err" &&
  ! grep -q ' hit ' "$tmp/anc.err"
ok $? "a cache root in a world-writable (not sticky) directory is refused in one line naming it; no hits"
KILN_CACHE_DIR="$tmp/shared/kc" "$kiln" cache verify >"$tmp/anc.v" 2>&1
[ $? = 1 ] && grep -q "refusing $tmp/shared/kc: ancestor $tmp/shared" "$tmp/anc.v" && ! grep -q "0 bad" "$tmp/anc.v"
ok $? "kiln cache verify reports that root as refused, not as 0 bad entries"
KILN_CACHE_DIR="$tmp/none" KILN_CACHE_PATH="$tmp/shared/kc" run --backend $backend --cache-report >/dev/null 2>"$tmp/anc2.err"
[ $? = 0 ] && grep -q "refusing $tmp/shared/kc: ancestor" "$tmp/anc2.err" && ! grep -q ' hit ' "$tmp/anc2.err"
ok $? "the same directory as a read-only cache (KILN_CACHE_PATH) is refused too"
chmod 1777 "$tmp/shared"
if [ "$(id -u)" = 0 ]; then
  KILN_CACHE_DIR="$tmp/shared/kc" run --backend $backend --cache-report >/dev/null 2>"$tmp/anc3.err"
  [ $? = 0 ] && ! grep -q refusing "$tmp/anc3.err" && grep -q ' hit ' "$tmp/anc3.err"
  ok $? "in a sticky directory of root's (like /tmp) the cache is used"
else
  ok 0 "# SKIP a sticky directory of root's: not root"
fi
rm -rf "$tmp/shared"

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

# ---- maintenance commands say what they did and did not do ----------------
export KILN_CACHE_DIR="$tmp/m-cache"
run --backend $backend >/dev/null 2>&1
entry=$(find "$KILN_CACHE_DIR" -type f -name '01*' | sort | head -1)
rm -f "$entry"; mkfifo "$entry"
timeout 60 "$kiln" cache verify >"$tmp/v" 2>&1
[ $? = 1 ] && grep -q "BAD: a FIFO in place of an entry  ($entry)" "$tmp/v"
ok $? "verify lists a FIFO in place of an entry and exits 1"
timeout 60 "$kiln" run "$model" --random-inputs 7 --backend $backend >/dev/null 2>"$tmp/r"
timeout 60 "$kiln" run "$model" --random-inputs 7 --backend $backend --cache-report >/dev/null 2>"$tmp/r2"
[ -f "$entry" ] && ! grep -Eq ' (miss|bad) ' "$tmp/r2"
ok $? "a FIFO in place of an entry does not block its kernel: one run later it is a hit"
rm -f "$entry"; mkfifo "$entry"
timeout 60 "$kiln" cache clear >"$tmp/c" 2>&1
[ $? = 0 ] && [ ! -e "$entry" ] && [ -z "$(find "$KILN_CACHE_DIR" -name '01*' ! -type d)" ]
ok $? "clear removes a FIFO in place of an entry"
run --backend $backend >/dev/null 2>&1
rm -f "$entry"; mkdir "$entry"; : >"$entry/keep"
"$kiln" cache clear >"$tmp/c" 2>"$tmp/c.err"
[ $? = 1 ] && grep -q "could not remove 1: $entry: a directory that is not empty" "$tmp/c.err" &&
  grep -q "^removed [1-9][0-9]* entries from $KILN_CACHE_DIR" "$tmp/c"
ok $? "clear that cannot remove a directory says so with its path and exits 1"
rm -rf "$entry"
# verify --remove on an entry it cannot remove: root can chown, others chmod
run --backend $backend >/dev/null 2>&1
printf 'X' | dd of="$entry" bs=1 seek=200 conv=notrunc 2>/dev/null
if [ "$(id -u)" = 0 ]; then chown 65534 "$entry"; else chmod 555 "$(dirname "$entry")"; fi
"$kiln" cache verify --remove >"$tmp/v" 2>"$tmp/v.err"
rc=$?
chmod 700 "$(dirname "$entry")"
[ $rc = 1 ] && [ -e "$entry" ] && grep -q "NOT removed" "$tmp/v" &&
  grep -q "^1 bad entry in $KILN_CACHE_DIR: 0 removed, 1 not removed" "$tmp/v" &&
  ! grep -q "1 bad entry removed" "$tmp/v"
ok $? "verify --remove does not claim to remove an entry it could not remove"
if [ "$(id -u)" = 0 ]; then
  "$kiln" cache prune --max-size 1 >"$tmp/p" 2>"$tmp/p.err"
  [ $? = 1 ] && grep -q "could not remove 1: $entry: owned by another user" "$tmp/p.err"
  ok $? "prune that cannot remove an entry says so with its path and exits 1"
  rm -f "$entry"
  echo "ok $((n + 1)) - # SKIP clear/prune on a chmod 555 cache: running as root, permission bits do not stop root"
  n=$((n + 1))
else
  rm -f "$entry"
  run --backend $backend >/dev/null 2>&1
  find "$KILN_CACHE_DIR" -type d -exec chmod 555 {} +
  "$kiln" cache prune --max-size 1 >"$tmp/p" 2>"$tmp/p.err"; rp=$?
  "$kiln" cache clear >"$tmp/c" 2>"$tmp/c.err"; rc=$?
  find "$KILN_CACHE_DIR" -type d -exec chmod 700 {} +
  [ $rp = 1 ] && [ $rc = 1 ] && grep -q "could not remove" "$tmp/p.err" &&
    grep -q "could not remove .*Permission denied" "$tmp/c.err"
  ok $? "clear and prune on a read-only cache exit 1 and say what they could not remove"
fi

# read-only caches: verify covers them and names the one with a bad entry
run --backend $backend >/dev/null 2>&1
rm -rf "$tmp/site2"; cp -a "$KILN_CACHE_DIR" "$tmp/site2"; rm -f "$tmp/site2/stats"
sentry=$(find "$tmp/site2" -type f -name '01*' | sort | head -1)
printf 'X' | dd of="$sentry" bs=1 seek=200 conv=notrunc 2>/dev/null
KILN_CACHE_PATH="$tmp/nonesuch:$tmp/site2" "$kiln" cache verify >"$tmp/v" 2>"$tmp/v.err"
[ $? = 1 ] && grep -q "^0 bad entries in $KILN_CACHE_DIR\$" "$tmp/v" &&
  grep -q "^1 bad entry in $tmp/site2\$" "$tmp/v" && grep -q "BAD: checksum mismatch (corrupted)  ($sentry)" "$tmp/v"
ok $? "verify covers the caches of KILN_CACHE_PATH and names the one holding a bad entry"
grep -q "$tmp/nonesuch.*KILN_CACHE_PATH" "$tmp/v.err"; ok $? "... and says which listed cache it cannot open"
KILN_CACHE_PATH="$tmp/site2" "$kiln" cache verify --remove >"$tmp/v" 2>&1
[ $? = 1 ] && [ -f "$sentry" ] && grep -q "NOT removed: a read-only cache" "$tmp/v"
ok $? "verify --remove leaves a read-only cache alone and says so"
# one problem, one line: a site cache kiln refuses, for every kernel
chmod 777 "$tmp/site2"
KILN_CACHE_DIR="$tmp/fresh" KILN_CACHE_PATH="$tmp/site2" run --backend $backend >/dev/null 2>"$tmp/once.err"
[ "$(wc -l <"$tmp/once.err")" = 1 ] && grep -q "refusing $tmp/site2: writable by group or others; going on without it" "$tmp/once.err"
ok $? "a refused read-only cache is reported once (when it is opened), not once per kernel"
chmod 755 "$tmp/site2"

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

  # warm after one cold run, with the default minimum compile time, on
  # radon (whose scatter and join kernels compile in microseconds), and
  # identical kernels compiled once whatever --jobs says
  export KILN_CACHE_DIR="$tmp/radon-cache"
  radon() { (cd "$top/examples" && KILN_CACHE_MIN_COMPILE_MS= "$kiln" run radon.kg -i mu_a=1.5 \
    -i log_sigma_a=-0.5 -i a_t=0 -i b=-0.7 -i log_sigma_y=-0.3 --backend llvm "$@"); }
  radon --jobs 2 --cache-report >/dev/null 2>"$tmp/rc.err"
  keys=$(grep -E '^ +[0-9]+  [0-9a-f]{12}  ' "$tmp/rc.err" | awk '{print $2}' | sort -u | wc -l)
  misses=$(grep -c ' miss ' "$tmp/rc.err")
  [ "$misses" = "$keys" ] && [ "$(grep -c ' miss .*(stored)' "$tmp/rc.err")" = "$keys" ]
  ok $? "radon --jobs 2 cold: each of $keys different kernels compiled once and stored ($misses misses)"
  LD_DEBUG=files radon --jobs 2 --cache-report >/dev/null 2>"$tmp/rw.err"
  ! grep -Eq ' (miss|bad) ' "$tmp/rw.err" && [ "$(grep -c ' hit ' "$tmp/rw.err")" = "$keys" ]
  ok $? "radon llvm: the second process is warm (every kernel a hit)"
  ! grep -q 'libLLVM' "$tmp/rw.err"; ok $? "radon llvm: the second process does not load libLLVM"
  # the saved figure never exceeds what the cold run spent compiling
  cold_ms=$(sed -n 's/.*; \([0-9.]*\) ms compiling or loading.*/\1/p' "$tmp/rc.err")
  "$kiln" cache stats >"$tmp/rs"
  saved=$(sed -n 's/^compile saved  \([0-9.]*\) s.*/\1/p' "$tmp/rs")
  awk -v s="$saved" -v c="$cold_ms" 'BEGIN { exit !(s * 1000 <= c) }' &&
    grep -q "^hits           $keys " "$tmp/rs"
  ok $? "stats: $keys hits, compile saved ${saved} s <= the cold run's $cold_ms ms"
  # a threshold that keeps entries out is given as the reason
  rm -rf "$KILN_CACHE_DIR"
  (cd "$top/examples" && KILN_CACHE_MIN_COMPILE_MS=100000 "$kiln" run radon.kg -i mu_a=1.5 \
    -i log_sigma_a=-0.5 -i a_t=0 -i b=-0.7 -i log_sigma_y=-0.3 --backend llvm --cache-report) >/dev/null 2>"$tmp/rt.err"
  grep -q ' miss .*(not stored: compiled faster than KILN_CACHE_MIN_COMPILE_MS)' "$tmp/rt.err"
  ok $? "--cache-report says why a kernel was not stored"
fi

# a cache directory that cannot be made gives mkdir's reason, not the
# ENOENT of the stat that followed it: sysfs refuses mkdir to everyone
# (EPERM for root, EACCES otherwise)
if [ -d /sys/kernel ] && [ ! -e /sys/kiln-no-such-dir ]; then
  KILN_CACHE_DIR=/sys/kiln-no-such-dir/c "$kiln" compile "$model" --quiet \
    >/dev/null 2>"$tmp/mk.err"
  rc=$?
  [ $rc = 1 ] && grep -q 'cannot create /sys/kiln-no-such-dir/c: /sys/kiln-no-such-dir: ' "$tmp/mk.err" &&
    ! grep -q 'No such file or directory' "$tmp/mk.err"
  ok $? "an uncreatable cache directory names mkdir's reason ($(cat "$tmp/mk.err"))"
else
  echo "ok $((n = n + 1)) - # SKIP no sysfs"
fi

echo "1..$n"
[ $failed = 0 ]
