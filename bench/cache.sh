#!/bin/sh
# bench/cache.sh — the disk cache: cold versus warm time to first call,
# peak RSS and cache size per model and backend (docs/cache.md,
# docs/performance.md "Disk cache").
# Usage: sh bench/cache.sh [BUILDDIR]
#   BUILDDIR defaults to $KILN_BUILDDIR, else the source tree.
# Each row runs `kiln run MODEL --random-inputs 1 --json` as a fresh process:
#   cold  = an empty cache directory (compile everything, store),
#   warm  = the same command again (best of 3; everything loaded),
#   off   = --no-cache (compile everything, store nothing).
# Wall time and peak RSS come from /usr/bin/time; the time is that of the
# whole process (start, parse, compile or load, first call, exit).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${KILN_BUILDDIR:-$src}}
kiln="$build/tools/kiln"
[ -x "$kiln" ] || { echo "bench/cache.sh: $kiln not found" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench/cache.sh: needs /usr/bin/time" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/gen"
"$build/tools/kiln-gen" pooled --groups 18 --shared 24 --likelihood lognormal \
  -o "$tmp/gen" >/dev/null
models="$src/examples/radon.kg $src/examples/eight_schools.kg $tmp/gen/pooled_g18_p24_lognormal.kg"
backends="interp"
for b in tcc llvm; do
  if KILN_CACHE=off "$kiln" run "$src/examples/eight_schools.kg" --random-inputs 1 \
       --backend "$b" --cache-report 2>&1 >/dev/null | grep -q " $b "; then
    backends="$backends $b"
  fi
done

# run DIR ARGS...: prints "seconds peak_kib ttfc_ms" (ttfc: compile + first
# call inside the process, from --json; the wall time adds process start)
run() {
  d=$1; shift
  KILN_CACHE_DIR=$d /usr/bin/time -f "%e %M" -o "$tmp/time" "$kiln" run "$@" \
    --random-inputs 1 --json >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  ttfc=$(sed -n 's/.*"compile_ms": \([0-9.e+-]*\), "first_call_ms": \([0-9.e+-]*\).*/\1 \2/p' "$tmp/out" \
         | awk '{printf "%.1f", $1 + $2}')
  echo "$(cat "$tmp/time") $ttfc"
}

echo "| model | kernels | backend | cold ms | warm ms | no cache ms | cold wall s | warm wall s | cold RSS MiB | warm RSS MiB | entries | size on disk |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for m in $models; do
  name=$(basename "$m" .kg)
  nk=$(KILN_CACHE=off "$kiln" run "$m" --random-inputs 1 --cache-report 2>&1 >/dev/null \
       | tail -1 | sed 's/ kernels.*//')
  for b in $backends; do
    d="$tmp/cache-$name-$b"
    rm -rf "$d"
    set -- $(run "$d" "$m" --backend "$b"); cold=$1; cold_rss=$2; cold_t=$3
    best=""; best_rss=""; best_t=""
    for i in 1 2 3; do
      set -- $(run "$d" "$m" --backend "$b")
      if [ -z "$best_t" ] || [ "$(echo "$3 < $best_t" | bc)" = 1 ]; then
        best=$1; best_rss=$2; best_t=$3
      fi
    done
    set -- $(run "$d" "$m" --backend "$b" --no-cache); off_t=$3
    entries=$(KILN_CACHE_DIR=$d "$kiln" cache stats | awk '/^entries/ {print $2}')
    size=$(du -sk "$d" | cut -f1)
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %.1f | %s | %s KiB |\n' \
      "$name" "$nk" "$b" "$cold_t" "$best_t" "$off_t" "$cold" "$best" \
      "$(echo "$cold_rss / 1024" | bc -l)" "$(echo "$best_rss / 1024" | bc -l)" \
      "$entries" "$size"
  done
done
