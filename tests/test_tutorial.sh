#!/bin/sh
# test_tutorial.sh — docs/tutorial.md and docs/stan-cheatsheet.md as tests
# (TAP).
#
# The tutorial: every fenced block is taken in document order.  ```sh
# lines are run (with `kiln` and `python3` being this build's and
# /usr/bin/python3) from a scratch copy of the files the tutorial uses,
# and must exit 0; ```python blocks are run as scripts there; the
# `NAME = VALUE` lines of a ```text block must be those the last command
# printed (numbers within 1e-9 relative), other ```text blocks must be
# kiln's output exactly, or Python's with numbers replaced by '#' (they
# depend on the machine's libm in their last bits); a ```kg PATH block must be the
# file PATH, a ```kg PATH excerpt block lines of it.  `pip` lines are not
# run.  Then, independently of kiln: the log density and gradient of both
# models at the tutorial's points against numpy; the backends give
# identical outputs.  Python is skipped while /usr/bin/python3 lacks numpy, emcee or the
# BridgeStan client (../shared/clients), as in the other BridgeStan
# tests.  examples/logistic_sample.py itself compares emcee's posterior
# means with an independent fit (seeded; it explains its z-scores).
#
# The cheat sheet: every ```kg block is a whole .kg file that `kiln check`
# accepts, and every code span in the kiln column (the second) of its
# tables occurs in one of those blocks.
src=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
kiln_abs=$(cd "$build/tools" && pwd)/kiln
python=/usr/bin/python3
clients=$(cd "$src/.." && pwd)/shared/clients
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln_tut.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0
ok() {  # ok STATUS DESCRIPTION
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
diag() { sed 's/^/# /' "$@"; }

# this build's plugins; a cache of the test's own (kiln compile fills it)
pp=
for b in interp tcc llvm; do
  [ -f "$build/backends/$b/.libs/$b.so" ] && pp="$pp${pp:+:}$(cd "$build/backends/$b/.libs" && pwd)"
done
KILN_PLUGIN_PATH=$pp
KILN_CACHE_DIR=$tmp/cache
export KILN_PLUGIN_PATH KILN_CACHE_DIR
unset KILN_POLICY KILN_BACKEND KILN_PASSES KILN_TIERS

# the files the tutorial uses, as in the source tree
work=$tmp/work
mkdir -p "$work/examples/data" "$tmp/bin" "$tmp/blocks" "$tmp/sheet"
for f in logistic.kg logistic_county.kg logistic_sample.py; do
  cp "$src/examples/$f" "$work/examples/" || exit 1
done
cp "$src/examples/data/radon.csv" "$work/examples/data/" || exit 1
printf '#!/bin/sh\nexec "%s" "$@"\n' "$kiln_abs" >"$tmp/bin/kiln"
printf '#!/bin/sh\nPYTHONPATH="%s${PYTHONPATH:+:$PYTHONPATH}"; export PYTHONPATH\nexec %s "$@"\n' \
  "$clients" "$python" >"$tmp/bin/python3"
chmod +x "$tmp/bin/kiln" "$tmp/bin/python3"

# what can run here
gate() {  # gate LINE: prints why LINE cannot run yet, or nothing
  case "$1" in
    *--backend*)
      for b in tcc llvm; do
        [ -f "$build/backends/$b/.libs/$b.so" ] || { echo "the $b backend is not built"; return; }
      done ;;
  esac
  case "$1" in
    python3*) [ -z "$py_skip" ] || echo "$py_skip" ;;
  esac
}
py_skip=
if [ -n "$SAN_CFLAGS" ]; then
  py_skip="sanitizer build: its libraries cannot be loaded into python"
elif [ ! -x "$python" ]; then
  py_skip="no $python"
elif [ ! -f "$clients/bridgestan/__init__.py" ]; then
  py_skip="no BridgeStan Python client in $clients"
else
  for m in numpy emcee; do
    "$python" -c "import $m" 2>/dev/null || { py_skip="no $m for $python"; break; }
  done
fi
has_numpy=0
[ -x "$python" ] && "$python" -c 'import numpy' 2>/dev/null && has_numpy=1

# compare_values EXPECTED ACTUAL: the NAME = VALUE lines, in order, names
# equal, numbers within 1e-9 relative, other words (inf, nan) equal
compare_values() {
  grep -E '^[A-Za-z_][A-Za-z0-9_]* = ' "$1" >"$tmp/want"
  grep -E '^[A-Za-z_][A-Za-z0-9_]* = ' "$2" >"$tmp/got"
  awk -v want="$tmp/want" '
    function toks(s, a) { gsub(/[][,=]/, " ", s); return split(s, a, " ") }
    { if ((getline w < want) <= 0) { print "extra line: " $0; bad = 1; exit }
      nw = toks(w, A); ng = toks($0, B)
      if (nw != ng) { print "got " $0 "; want " w; bad = 1; next }
      for (i = 1; i <= nw; i++) {
        if (A[i] ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ && B[i] ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/) {
          d = A[i] - B[i]; if (d < 0) d = -d
          m = A[i] < 0 ? -A[i] : A[i]; if (m < 1) m = 1
          if (d > 1e-9 * m) { print "got " $0 "; want " w; bad = 1; next }
        } else if (A[i] != B[i]) { print "got " $0 "; want " w; bad = 1; next }
      } }
    END { if (!bad && (getline w < want) > 0) { print "missing line: " w; bad = 1 }
          exit bad }' "$tmp/got"
}

# --- the tutorial, block by block -------------------------------------
tut=$src/docs/tutorial.md
awk -v dir="$tmp/blocks" '
  /^```/ {
    if (inblk) { inblk = 0; close(f); next }
    k++; inblk = 1; info = substr($0, 4); lang = info; arg = ""
    if ((p = index(info, " ")) > 0) { lang = substr(info, 1, p - 1); arg = substr(info, p + 1) }
    if (lang == "") lang = "plain"
    f = sprintf("%s/%03d.%s", dir, k, lang)
    printf "" > f
    if (arg != "") { print arg > (f ".arg"); close(f ".arg") }
    next
  }
  inblk { print > f }' "$tut"
last=none        # the output of the last command: a file, or none (skipped)
last_kind=none   # kiln, python or other
for b in "$tmp"/blocks/*; do
  case "$b" in *.arg) continue ;; esac
  name=${b##*/}
  case "$b" in
  *.sh)
    # join continued lines, drop comments and blank lines
    sed -e :a -e '/\\$/N; s/\\\n//; ta' "$b" | grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' >"$b.lines"
    while IFS= read -r line; do
      case "$line" in
        pip\ *) skip "tutorial: $line (installs packages)"; last=none; continue ;;
      esac
      why=$(gate "$line")
      if [ -n "$why" ]; then
        skip "tutorial: $line: $why"
        last=none
        continue
      fi
      (cd "$work" && PATH="$tmp/bin:$PATH" sh -c "$line") >"$tmp/out.$name" 2>"$tmp/err.$name" </dev/null
      st=$?
      # a trace that found a non-finite value may say so by its status
      # too; tests below check what it reports
      case "$line" in *--trace-nonfinite*) [ $st = 1 ] && st=0 ;; esac
      ok $st "tutorial: $line"
      [ $st = 0 ] || { diag "$tmp/err.$name"; tail -5 "$tmp/out.$name" | diag; }
      last=$tmp/out.$name
      case "$line" in kiln\ *) last_kind=kiln ;; *) last_kind=other ;; esac
    done <"$b.lines"
    ;;
  *.python)
    if [ -n "$py_skip" ]; then
      skip "tutorial: the Python block $name: $py_skip"
      last=none
      continue
    fi
    (cd "$work" && PATH="$tmp/bin:$PATH" python3 "$b") >"$tmp/out.$name" 2>"$tmp/err.$name" </dev/null
    st=$?
    ok $st "tutorial: the Python block $name runs"
    [ $st = 0 ] || diag "$tmp/err.$name"
    last=$tmp/out.$name
    last_kind=python
    ;;
  *.text)
    if [ "$last" = none ]; then
      skip "tutorial: output block $name (its command did not run)"
      continue
    fi
    if grep -qE '^[A-Za-z_][A-Za-z0-9_]* = ' "$b"; then
      compare_values "$b" "$last" >"$tmp/cmp"
      ok $? "tutorial: output block $name is what the command printed"
      diag "$tmp/cmp"
    elif [ "$last_kind" = kiln ]; then
      diff "$b" "$last" >"$tmp/cmp"
      ok $? "tutorial: output block $name is what kiln printed"
      diag "$tmp/cmp"
    else
      # Python's numbers depend on the last bits of the machine's libm
      # (emcee's chain follows them): compare the lines' form, numbers
      # replaced by '#'
      form() { sed -E 's/-?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?/#/g; s/ +/ /g' "$1"; }
      form "$b" >"$tmp/form.want"
      form "$last" >"$tmp/form.got"
      diff "$tmp/form.want" "$tmp/form.got" >"$tmp/cmp"
      ok $? "tutorial: output block $name has the form of what Python printed"
      diag "$tmp/cmp"
    fi
    ;;
  *.kg)
    arg=$(cat "$b.arg" 2>/dev/null)
    case "$arg" in
      *" excerpt")
        f=${arg% excerpt}
        bad=0
        while IFS= read -r l; do
          case "$l" in ''|*'  ...') continue ;; esac
          grep -Fxq -- "$l" "$work/$f" || { echo "# not in $f: $l"; bad=1; }
        done <"$b"
        ok $bad "tutorial: block $name is an excerpt of $f" ;;
      ?*)
        cmp -s "$b" "$work/$arg"
        ok $? "tutorial: block $name is $arg" ;;
    esac
    ;;
  esac
done

# --- independent checks ---------------------------------------------------
cd "$work" || exit 1
# the backends give the same outputs, bit for bit
ref=
for b in interp tcc llvm; do
  if [ ! -f "$build/backends/$b/.libs/$b.so" ]; then
    skip "$b backend not built"
    continue
  fi
  "$kiln_abs" run examples/logistic.kg -i alpha=0.3 -i 'beta=[-1.3, 1.9]' --backend $b --quiet 2>&1 |
    grep -E '^[a-z_]+ = ' >"$tmp/be.$b"
  if [ -z "$ref" ]; then
    ref=$b
    [ -s "$tmp/be.$b" ]; ok $? "logistic.kg on $b prints its outputs"
  else
    cmp -s "$tmp/be.$ref" "$tmp/be.$b"; ok $? "logistic.kg: $b's outputs are $ref's, to the bit"
  fi
done

if [ $has_numpy = 1 ]; then
  has_model=1
  "$python" - "$kiln_abs" "$has_model" <<'EOF' >"$tmp/np.out" 2>&1
"""Both models' log densities and gradients against numpy."""
import json, re, subprocess, sys
import numpy as np
kiln, has_model = sys.argv[1], sys.argv[2] == "1"
d = np.genfromtxt("examples/data/radon.csv", delimiter=",", names=True,
                  dtype=None, encoding="utf-8")
y = (d["log_radon"] >= np.log(4.0)).astype(float)
X = np.column_stack([np.ones(len(y)), d["floor"], np.log(d["uppm"])])
county = d["county_code"].astype(int)
def norm(x, m, s):
    return np.sum(-0.5 * ((x - m) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi))
def lik(eta):
    return np.sum(np.where(y == 1, -np.logaddexp(0, -eta), -np.logaddexp(0, eta)))
def run(*args):
    r = subprocess.run([kiln, *args, "--json", "--quiet"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if r.returncode:
        raise SystemExit("kiln failed: " + r.stderr)
    return {k: np.array(v["value"]) for k, v in json.loads(r.stdout)["outputs"].items()}
n = 0
def ok(cond, what):
    global n
    n += 1
    print("%sok - %s" % ("" if cond else "not ", what))
def close(a, b):
    return np.allclose(a, b, rtol=1e-10, atol=1e-10)
t = np.array([0.3, -1.3, 1.9])
o = run("run", "examples/logistic.kg", "-i", "alpha=0.3", "-i", "beta=[-1.3,1.9]")
want = lik(X @ t) + norm(t, 0, 2.5)
ok(close(o["logp"], want), "logistic.kg: logp %r, numpy %r" % (float(o["logp"]), want))
p = 1 / (1 + np.exp(-(X @ t)))
g = X.T @ (y - p) - t / 6.25
ok(close(np.r_[o["d_alpha"], o["d_beta"]], g), "logistic.kg: gradient, numpy %r" % (g,))
# the county model at a random point: the gather by county_code
rng = np.random.default_rng(5)
a_raw = rng.normal(size=85)
u = -0.7
with open("point.json", "w") as f:
    json.dump({"alpha": 0.3, "beta": [-1.3, 1.9], "sigma_county_unc": u,
               "a_raw": list(a_raw)}, f)
o = run("run", "examples/logistic_county.kg", "--inputs", "point.json")
s = np.exp(u)
want = (lik(X @ t + s * a_raw[county]) + norm(t, 0, 2.5) + norm(s, 0, 1)
        + norm(a_raw, 0, 1))
ok(close(o["logp"], want), "logistic_county.kg: logp %r, numpy %r" % (float(o["logp"]), want))
ok(close(o["a"], s * a_raw), "logistic_county.kg: tp a = sigma_county * a_raw")
def model_prints(want, what, *args):
    """kiln model ARGS exits 0 and prints want (among its numbers)"""
    r = subprocess.run([kiln, "model", *args], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    nums = [float(x) for x in re.findall(r"-?\d+\.\d+(?:e[-+]?\d+)?", r.stdout)]
    good = r.returncode == 0 and any(abs(x - want) <= 1e-9 * abs(want) for x in nums)
    ok(good, "%s, numpy %r" % (what, want))
    if not good:
        print("# " + r.stdout.replace("\n", "\n# "))
if has_model:
    # no constraint: kiln run's log density
    model_prints(lik(X @ t) + norm(t, 0, 2.5), "kiln model logistic.kg: the log density",
                 "examples/logistic.kg", "-i", "alpha=0.3", "-i", "beta=[-1.3,1.9]")
    # what a sampler sees: + the log-Jacobian of exp, u; the constrained
    # value given instead of the unconstrained one gives the same
    want = lik(X @ t) + norm(t, 0, 2.5) + norm(np.exp(u), 0, 1) + norm(np.zeros(85), 0, 1) + u
    for arg in ("sigma_county_unc=-0.7", "sigma_county=%r" % float(np.exp(u))):
        model_prints(want, "kiln model -i %s: log density with the Jacobian" % arg,
                     "examples/logistic_county.kg", "-i", "alpha=0.3",
                     "-i", "beta=[-1.3,1.9]", "-i", arg, "-i", "a_raw=0")
else:
    for i in range(3):
        print("ok # SKIP kiln model not built yet")
EOF
  st=$?
  while IFS= read -r l; do
    case "$l" in
      "not ok - "*) n=$((n + 1)); echo "not ok $n - ${l#not ok - }"; failed=$((failed + 1)) ;;
      "ok - "*) n=$((n + 1)); echo "ok $n - ${l#ok - }" ;;
      "ok # SKIP"*) n=$((n + 1)); echo "ok $n ${l#ok }" ;;
      *) echo "# $l" ;;
    esac
  done <"$tmp/np.out"
  ok $st "the numpy checks ran to the end"
else
  skip "no numpy for $python: the independent log densities"
fi

# kiln compile leaves llvm code in an empty cache, which explain then finds
if [ -f "$build/backends/llvm/.libs/llvm.so" ]; then
  KILN_CACHE_DIR=$tmp/aot "$kiln_abs" compile examples/logistic.kg >"$tmp/aot.out" 2>&1
  ok $? "kiln compile into an empty cache"
  KILN_CACHE_DIR=$tmp/aot "$kiln_abs" explain examples/logistic.kg >"$tmp/aot.out" 2>&1
  grep -qE '^[0-9]+ .* llvm +[a-z-]+ +[0-9a-f]+ +hit' "$tmp/aot.out"
  ok $? "after it, explain shows kernels starting on llvm from the cache"
  [ $? = 0 ] || diag "$tmp/aot.out"
else
  skip "kiln compile: no llvm backend"
  skip "kiln compile: no llvm backend"
fi
# --trace-nonfinite names the file and line of the naive model's -inf
[ -f examples/logistic_naive.kg ] ||
  sed 's/bernoulli_logit_lpmf(high, eta)/bernoulli_lpmf(high, inv_logit(eta))/' \
    examples/logistic.kg >examples/logistic_naive.kg
"$kiln_abs" run examples/logistic_naive.kg -i alpha=40 -i 'beta=[0, 0]' \
  --trace-nonfinite >"$tmp/tr.out" 2>&1
grep -q 'logistic_naive\.kg:[0-9]' "$tmp/tr.out"
ok $? "--trace-nonfinite names logistic_naive.kg:LINE"
diag "$tmp/tr.out"

# --- the cheat sheet --------------------------------------------------------
sheet=$src/docs/stan-cheatsheet.md
awk -v dir="$tmp/sheet" '
  /^```/ {
    if (inblk) { inblk = 0; close(f); next }
    inblk = 1; k++; f = ""
    if ($0 ~ /^```kg/) { f = sprintf("%s/%03d.kg", dir, k); printf "" > f }
    next
  }
  inblk && f != "" { print > f }' "$sheet"
cat "$tmp"/sheet/*.kg >"$tmp/sheet.all" 2>/dev/null
nkg=0
for f in "$tmp"/sheet/*.kg; do
  [ -f "$f" ] || continue
  nkg=$((nkg + 1))
  "$kiln_abs" check "$f" >/dev/null 2>"$tmp/check.err"
  ok $? "cheat sheet: kiln check accepts block ${f##*/} ($(sed -n 's/^graph //p' "$f"))"
  [ -s "$tmp/check.err" ] && diag "$tmp/check.err"
done
[ $nkg -ge 5 ]; ok $? "cheat sheet: $nkg kiln blocks"
# the kiln column of every table: each code span occurs in a checked block
sed 's/\\|/\x01/g' "$sheet" | awk -F'|' '
  /^\|/ && $0 !~ /^\| *-/ && NF >= 4 {
    c = $3
    while (match(c, /`[^`]+`/)) { print substr(c, RSTART + 1, RLENGTH - 2); c = substr(c, RSTART + RLENGTH) }
  }' | tr '\001' '|' >"$tmp/spans"
nspan=0
bad=0
while IFS= read -r s; do
  nspan=$((nspan + 1))
  grep -Fq -- "$s" "$tmp/sheet.all" || { echo "# not in any checked block: $s"; bad=1; }
done <"$tmp/spans"
[ $nspan -ge 40 ] && [ $bad = 0 ]
ok $? "cheat sheet: the $nspan kiln code spans of its tables occur in checked blocks"

echo "1..$n"
[ $failed = 0 ]
