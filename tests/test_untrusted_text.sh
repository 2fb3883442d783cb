#!/bin/sh
# test_untrusted_text.sh — hostile data and model text at the CLI: bytes
# from a model or its data never reach the
# terminal raw: a JSON key or a .kg string holding an escape sequence
# (ESC ] 0 ; ... BEL retitles a terminal, ESC [ 2 J clears it) is either
# refused or shown escaped ("\x1b") in every message that names it.
# Found by an attack on issue 24's CLI work.  TAP output.
build=${KILN_BUILDDIR:-.}
src=${KILN_SRCDIR:-.}
kiln="$build/tools/kiln"
tmp=${TMPDIR:-/tmp}/kiln_untrusted_text.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
unset KILN_BACKEND KILN_POLICY
n=0
esc=$(printf '\033')
# t DESCRIPTION FILE: ok when FILE (a command's stderr) has no ESC or BEL
# byte and does hold the escaped form
t() {
    n=$((n + 1))
    if ! grep -q "[$esc$(printf '\007')]" "$2" && grep -q 'x1b' "$2"; then
        echo "ok $n - $1"
    else
        echo "not ok $n - $1"
        sed 's/^/# /' "$2" | od -c | head -5 | sed 's/^/# /'
    fi
}
cp "$src/examples/eight_schools_noncentered.kg" "$tmp/m.kg"
printf '{"J":8,"\\u001b]0;PWNED\\u0007\\u001b[2J":1,"y\\u001b[31m":[1,2,3,4,5,6,7,8],"sigma":[1,1,1,1,1,1,1,1]}' >"$tmp/keys.json"
"$kiln" model "$tmp/m.kg" --data "$tmp/keys.json" >/dev/null 2>"$tmp/e1"
t "kiln model: the data's keys listed escaped" "$tmp/e1"
"$kiln" run "$tmp/m.kg" --data "$tmp/keys.json" --random-inputs 1 \
    >/dev/null 2>"$tmp/e2"
t "kiln run --data: the data's keys listed escaped" "$tmp/e2"
# a key one edit from a variable's name: "did you mean" shows it escaped
printf '{"J":8,"y":[1,2,3,4,5,6,7,8],"sigm\\u001b":[1,1,1,1,1,1,1,1]}' \
    >"$tmp/near.json"
"$kiln" model "$tmp/m.kg" --data "$tmp/near.json" >/dev/null 2>"$tmp/e3"
t "kiln model: 'did you mean' escapes a key from the data" "$tmp/e3"
"$kiln" run "$tmp/m.kg" --data "$tmp/near.json" --random-inputs 1 \
    >/dev/null 2>"$tmp/e4"
t "kiln run: 'did you mean' escapes a key from the data" "$tmp/e4"
# kiln model --inputs POINT.json whose key is no parameter
printf '{"J":8,"y":[1,2,3,4,5,6,7,8],"sigma":[1,1,1,1,1,1,1,1]}' >"$tmp/d.json"
printf '{"\\u001b[2Jmu":1}' >"$tmp/point.json"
"$kiln" model "$tmp/m.kg" --data "$tmp/d.json" --inputs "$tmp/point.json" \
    >/dev/null 2>"$tmp/e5"
t "kiln model --inputs: an unknown key is shown escaped" "$tmp/e5"
# a .kg string (a data file's name) with control bytes is refused where
# it is read: every later message would print it
printf 'kiln 1\ngraph g\n  shared a: f64[N] = csv("x\033]0;PWN\007.csv", "c")\n  output o = sum(a)\nend\n' >"$tmp/s.kg"
n=$((n + 1))
if "$kiln" check "$tmp/s.kg" >/dev/null 2>"$tmp/e6"; then
    echo "not ok $n - a .kg string with control bytes is refused"
elif grep -q "[$esc$(printf '\007')]" "$tmp/e6" ||
     ! grep -q 's.kg:3:.*control byte 0x1b in string' "$tmp/e6"; then
    echo "not ok $n - a .kg string with control bytes is refused"
    sed 's/^/# /' "$tmp/e6" | od -c | head -3 | sed 's/^/# /'
else
    echo "ok $n - a .kg string with control bytes is refused, named by line"
fi
# wrong data, not a smaller model: J = 8 with arrays of 3 is refused by
# kiln run --data as kiln model refuses it (kiln run took J from the
# arrays and ran a model of 3 schools; found by the same attack)
printf '{"J":8,"y":[1,2,3],"sigma":[1,1,1]}' >"$tmp/mis.json"
n=$((n + 1))
if "$kiln" run "$tmp/m.kg" --data "$tmp/mis.json" --random-inputs 1 \
       >/dev/null 2>"$tmp/e7"; then
    echo "not ok $n - kiln run --data: J = 8 with arrays of 3 is refused"
elif grep -q "mis.json: data 'J' is 8 but shared 'y' has 3 elements" "$tmp/e7"
then
    echo "ok $n - kiln run --data: J = 8 with arrays of 3 is refused"
else
    echo "not ok $n - kiln run --data: J = 8 with arrays of 3: the message"
    sed 's/^/# /' "$tmp/e7"
fi
"$kiln" model "$tmp/m.kg" --data "$tmp/mis.json" --random-inputs 1 \
    >/dev/null 2>&1
rc=$?
n=$((n + 1))
if [ $rc -ne 0 ]; then echo "ok $n - kiln model refuses it too"
else echo "not ok $n - kiln model refuses it too"; fi
printf '{"J":8,"y":[1,2,3,4,5,6,7,8],"sigma":[1,1,1,1,1,1,1,1]}' >"$tmp/ok.json"
n=$((n + 1))
if "$kiln" run "$tmp/m.kg" --data "$tmp/ok.json" --random-inputs 1 \
       >/dev/null 2>&1; then
    echo "ok $n - kiln run --data: J = 8 with arrays of 8 runs"
else
    echo "not ok $n - kiln run --data: J = 8 with arrays of 8 runs"
fi
echo "1..$n"
