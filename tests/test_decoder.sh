#!/bin/sh
# test_decoder.sh — `kiln generate` (TAP; issue 29, docs/decoder.md) on
# the tiny decoder of examples/smollm: greedy and top-k tokens equal the
# numpy reference's (tests/decoder_ref.py, the same SplitMix64 uniforms),
# on every backend built; the timing line; the errors (a --top-k above
# the graph's, missing arguments, a model that is no decoder; a graph
# with the decoder's names but outputs of the wrong type, on every
# backend built).  SKIPs
# without /usr/bin/python3 and numpy (the generator and the reference).
top=${KILN_SRCDIR:-.}
build=${KILN_BUILDDIR:-.}
kiln="$build/tools/kiln"
python=${KILN_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0
ok() {  # ok COND-EXIT-STATUS DESCRIPTION
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
if ! [ -x "$python" ] || ! "$python" -c 'import numpy' 2>/dev/null; then
  echo "1..0 # SKIP no $python with numpy"
  exit 0
fi
unset KILN_BACKEND KILN_POLICY KILN_PASSES
export KILN_CACHE_DIR="$tmp/cache"

"$python" "$top/examples/smollm/gen_decoder.py" --config \
  "$top/examples/smollm/tiny.json" --out "$tmp/m" --seed 3 || {
  echo "1..0 # SKIP gen_decoder.py failed"; exit 0; }

# the reference's tokens, and whether a mismatch at a token is a near tie
# (gap < 1e-5): "TOKENS|GAPS"
ref() {  # ref TOPK TEMPERATURE SEED
  "$python" - "$top" "$tmp/m" "$1" "$2" "$3" <<'PY'
import sys
top, d, k, temp, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
sys.path.insert(0, top + "/tests")
import decoder_ref as R
M = (1 << 64) - 1
def uniforms(seed, n):
    s, out = seed, []
    for _ in range(n):
        s = (s + 0x9E3779B97F4A7C15) & M
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        z ^= z >> 31
        out.append((z >> 40) / float(1 << 24))
    return out
cfg, W = R.load(d)
toks, gaps = R.generate(cfg, W, [1, 2, 3, 200, 17], 12, k, temp, uniforms(seed, 12))
print(" ".join(map(str, toks)) + "|" + " ".join("%g" % g for g in gaps))
PY
}
# same COMMAND-OUTPUT REF: token for token, or the first mismatch at a
# near tie of the reference (then the rest is not compared)
same() {
  "$python" - "$1" "$2" <<'PY'
import sys
got = sys.argv[1].split()
toks, gaps = sys.argv[2].split("|")
toks, gaps = toks.split(), [float(g) for g in gaps.split()]
for i, (a, b) in enumerate(zip(got, toks)):
    if a != b:
        print("# token %d: %s != %s (gap %g)" % (i, a, b, gaps[i]))
        sys.exit(0 if gaps[i] < 1e-5 else 1)
sys.exit(0 if len(got) == len(toks) else 1)
PY
}

backends="interp"
for b in tcc llvm; do
  [ -f "$build/backends/$b/.libs/$b.so" ] && backends="$backends $b"
done
greedy=$(ref 0 1.0 0)
sampled=$(ref 5 0.8 7)
for b in $backends; do
  out=$("$kiln" generate "$tmp/m/model.kg" --weights "$tmp/m/model.safetensors" \
    --prompt 1,2,3,200,17 --max-new 12 --backend "$b" --tiers off \
    2>"$tmp/err.$b")
  ok $? "$b: kiln generate greedy runs"
  same "$out" "$greedy"; ok $? "$b: greedy tokens equal the reference's ($out)"
  grep -q "prefill 5 tokens .* ms; decode 11 tokens .* ms/token" "$tmp/err.$b"
  ok $? "$b: the timing line on stderr"
  out=$("$kiln" generate "$tmp/m/model.kg" --weights "$tmp/m/model.safetensors" \
    --prompt 1,2,3,200,17 --max-new 12 --top-k 5 --temperature 0.8 --seed 7 \
    --backend "$b" --tiers off 2>/dev/null)
  ok $? "$b: kiln generate --top-k 5 runs"
  same "$out" "$sampled"; ok $? "$b: top-k tokens equal the reference's ($out)"
done

# errors
"$kiln" generate "$tmp/m/model.kg" --weights "$tmp/m/model.safetensors" \
  --prompt 1,2 --max-new 2 --top-k 60 >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "top-k 60 is more than the 50 candidates" "$tmp/err"
ok $? "a --top-k above the graph's is refused"
"$kiln" generate "$tmp/m/model.kg" --prompt 1,2 --max-new 2 >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "are required" "$tmp/err"
ok $? "no --weights: usage error"
"$kiln" generate "$tmp/m/model.kg" --weights "$tmp/m/model.safetensors" \
  --prompt 1,x --max-new 2 >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "expected token ids" "$tmp/err"
ok $? "a bad --prompt is named"
"$kiln" generate "$tmp/m/model.kg" --weights "$tmp/m/model.safetensors" \
  --prompt 1,256 --max-new 2 >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "token 256 (position 1) is outside the vocabulary \[0, 256)" "$tmp/err"
ok $? "a prompt token outside the vocabulary is named (not take's error)"
"$kiln" generate "$tmp/m/model.kg" --weights "$tmp/m/model.safetensors" \
  --prompt 1,2 --max-new 0 >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "bad value '0' for --max-new" "$tmp/err"
ok $? "--max-new 0 is refused"
printf 'kiln 1\ngraph t\n  input x: f64\n  output y = exp(x)\nend\n' >"$tmp/t.kg"
"$python" -c "
import struct, json
h = json.dumps({}).encode(); h += b' ' * (-len(h) % 8)
open('$tmp/e.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h)"
"$kiln" generate "$tmp/t.kg" --weights "$tmp/e.safetensors" --prompt 1 \
  --max-new 1 >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "not a decoder of gen_decoder.py" "$tmp/err"
ok $? "a model that is no decoder is named"
"$kiln" generate "$tmp/m/model.kg" --weights "$tmp/m/model.safetensors" \
  --prompt 1 --max-new 9223372036854775807 >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "exceed the limit of 1048576 tokens" "$tmp/err"
ok $? "--max-new 2^63-1 is refused (prompt + max-new above 2^20)"
"$kiln" generate "$tmp/m/model.kg" --weights "$tmp/m/model.safetensors" \
  --prompt 1,2 --max-new 1048575 >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "the prompt's 2 tokens plus --max-new exceed" "$tmp/err"
ok $? "prompt + --max-new one above 2^20 is refused"
for t in -1 inf nan 1e-40 1e39; do
  "$kiln" generate "$tmp/m/model.kg" --weights "$tmp/m/model.safetensors" \
    --prompt 7,8,9 --max-new 4 --top-k 5 --temperature $t >/dev/null 2>"$tmp/err"
  [ $? = 2 ] && grep -q -e "expected a finite f32 value >= 0" \
    -e "is below 1e-30 (logits / T would overflow); use --top-k 1" \
    -e "bad value 'nan'" "$tmp/err"
  ok $? "--temperature $t is refused"
done
# a graph with the decoder's names whose outputs are not the caches' rows
# (refused when the outputs are checked after a call: on every backend)
fake() {  # fake BACKEND NEW_K GREEDY PAST_V_TYPE EXPECTED-ERROR DESCRIPTION
  printf 'kiln 1\ngraph fake\n  input tokens: i64[T]\n  input pos0: i64\n  input u: f32\n  input temperature: f32\n  input top_k: i64\n  input past_k_0: f32[t, 4, 8]\n  input past_v_0: %s\n  output greedy = %s\n  output sampled = sum(tokens)\n  output new_k_0 = %s\n  output new_v_0 = %s\nend\n' \
    "$4" "$3" "$2" "$2" >"$tmp/f.kg"
  "$kiln" generate "$tmp/f.kg" --weights "$tmp/e.safetensors" --prompt 1,2,3 \
    --max-new 3 --backend "$1" --tiers off >/dev/null 2>"$tmp/err"
  [ $? = 1 ] && grep -q "$5" "$tmp/err"
  ok $? "$1: $6"
}
for b in $backends; do
  fake "$b" 'sum(past_k_0)' 'sum(tokens)' 'f32[t, 4, 8]' \
    "output new_k_0 is f32\[\], expected f32\[3, 4, 8\]" \
    "a new_k_0 of the wrong shape is named (no overflow in the copy)"
  fake "$b" 'past_k_0' 'sum(tokens)' 'f32[t, 4, 8]' \
    "output new_k_0 is f32\[0, 4, 8\], expected f32\[3, 4, 8\]" \
    "a new_k_0 of t rows, not the new tokens', is named"
  fake "$b" 'exp(past_k_0)' 'sum(u)' 'f32[t, 4, 8]' \
    "output greedy is f32\[\], expected i64\[\]" \
    "an f32 greedy is named (not read as i64)"
  fake "$b" 'sum(past_k_0)' 'sum(tokens)' 'f64[t, 4, 8]' \
    "input past_v_0 is not f32\[t, 4, 8\] as past_k_0" \
    "a past_v_0 of another type than past_k_0 is named"
done

echo "1..$n"
[ $failed = 0 ]
