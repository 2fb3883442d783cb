#!/bin/sh
# test_plugin_trust.sh — where plugins come from (TAP; docs/plugin-abi.md
# section 13).  A libkiln that was not loaded from a build tree (here: a
# copy of the build's libkiln in a temporary "installed" lib directory)
# never searches a build tree, even the one it was built in — a plugin
# planted in a deleted build tree is never loaded; a libkiln loaded from a
# build tree (the tests, ./tools/kiln) does search it; plugin files and
# directories writable by group or others, or symlinks into such places,
# are refused with a message naming them, and so is a plugin directory
# with an ancestor someone else may change (issue 24) and the llvm
# plugin's compiler module under the same rule; "not found" names every
# directory searched.  The planted plugin is plugins/example (built by make
# check): it serves the backend "example".
top=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0
ok() {  # ok COND-EXIT-STATUS DESCRIPTION
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
unset KILN_PLUGIN_PATH KILN_BACKEND KILN_POLICY
export KILN_CACHE=off

plugin="$build/plugins/example/.libs/example.so"
bin="$build/tools/.libs/kiln"        # the real program, not libtool's wrapper
lib=$(ls "$build"/.libs/libkiln.so.*.*.* 2>/dev/null | head -1)
# a kiln built with --with-mpi also links libkiln-mpi: copied next to
# each copy of libkiln (it loads no plugin itself)
mpilib=$(ls "$build"/.libs/libkiln-mpi.so.*.*.* 2>/dev/null | head -1)
if [ ! -f "$plugin" ] || [ ! -x "$bin" ] || [ -z "$lib" ]; then
  echo "ok 1 - # SKIP no example plugin, tools/.libs/kiln or .libs/libkiln.so (shared build)"
  echo "1..1"
  exit 0
fi

cat >"$tmp/t.kg" <<'EOF'
kiln 1
graph t
  input x: f64[3]
  output y = add(x, x)
end
EOF

# run KILN LIBDIR [ENV=VALUE...]: kiln run t.kg with KILN_BACKEND=example
# (which falls back to the interpreter when the plugin is not loaded;
# --backend example would be an error then) and libkiln taken from LIBDIR
# (none: the build's own, through the wrapper); stdout to $tmp/out, stderr
# to $tmp/err
run() {
  libdir=$1; shift
  if [ -n "$libdir" ]; then
    env LD_LIBRARY_PATH="$libdir" KILN_BACKEND=example "$@" "$bin" run \
      "$tmp/t.kg" -i x=[1,2,3] --cache-report >"$tmp/out" 2>"$tmp/err"
  else
    env KILN_BACKEND=example "$@" "$build/tools/kiln" run "$tmp/t.kg" \
      -i x=[1,2,3] --cache-report >"$tmp/out" 2>"$tmp/err"
  fi
}
# (--cache-report's table, on stderr, names each kernel's backend)
loaded() { grep -q '= \[2, 4, 6\]' "$tmp/out" && grep -qE '^ +0 .* example ' "$tmp/err"; }
refused() { ! grep -qE '^ +0 .* example ' "$tmp/err" && grep -qF "$1" "$tmp/err"; }

# an "installed" libkiln: the build's library copied out of the build tree
mkdir -p "$tmp/lib"
cp "$lib" "$tmp/lib/libkiln.so.0"
[ -z "$mpilib" ] || cp "$mpilib" "$tmp/lib/libkiln-mpi.so.0"

run ""
loaded
ok $? "a libkiln loaded from its build tree finds the build tree's plugin"

run "$tmp/lib"
grep -q '= \[2, 4, 6\]' "$tmp/out" && ! loaded &&
  grep -q "backend 'example' not found" "$tmp/err"
ok $? "an installed libkiln never loads a plugin from the build tree it was built in"
! grep -qF "$build" "$tmp/err"
ok $? "nor names that build tree among the directories it searched"

# a copy of libkiln in DIR/.libs is a build tree only with libtool's
# uninstalled DIR/libkiln.la (installed=no) next to it
fake="$tmp/fake"
mkdir -p "$fake/.libs" "$fake/plugins/example/.libs"
cp "$lib" "$fake/.libs/libkiln.so.0"
[ -z "$mpilib" ] || cp "$mpilib" "$fake/.libs/libkiln-mpi.so.0"
cp "$plugin" "$fake/plugins/example/.libs/example.so"
run "$fake/.libs"
! loaded
ok $? "a libkiln in DIR/.libs without DIR/libkiln.la does not search DIR"
sed 's/^installed=no$/installed=yes/' "$build/libkiln.la" >"$fake/libkiln.la"
run "$fake/.libs"
! loaded
ok $? "nor with an installed (installed=yes) libkiln.la"
cp "$build/libkiln.la" "$fake/libkiln.la"
run "$fake/.libs"
loaded
ok $? "with the build's libkiln.la (installed=no) it is a build tree and searched"

# owner and mode checks (the installed copy, so that nothing falls back
# to the build tree)
mkdir "$tmp/good" "$tmp/gw" "$tmp/ww" "$tmp/ln" "$tmp/lnww"
chmod 755 "$tmp/good" "$tmp/gw" "$tmp/ln" "$tmp/lnww"
cp "$plugin" "$tmp/good/example.so"; chmod 755 "$tmp/good/example.so"
run "$tmp/lib" KILN_PLUGIN_PATH="$tmp/good"
loaded && ! grep -q refusing "$tmp/err"
ok $? "a plugin of ours, not group/world-writable, in such a directory loads"

cp "$plugin" "$tmp/gw/example.so"; chmod 775 "$tmp/gw/example.so"
run "$tmp/lib" KILN_PLUGIN_PATH="$tmp/gw"
refused "refusing plugin $tmp/gw/example.so: writable by group or others"
ok $? "a group-writable plugin file is refused, naming it"

cp "$plugin" "$tmp/ww/example.so"; chmod 755 "$tmp/ww/example.so"
chmod 777 "$tmp/ww"
run "$tmp/lib" KILN_PLUGIN_PATH="$tmp/ww"
refused "refusing plugin $tmp/ww/example.so: directory $tmp/ww: writable by group or others"
ok $? "a plugin in a world-writable directory is refused, naming the directory"

ln -s "$tmp/gw/example.so" "$tmp/ln/example.so"
run "$tmp/lib" KILN_PLUGIN_PATH="$tmp/ln"
refused "refusing plugin $tmp/ln/example.so: writable by group or others"
ok $? "a symlink to a group-writable plugin is refused"

ln -s "$tmp/ww/example.so" "$tmp/lnww/example.so"
run "$tmp/lib" KILN_PLUGIN_PATH="$tmp/lnww"
refused "refusing plugin $tmp/lnww/example.so: symlink into directory $tmp/ww: writable by group or others"
ok $? "a symlink into a world-writable directory is refused, naming it"

run "$tmp/lib" KILN_PLUGIN_PATH="$tmp/gw:$tmp/good"
loaded && grep -qF "refusing plugin $tmp/gw/example.so" "$tmp/err"
ok $? "after a refused plugin the search goes on to the next directory"

# a plugin directory whose parent others may write (not sticky): they
# could rename it away and put their own in its place
mkdir -p "$tmp/open/plug"
cp "$plugin" "$tmp/open/plug/example.so"; chmod 755 "$tmp/open/plug" "$tmp/open/plug/example.so"
chmod 777 "$tmp/open"
run "$tmp/lib" KILN_PLUGIN_PATH="$tmp/open/plug"
refused "refusing plugin $tmp/open/plug/example.so: ancestor $tmp/open is writable by group or others (mode 0777, not sticky)"
ok $? "a plugin whose directory's parent is world-writable (not sticky) is refused, naming that ancestor"
chmod 1777 "$tmp/open"
run "$tmp/lib" KILN_PLUGIN_PATH="$tmp/open/plug"
loaded && ! grep -q refusing "$tmp/err"
ok $? "with that parent sticky (like /tmp) the plugin loads"
chmod 755 "$tmp/open"
# the path given goes through a symlink: the directories it passes are
# checked (the symlink's own directory too), not only the target's
mkdir -p "$tmp/open2"; chmod 777 "$tmp/open2"
ln -s "$tmp/good" "$tmp/open2/plug"
run "$tmp/lib" KILN_PLUGIN_PATH="$tmp/open2/plug"
refused "ancestor $tmp/open2 is writable by group or others"
ok $? "a symlink to a good plugin directory, planted in a world-writable directory, is refused"

# the llvm plugin's compiler module llvm_codegen.so is code too: a copy of
# the plugin's directory with a world-writable module, or one owned by
# another user, makes the llvm backend unavailable (one line), and the
# kernel runs on the fallback
llvm_dir="$build/backends/llvm/.libs"
if [ -f "$llvm_dir/llvm.so" ] && [ -f "$llvm_dir/llvm_codegen.so" ]; then
  # runllvm DIR: kiln run t.kg on llvm ($KILN_BACKEND: falls back when it
  # cannot load, where --backend is an error) with the installed libkiln
  runllvm() {
    env LD_LIBRARY_PATH="$tmp/lib" KILN_PLUGIN_PATH="$1" KILN_BACKEND=llvm "$bin" run "$tmp/t.kg" \
      -i x=[1,2,3] --cache-report >"$tmp/out" 2>"$tmp/err"
  }
  on_llvm() { grep -qE '^ +0 .* llvm ' "$tmp/err"; }
  mkdir -p "$tmp/llvm"; chmod 755 "$tmp/llvm"
  cp "$llvm_dir/llvm.so" "$llvm_dir/llvm_codegen.so" "$tmp/llvm/"
  chmod 755 "$tmp/llvm/llvm.so" "$tmp/llvm/llvm_codegen.so"
  runllvm "$tmp/llvm"
  grep -q '= \[2, 4, 6\]' "$tmp/out" && on_llvm && ! grep -q refusing "$tmp/err"
  ok $? "a copy of the llvm plugin's directory, as installed, loads and compiles"
  chmod 777 "$tmp/llvm/llvm_codegen.so"
  runllvm "$tmp/llvm"
  grep -q '= \[2, 4, 6\]' "$tmp/out" && ! on_llvm &&
    [ "$(grep -c '^kiln:' "$tmp/err")" -ge 1 ] &&
    grep -q "^kiln: skipping plugin $tmp/llvm/llvm.so: llvm: refusing the compiler module $tmp/llvm/llvm_codegen.so: writable by group or others\$" "$tmp/err"
  ok $? "a world-writable llvm_codegen.so is refused in one line; the kernel runs on the fallback"
  chmod 755 "$tmp/llvm/llvm_codegen.so"
  if [ "$(id -u)" = 0 ]; then
    chown nobody "$tmp/llvm/llvm_codegen.so"
    runllvm "$tmp/llvm"
    grep -q '= \[2, 4, 6\]' "$tmp/out" && ! on_llvm &&
      grep -q "refusing the compiler module $tmp/llvm/llvm_codegen.so: owned by another user" "$tmp/err"
    ok $? "an llvm_codegen.so owned by another user (chown nobody) is refused"
    chown 0 "$tmp/llvm/llvm_codegen.so"
  else
    ok 0 "# SKIP llvm_codegen.so of another user: needs root for chown"
  fi
  chmod 777 "$tmp/llvm"; chmod 755 "$tmp/llvm/llvm.so"
  runllvm "$tmp/llvm"
  grep -q '= \[2, 4, 6\]' "$tmp/out" && ! on_llvm && grep -q "refusing plugin $tmp/llvm/llvm.so: directory $tmp/llvm: writable by group or others" "$tmp/err"
  ok $? "the llvm plugin in a world-writable directory is refused before anything of it runs"
  chmod 755 "$tmp/llvm"
else
  ok 0 "# SKIP the llvm plugin is not built"
fi

# the not-found message lists every directory searched, in order
env KILN_PLUGIN_PATH="$tmp/none1:$tmp/none2" "$build/tools/kiln" run "$tmp/t.kg" \
  -i x=[1,2,3] --backend nosuch >/dev/null 2>"$tmp/err"
dirs="$tmp/none1, $tmp/none2, ${KILN_INSTALL_PLUGIN_DIR:-/nowhere}, $build/backends/nosuch/.libs, $build/plugins/nosuch/.libs"
grep -qF "backend 'nosuch' not found (searched $dirs)" "$tmp/err"
ok $? "not found names \$KILN_PLUGIN_PATH's directories, the install directory and the build tree's"

echo "1..$n"
[ "$failed" = 0 ]
