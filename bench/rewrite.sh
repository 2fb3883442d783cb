#!/bin/sh
# bench/rewrite.sh — what the rewrite passes buy (docs/rewrite.md,
# docs/performance.md "Rewrite passes"): cold compile time (no disk cache),
# process CPU time and peak RSS of `kiln run` with all passes and with none,
# default policy, on the stress models of bench/gen_models.sh: pooled
# gamma/lognormal at 6/8 ... 96/128 groups/shared parameters, additive
# 20/80/320, join 10 ... 10000.
# Usage: bench/rewrite.sh [BUILDDIR]   (also: make bench-rewrite)
# Prints three Markdown tables; medians over $REPEAT (default 3) processes.
#   1. per model: input graph size (`kiln explain --passes`, "== input: N
#      nodes"), then for passes on and off: JSON compile_ms, CPU seconds
#      (user+sys of the whole process, /usr/bin/time; in a build tree of
#      the program itself, not of its libtool wrapper), peak RSS, kernels.
#   2. growth: for consecutive sizes of one family, the exponent
#      log(t2/t1) / log(n2/n1) of compile ms and of CPU s against input
#      nodes n; about 1 is linear, about 2 quadratic.  CPU time is less
#      sensitive to machine load than wall time, but only has 10 ms
#      resolution: exponents marked * involve a CPU time under 0.10 s,
#      n/a one of 0.00 s.  The "(all)" row of a family spans its smallest
#      to its largest size, less noisy than the steps between neighbours.
#   3. pooled LogNormal/Gamma ratios at each size, passes on.
# PASSES_OFF (default none) is the pass list of the "off" columns:
# PASSES_OFF=-fuse compares fusion on with fusion off.
# A run that fails (or a model that cannot be generated) prints `fail` in
# its cells and a warning on stderr; the other rows still run.
# Needs GNU time at /usr/bin/time.  Never part of make check.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${KILN_BUILDDIR:-$src}}
kiln="$build/tools/kiln"
kgen="$build/tools/kiln-gen"
repeat=${REPEAT:-3}
off_passes=${PASSES_OFF:-none}
case $repeat in
  ''|*[!0-9]*|0) echo "bench/rewrite.sh: REPEAT must be a positive integer" >&2
                 exit 2 ;;
esac
for p in "$kiln" "$kgen" /usr/bin/time; do
  if [ ! -x "$p" ]; then
    echo "bench/rewrite.sh: $p not found (build first, or pass BUILDDIR)" >&2
    exit 1
  fi
done
# Time the real program, not the libtool wrapper script around it in a
# build tree: the wrapper's bash costs ~0.1 s of CPU per process, more
# than the whole compile of the small models.
lt=
if [ -x "$build/libtool" ]; then
  real=$("$build/libtool" --mode=execute echo "$kiln" 2>/dev/null) || real=
  if [ -n "$real" ] && [ "$real" != "$kiln" ] && [ -x "$real" ]; then
    lt="$build/libtool"
  fi
fi
timed() {  # /usr/bin/time ARGS..., the kiln wrapper replaced by its program
  if [ -n "$lt" ]; then "$lt" --mode=execute /usr/bin/time "$@"
  else /usr/bin/time "$@"; fi
}
export KILN_CACHE=off   # cold compiles: no disk cache
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
unset KILN_BACKEND KILN_POLICY KILN_PASSES

warn() { echo "bench/rewrite.sh: $*" >&2; }
# last line of kiln's stderr, for warnings
why() { tail -n 1 "$tmp/e" 2>/dev/null || true; }
# a plain non-negative decimal (what every cell must be, else "fail")
isnum() {
  case $1 in ''|*[!0-9.]*|*.*.*|.) return 1 ;; esac
}
field() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p" | head -n 1; }
# median (lower middle) of the numbers on stdin in format $1; "fail" if none
median() {
  awk -v fmt="$1" '$1 ~ /^[0-9.eE+-]+$/ { v = $1 + 0
      for (i = n; i > 0 && a[i] > v; i--) a[i + 1] = a[i]
      a[i + 1] = v; n++ }
    END { if (n) printf fmt "\n", a[int((n + 1) / 2)]; else print "fail" }'
}

# MODEL PASSES -> "compile_ms cpu_s rss_mb kernels", always exactly 4 words;
# a measure that failed in every repeat is "fail".
measure() {
  : >"$tmp/c"; : >"$tmp/u"; : >"$tmp/r"
  i=0
  while [ "$i" -lt "$repeat" ]; do
    i=$((i + 1))
    rm -f "$tmp/t" "$tmp/j"
    if timed -f '%U %S %M' -o "$tmp/t" \
         "$kiln" run "$1" --random-inputs 1 --passes "$2" --json \
         >"$tmp/j" 2>"$tmp/e"; then
      ms=$(field compile_ms <"$tmp/j")
      # GNU time prints the format on the last line of its output
      # shellcheck disable=SC2046
      set -- "$1" "$2" $(tail -n 1 "$tmp/t" 2>/dev/null)
      if isnum "$ms" && [ $# -eq 5 ] && isnum "$3" && isnum "$4" \
           && isnum "$5"; then
        echo "$ms" >>"$tmp/c"
        echo "$3 $4" | awk '{ print $1 + $2 }' >>"$tmp/u"
        echo "$5" | awk '{ print $1 / 1024 }' >>"$tmp/r"
      else
        warn "${1##*/} --passes $2: no compile_ms or time output"
      fi
      set -- "$1" "$2"
    else
      warn "${1##*/} --passes $2: run $i failed (exit $?): $(why)"
    fi
  done
  # the kernel count is only in the text output: "(1 call, 142 kernels)"
  k=$("$kiln" run "$1" --random-inputs 1 --passes "$2" \
        2>"$tmp/e" | sed -n 's/.*([0-9]* calls*, \([0-9][0-9]*\) kernels*).*/\1/p' \
        | head -n 1) || true
  isnum "$k" || { warn "${1##*/} --passes $2: no kernel count: $(why)"; k=fail; }
  echo "$(median '%.1f' <"$tmp/c") $(median '%.2f' <"$tmp/u")" \
       "$(median '%.1f' <"$tmp/r") $k"
}

# nodes of the input graph: "== input: N nodes" of `kiln explain --passes`
nodes() {
  n=$("$kiln" explain "$1" --passes 2>"$tmp/e" \
        | sed -n 's/^== input: \([0-9][0-9]*\) nodes.*/\1/p' | head -n 1) || true
  isnum "$n" || { warn "${1##*/}: no input node count: $(why)"; n=fail; }
  echo "$n"
}

gen() { "$kgen" "$@" -o "$tmp" 2>"$tmp/e" || warn "kiln-gen $*: $(why)"; }

res="$tmp/results"   # FAMILY SIZE LABEL NODES on(ms cpu rss k) off(ms cpu rss k)
: >"$res"
echo "| model | input nodes | passes on: compile ms | CPU s | RSS MB | kernels" \
     "| passes off: compile ms | CPU s | RSS MB | kernels |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
row() {  # FAMILY SIZE LABEL FILE
  if [ -n "$4" ] && [ -f "$4" ]; then
    n=$(nodes "$4")
    on=$(measure "$4" all)
    off=$(measure "$4" "$off_passes")
  else
    n=fail; on="fail fail fail fail"; off=$on
  fi
  # measure always prints 4 words, but never trust a word count under set -u
  # shellcheck disable=SC2086
  set -- "$1" "$2" "$3" "$n" $on $off
  while [ $# -lt 12 ]; do set -- "$@" fail; done
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$res"
  echo "| $3 | $4 | $5 | $6 | $7 | $8 | $9 | ${10} | ${11} | ${12} |"
}
for gp in 6/8 12/16 18/24 48/64 96/128; do
  for lik in gamma lognormal; do
    f=$(gen pooled --groups "${gp%/*}" --shared "${gp#*/}" --likelihood "$lik")
    row "pooled-$lik" "$gp" "pooled $gp $lik" "$f"
  done
done
for c in 20 80 320; do
  row additive "$c" "additive $c" "$(gen additive --components "$c")"
done
for n in 10 100 1000 10000; do
  row join "$n" "join $n" "$(gen join --n "$n")"
done

echo
echo "growth: exponent log(t2/t1)/log(n2/n1) against input nodes n" \
     "(1 = linear, 2 = quadratic; * = a CPU time < 0.10 s, coarse;" \
     "n/a = a time of 0)"
echo
echo "| family | sizes | input nodes | passes on: compile ms | CPU s" \
     "| passes off: compile ms | CPU s |"
echo "|---|---|---:|---:|---:|---:|---:|"
awk -F '\t' '
  function num(x) { return x ~ /^[0-9]+(\.[0-9]*)?$/ }
  # exponent between rows a and b of family f for column c
  function ex(f, a, b, c, cpu,   t1, t2, n1, n2) {
    t1 = v[f, a, c]; t2 = v[f, b, c]; n1 = v[f, a, 4]; n2 = v[f, b, 4]
    if (!num(t1) || !num(t2) || !num(n1) || !num(n2)) return "fail"
    if (t1 <= 0 || t2 <= 0 || n1 <= 0 || n1 == n2) return "n/a"
    return sprintf("%.2f%s", log(t2 / t1) / log(n2 / n1),
                   cpu && (t1 < 0.1 || t2 < 0.1) ? "*" : "")
  }
  function line(f, a, b, tag) {
    printf "| %s | %s -> %s%s | %s -> %s | %s | %s | %s | %s |\n", f,
      v[f, a, 2], v[f, b, 2], tag, v[f, a, 4], v[f, b, 4], ex(f, a, b, 5, 0),
      ex(f, a, b, 6, 1), ex(f, a, b, 9, 0), ex(f, a, b, 10, 1)
  }
  # families are interleaved (pooled gamma, lognormal, gamma, ...)
  { if (!($1 in cnt)) order[++nf] = $1
    r = ++cnt[$1]; for (i = 1; i <= NF; i++) v[$1, r, i] = $i }
  END { for (j = 1; j <= nf; j++) { f = order[j]
          for (r = 2; r <= cnt[f]; r++) line(f, r - 1, r, "")
          if (cnt[f] > 2) line(f, 1, cnt[f], " (all)") } }' "$res"

echo
echo "pooled LogNormal/Gamma ratios, passes on"
echo
echo "| size | input nodes | compile ms | CPU s | RSS MB |"
echo "|---|---:|---:|---:|---:|"
awk -F '\t' '
  function num(x) { return x ~ /^[0-9]+(\.[0-9]*)?$/ }
  function r(a, b) {
    return !num(a) || !num(b) ? "fail" : a > 0 ? sprintf("%.2f", b / a) : "n/a"
  }
  $1 == "pooled-gamma" { for (i = 1; i <= NF; i++) g[$2, i] = $i; order[++k] = $2 }
  $1 == "pooled-lognormal" { for (i = 1; i <= NF; i++) l[$2, i] = $i }
  END { for (j = 1; j <= k; j++) { s = order[j]
          printf "| %s | %s | %s | %s | %s |\n", s, r(g[s, 4], l[s, 4]),
            r(g[s, 5], l[s, 5]), r(g[s, 6], l[s, 6]), r(g[s, 7], l[s, 7]) } }' "$res"
