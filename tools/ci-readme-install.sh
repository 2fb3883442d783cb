#!/usr/bin/env bash
# tools/ci-readme-install.sh — the README followed top to bottom gives a
# working install (.ci/run runs it; it can be run alone).  Clones the
# committed tree, runs the README's "Two commands" build in-tree (the
# apt-get part checked, not run), then its "Install" commands in the same tree
# with --prefix into a temporary directory, make installcheck, and checks
# that the install does not depend on the build tree: RUNPATH of bin/kiln,
# no build-tree or /usr/local path in the installed binaries (debug info
# stripped first: it names the sources by design), a run with the build
# tree moved away, a plugin planted where the build tree was never loaded,
# the docs in share/doc/kiln, no "rm: cannot remove 'core'" from configure,
# the Python package imported from the install with a clean environment.
# Prints TAP ("ok N - ...", "1..N"); exit status 0 when every check passed.
# Usage: tools/ci-readme-install.sh [SOURCE-TREE]   (default: this tree)
set -uo pipefail
src=$(cd "${1:-$(dirname "$0")/..}" && pwd)
work=$(mktemp -d /tmp/kiln-readme.XXXXXX)
trap 'rm -rf "$work"' EXIT
tree="$work/src"
prefix="$work/prefix"
n=0
failed=0
ok() {  # ok STATUS DESCRIPTION
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; return 0; fi
  echo "not ok $n - $2"; failed=$((failed + 1)); return 1
}
finish() { echo "1..$n"; [ "$failed" = 0 ]; exit; }

git clone -q "$src" "$tree"
ok $? "clone $src" || finish
cd "$tree" || finish

# the README's commands, as written
first=$(sed -n '/^## Two commands/,/^## /p' README.md | grep -m1 -E '^ *apt-get update && .*autoreconf -fi')
install=$(sed -n '/^## Install/,/^## /p' README.md | grep -m1 -E '^\./configure --prefix=')
[ -n "$first" ] && [ -n "$install" ]
ok $? "README has the build and the install commands" || finish
first=$(echo "$first" | sed 's/^ *//')
# the apt-get part is not run (.ci/run installed the dependencies, and two
# apt-gets at once fight over dpkg's lock): check that what it names is
# installed instead
pkgs=$(echo "$first" | sed -nE 's/^apt-get update && apt-get install -y ([^&]*)&&.*/\1/p')
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
[ -n "$pkgs" ] && [ -z "$missing" ]
ok $? "the packages the README installs are installed${missing:+ (missing:$missing)}"
first=$(echo "$first" | sed -E 's/^apt-get update && apt-get install [^&]*&& //')
install=$(echo "$install" | sed "s|\$HOME/opt/kiln|$prefix|")
case $install in *"$prefix"*) ;; *) ok 1 "the install command's prefix is \$HOME/opt/kiln"; finish ;; esac
echo "# $first"
bash -c "$first" >"$work/first.out" 2>"$work/first.err"
ok $? "the README's build command" || { tail -n 30 "$work/first.out" "$work/first.err"; finish; }
grep -q '^logp = -1192\.67564312108' "$work/first.out"
ok $? "and its radon logp"
echo "# $install"
bash -c "$install" >"$work/install.out" 2>"$work/install.err"
ok $? "the README's install command, re-configured in the same tree" || { tail -n 30 "$work/install.out" "$work/install.err"; finish; }
make installcheck >"$work/installcheck.out" 2>&1
ok $? "make installcheck" || tail -n 30 "$work/installcheck.out"
! grep -q "cannot remove 'core'" "$work/first.err" "$work/install.err"
ok $? "configure does not print rm: cannot remove 'core'"

mkdir -p "$work/moved-docs" && cp "$tree"/docs/*.md "$work/moved-docs/"
bin="$prefix/bin/kiln"
lib=$(ls "$prefix"/lib/libkiln.so.*.*.* 2>/dev/null | head -1)
[ -x "$bin" ] && [ -n "$lib" ]
ok $? "bin/kiln and lib/libkiln.so installed" || finish
# (no grep -q at the end of a pipe: with pipefail, its early exit would
# fail the pipe through the writer's SIGPIPE)
readelf -d "$bin" | grep -E '\((RUNPATH|RPATH)\)' | grep -F "$prefix/lib" >/dev/null
ok $? "bin/kiln has a RUNPATH with $prefix/lib"
leaks=""
for f in "$bin" "$prefix/bin/kiln-gen" "$lib" "$prefix"/lib/kiln/backends/*.so; do
  [ -f "$f" ] || continue
  strip -g -o "$work/stripped" "$f" || { leaks="$leaks $f(strip)"; continue; }
  hits=$(strings "$work/stripped" | grep -E "$tree|/usr/local")
  if [ -n "$hits" ]; then
    leaks="$leaks $f"
    echo "$hits" | sed 's/^/#   /'
  fi
done
[ -z "$leaks" ]
ok $? "no build-tree or /usr/local path in the installed binaries${leaks:+:$leaks}"
missing=""
for d in README.md "$work"/moved-docs/*.md; do
  [ -f "$prefix/share/doc/kiln/$(basename "$d")" ] || missing="$missing $(basename "$d")"
done
[ -z "$missing" ]
ok $? "README.md and docs/*.md in share/doc/kiln${missing:+ (missing:$missing)}"

# the build tree moved away; a plugin planted where it was
cd "$work" && mv "$tree" "$work/moved"
mkdir -p "$tree/backends/nosuch/.libs" "$tree/plugins/nosuch/.libs"
planted=$(ls "$prefix"/lib/kiln/backends/*.so | head -1)
cp "$planted" "$tree/backends/nosuch/.libs/nosuch.so"
cp "$planted" "$tree/plugins/nosuch/.libs/nosuch.so"
unset KILN_PLUGIN_PATH KILN_BACKEND KILN_POLICY
export KILN_CACHE_DIR="$work/cache"
model="$prefix/share/kiln/examples/eight_schools.kg"
"$bin" run "$model" -i mu=0 -i log_tau=0 -i theta_t=0 >"$work/run.out" 2>"$work/run.err" &&
  grep -q '^logp = -43\.43563727714' "$work/run.out"
ok $? "the installed kiln runs with the build tree gone"
if [ -f "$prefix/lib/kiln/backends/tcc.so" ]; then
  "$bin" run "$model" -i mu=0 -i log_tau=0 -i theta_t=0 --backend tcc --cache-report \
    >"$work/run.out" 2>"$work/run.err" &&
    grep -q '^logp = -43\.43563727714' "$work/run.out" && grep -qE '^ +0 .* tcc ' "$work/run.err"
  ok $? "the installed tcc backend loads with the build tree gone"
fi
# the Python package (docs/python.md), with the build tree gone and a clean
# environment: no LD_LIBRARY_PATH, no PYTHONPATH but the install's site dir
py=$(sed -n 's/^PYTHON = //p' "$work/moved/Makefile")
pkg=$(find "$prefix/lib" -path '*-packages/kiln/__init__.py' | head -1)
if [ -z "$py" ] || [ "$py" = : ]; then
  n=$((n + 1)); echo "ok $n - # SKIP configure found no Python: the package is not installed"
elif [ -z "$pkg" ]; then
  ok 1 "the Python package is installed under $prefix/lib (configured PYTHON=$py)"
elif ! env -i PATH=/usr/bin:/bin "$py" -c 'import numpy' 2>/dev/null; then
  n=$((n + 1)); echo "ok $n - # SKIP no numpy for $py"
else
  env -i PATH=/usr/bin:/bin HOME="$work" KILN_CACHE_DIR="$work/cache" PYTHONNOUSERSITE=1 \
    PYTHONPATH="$(dirname "$(dirname "$pkg")")" "$py" -c '
import sys, numpy as np, kiln
assert kiln.library_path.startswith(sys.argv[1] + "/lib/"), kiln.library_path
f = kiln.compile(kiln.Graph.parse(open(sys.argv[2]).read()))
print("logp = %.12f" % f(0.0, 0.0, np.zeros(8))[0])
' "$prefix" "$model" >"$work/py.out" 2>"$work/py.err" &&
    grep -q '^logp = -43\.43563727714' "$work/py.out"
  ok $? "the installed Python package imports in a clean environment, loads $prefix/lib/libkiln and computes" ||
    sed 's/^/#   /' "$work/py.out" "$work/py.err"
fi
"$bin" run "$model" -i mu=0 -i log_tau=0 -i theta_t=0 --backend nosuch >/dev/null 2>"$work/run.err"
grep -qF "backend 'nosuch' not found (searched $prefix/lib/kiln/backends)" "$work/run.err" &&
  ! grep -qF "$tree" "$work/run.err"
ok $? "a plugin planted in the deleted build tree is not loaded (searched only $prefix/lib/kiln/backends)" ||
  sed 's/^/#   /' "$work/run.err"
finish
