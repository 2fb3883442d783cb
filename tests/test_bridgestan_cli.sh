#!/bin/sh
# test_bridgestan_cli.sh — `kiln bridgestan MODEL.kg -o LIB.so [--logp NAME]`
# (tools/kiln_bridgestan.c, docs/bridgestan.md): usage, errors reported as
# kiln check's with nothing written, -o refusing the model itself, the
# trailer's layout, replacing an existing library whole, and the template
# search ($KILN_BRIDGESTAN_TEMPLATE).  Needs no `param` support: the model
# is examples/eight_schools.kg.  TAP output.
src=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
kiln="$build/tools/kiln"
template="$build/tools/.libs/bridgestan.so"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln_bs_cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
unset KILN_BRIDGESTAN_TEMPLATE
n=0
fails=0
ok() {  # ok STATUS DESCRIPTION: ok when STATUS is 0
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}
if [ ! -f "$template" ]; then
  echo "1..0 # SKIP no template library $template (a static build?)"
  exit 0
fi
model="$tmp/es.kg"
cp "$src/examples/eight_schools.kg" "$model"

"$kiln" --help | grep -q 'kiln bridgestan FILE.kg -o LIB.so'
ok $? "kiln --help shows kiln bridgestan"
"$kiln" bridgestan >/dev/null 2>"$tmp/err"; st=$?
[ $st = 2 ] && grep -q '^usage: kiln bridgestan' "$tmp/err"
ok $? "no arguments: usage, exit status 2 (got $st)"
"$kiln" bridgestan "$model" >/dev/null 2>&1; st=$?
[ $st = 2 ]; ok $? "no -o: exit status 2"

# a model that does not parse: kiln check's message, nothing written
printf 'kiln 1\ngraph bad\n  x = add(y, 1)\nend\n' >"$tmp/bad.kg"
"$kiln" bridgestan "$tmp/bad.kg" -o "$tmp/bad.so" >/dev/null 2>"$tmp/err"; st=$?
"$kiln" check "$tmp/bad.kg" >/dev/null 2>"$tmp/check.err"
[ $st = 1 ] && [ ! -e "$tmp/bad.so" ] && cmp -s "$tmp/err" "$tmp/check.err"
ok $? "a parse error: exit 1, the message of kiln check, no file"
sed 's/^/# /' "$tmp/err"

# -o the model itself, the template, a directory
cp "$model" "$tmp/es.copy"
"$kiln" bridgestan "$model" -o "$model" >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && cmp -s "$model" "$tmp/es.copy" && grep -q 'is the model file itself' "$tmp/err"
ok $? "-o the model itself is refused and the model is untouched"
ln -s "$model" "$tmp/link.kg"
"$kiln" bridgestan "$model" -o "$tmp/link.kg" >/dev/null 2>&1; st=$?
[ $st = 1 ] && cmp -s "$model" "$tmp/es.copy"
ok $? "... also through a symbolic link"
"$kiln" bridgestan "$model" -o "$template" >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && grep -q 'is the template library itself' "$tmp/err"
ok $? "-o the template is refused"
mkdir "$tmp/dir"
"$kiln" bridgestan "$model" -o "$tmp/dir" >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && grep -q 'is a directory' "$tmp/err"
ok $? "-o a directory is refused"
# -o a FIFO (or a device: kiln bridgestan m.kg -o /dev/null as root) was
# renamed over, leaving a regular file where the special file was
if mkfifo "$tmp/fifo" 2>/dev/null; then
  "$kiln" bridgestan "$model" -o "$tmp/fifo" >/dev/null 2>"$tmp/err"; st=$?
  [ $st = 1 ] && [ -p "$tmp/fifo" ] && grep -q 'not a regular file' "$tmp/err"
  ok $? "-o a FIFO is refused and the FIFO stays (exit $st)"
  sed 's/^/# /' "$tmp/err"
else
  ok 0 "# SKIP no mkfifo"
fi
"$kiln" bridgestan "$model" -o "$tmp/nodir/x.so" >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && grep -q 'cannot create a file in' "$tmp/err"
ok $? "-o into a missing directory: a message, exit 1"

# --logp
"$kiln" bridgestan "$model" -o "$tmp/x.so" --logp lp >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && [ ! -e "$tmp/x.so" ] &&
  grep -q "no output of that name (outputs: logp, d_mu, d_log_tau, d_theta_t)" "$tmp/err"
ok $? "--logp naming no output: refused, listing the outputs"

# a library: the template's bytes, then the model, metadata, the footer
"$kiln" bridgestan "$model" -o "$tmp/es.so" --logp logp >"$tmp/out" 2>&1
ok $? "kiln bridgestan writes a library"
grep -q "es.so: BridgeStan library of graph 'eight_schools'" "$tmp/out"
ok $? "... and says what it wrote"
tsize=$(wc -c <"$template")
msize=$(wc -c <"$model")
lsize=$(wc -c <"$tmp/es.so")
head -c "$tsize" "$tmp/es.so" | cmp -s - "$template"
ok $? "it starts with the template, byte for byte"
tail -c +"$((tsize + 1))" "$tmp/es.so" | head -c "$msize" | cmp -s - "$model"
ok $? "then the model's text"
dir=$(cd "$tmp" && pwd -P)
meta=$(printf 'logp\000eight_schools\000%s\000es.kg\000' "$dir" | wc -c)
[ "$lsize" = $((tsize + msize + meta + 40)) ]
ok $? "then the metadata (logp, graph, base_dir, file) and a 40-byte footer"
tail -c 8 "$tmp/es.so" | od -An -c | tr -d ' \n' | grep -q 'KILN-BS001'
ok $? "the file ends with the magic: KILN-BS and a byte 1"
[ -x "$tmp/es.so" ]; ok $? "the library is executable (0755 less the umask)"

# replacing: an existing library is replaced whole or not at all
printf 'old' >"$tmp/lib.so"
"$kiln" bridgestan "$tmp/bad.kg" -o "$tmp/lib.so" >/dev/null 2>&1
[ "$(cat "$tmp/lib.so")" = old ]; ok $? "a failed run leaves an existing LIB.so alone"
"$kiln" bridgestan "$model" -o "$tmp/lib.so" --logp logp >/dev/null 2>&1 &&
  cmp -s "$tmp/lib.so" "$tmp/es.so"
ok $? "a good run replaces it"
[ -z "$(find "$tmp" -name '.*.so.*')" ]; ok $? "no temporary files are left"

# the template: $KILN_BRIDGESTAN_TEMPLATE, checked
KILN_BRIDGESTAN_TEMPLATE="$tmp/es.so" "$kiln" bridgestan "$model" -o "$tmp/y.so" \
  >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && [ ! -e "$tmp/y.so" ] && grep -q 'already holds a model' "$tmp/err"
ok $? "a model library is no template"
KILN_BRIDGESTAN_TEMPLATE="$model" "$kiln" bridgestan "$model" -o "$tmp/y.so" \
  >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && grep -q 'not an ELF file' "$tmp/err"
ok $? "a template that is not ELF is refused"
KILN_BRIDGESTAN_TEMPLATE="$tmp/none.so" "$kiln" bridgestan "$model" -o "$tmp/y.so" \
  >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && grep -q 'no template library' "$tmp/err"
ok $? "a missing template: a message naming KILN_BRIDGESTAN_TEMPLATE"
cp "$template" "$tmp/t.so"
KILN_BRIDGESTAN_TEMPLATE="$tmp/t.so" "$kiln" bridgestan "$model" -o "$tmp/y.so" \
  --logp logp >/dev/null 2>&1 && cmp -s "$tmp/y.so" "$tmp/lib.so"
ok $? "\$KILN_BRIDGESTAN_TEMPLATE names the template"
# the template is code every library made from it runs: it is read from a
# descriptor opened under the trust rule (docs/plugin-abi.md section 13)
mkdir -p "$tmp/ww/t"; cp "$template" "$tmp/ww/t/t.so"; chmod 755 "$tmp/ww/t"; chmod 777 "$tmp/ww"
KILN_BRIDGESTAN_TEMPLATE="$tmp/ww/t/t.so" "$kiln" bridgestan "$model" -o "$tmp/y2.so" \
  --logp logp >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && [ ! -e "$tmp/y2.so" ] && grep -q "refusing $tmp/ww/t/t.so: ancestor $tmp/ww is writable by group or others" "$tmp/err"
ok $? "a template below a world-writable directory is refused, naming it"
chmod 755 "$tmp/ww"; chmod 666 "$tmp/ww/t/t.so"
KILN_BRIDGESTAN_TEMPLATE="$tmp/ww/t/t.so" "$kiln" bridgestan "$model" -o "$tmp/y2.so" \
  --logp logp >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && grep -q "refusing $tmp/ww/t/t.so: writable by group or others" "$tmp/err"
ok $? "a world-writable template is refused"

# the log density is checked before anything is written: a float scalar,
# chosen as kiln_model_new chooses (logp, else the first output not
# marked tp or gq)
printf 'kiln 1\ngraph v\n  param a: f64[2]\n  output tp b = mul(a, 2)\n  output s = sum(a)\nend\n' >"$tmp/v.kg"
"$kiln" bridgestan "$tmp/v.kg" -o "$tmp/v.so" >"$tmp/out" 2>&1
[ $? = 0 ] && grep -q "log density 's'" "$tmp/out"
ok $? "without logp, the first output not marked tp or gq is the log density"
printf 'kiln 1\ngraph v\n  param a: f64[2]\n  output tp b = mul(a, 2)\nend\n' >"$tmp/v2.kg"
"$kiln" bridgestan "$tmp/v2.kg" -o "$tmp/v2.so" >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && [ ! -e "$tmp/v2.so" ] && grep -q 'no output to use as the log density' "$tmp/err"
ok $? "only tp outputs: refused before writing"
"$kiln" bridgestan "$tmp/v.kg" -o "$tmp/v3.so" --logp b >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && [ ! -e "$tmp/v3.so" ] &&
  grep -q "the log density 'b' must be a float scalar, got f64\[2\]" "$tmp/err"
ok $? "a vector log density: refused before writing"
# metadata over the reader's 64 KiB (an output name of 70000 bytes as
# --logp): the library was written and then refused at every construct as
# a "corrupt model trailer"; the writer now refuses it, writing nothing
long=$(awk 'BEGIN { while (i++ < 70000) printf "a" }')
printf 'kiln 1\ngraph g\n  param x: f64\n  output %s = neg(square(x))\nend\n' \
  "$long" >"$tmp/long.kg"
"$kiln" bridgestan "$tmp/long.kg" -o "$tmp/long.so" --logp "$long" \
  >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && [ ! -e "$tmp/long.so" ] && grep -q 'metadata' "$tmp/err"
ok $? "metadata over 64 KiB (a 70000-byte --logp): refused, nothing written"
cut -c1-200 "$tmp/err" | sed 's/^/# /'

# --mpi-axis (issue 30; the MPI runs are tests/test_bridgestan_mpi.sh): the
# MPI template is another file, missing when kiln is built without MPI
printf 'kiln 1\ngraph g\n  shared y: f64[N]\n  param m: f64\n  output logp = sum(neg(square(sub(y, m))))\nend\n' \
  >"$tmp/obs.kg"
KILN_BRIDGESTAN_MPI_TEMPLATE="$tmp/none.so" "$kiln" bridgestan "$tmp/obs.kg" \
  --mpi-axis N -o "$tmp/obs.so" >/dev/null 2>"$tmp/err"; st=$?
[ $st = 1 ] && [ ! -e "$tmp/obs.so" ] &&
  grep -q 'no MPI template library.*--with-mpi' "$tmp/err"
ok $? "--mpi-axis without an MPI template: refused, naming configure --with-mpi"
sed 's/^/# /' "$tmp/err"
"$kiln" bridgestan "$tmp/obs.kg" --mpi-axis "" -o "$tmp/obs.so" \
  >/dev/null 2>&1; st=$?
[ $st = 2 ] && [ ! -e "$tmp/obs.so" ]
ok $? "--mpi-axis '': a usage error (exit $st)"

echo "1..$n"
[ $fails = 0 ]
