"""The SmolLM2-shaped decoder of issue 29 (examples/smollm/gen_decoder.py,
kiln.decoder) on the tiny configuration, under every backend, against the
numpy reference tests/decoder_ref.py: the forward of 8 tokens, decoding
token by token with the KV cache against the full forward at every
position, greedy and top-k generation token for token, and the kernel
cache shared between a 2-layer and a 4-layer model."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
from kiln import decoder as kd
from kiln_testutil import SRC, backends

sys.path.insert(0, os.path.join(SRC, "tests"))
import decoder_ref as R  # noqa: E402

GEN = os.path.join(SRC, "examples", "smollm", "gen_decoder.py")
TINY = os.path.join(SRC, "examples", "smollm", "tiny.json")
TOKENS = [3, 17, 250, 9, 4, 100, 42, 7]


def gen(out, layers=None, seed=1, extra=()):
    cmd = [sys.executable, GEN, "--config", TINY, "--out", str(out),
           "--seed", str(seed)] + list(extra)
    if layers:
        cmd += ["--layers", str(layers)]
    subprocess.run(cmd, check=True)
    return str(out)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = gen(tmp_path_factory.mktemp("tiny"))
    return (d,) + R.load(d)


def rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def decoder(d, backend, tmp):
    dec = kd.Decoder(d, backend=backend, tiers=False, cache=str(tmp))
    used = set(dec.fn.kernel_backends)
    assert used <= {backend, "host_topk"}, used  # no fallback
    return dec


@pytest.mark.parametrize("style", ["composites", "primitives"])
@pytest.mark.parametrize("backend", backends())
def test_forward_8_tokens(tiny, backend, style, tmp_path):
    """The forward with t = 0, written with the layer composites (the
    default) and with --primitives."""
    d, cfg, W = tiny
    if style == "primitives":
        d = gen(tmp_path / "prim", extra=["--primitives"])
    dec = decoder(d, backend, tmp_path)
    logits, greedy, _ = dec.step(TOKENS)
    ref, rk, rv = R.forward(cfg, W, TOKENS, None)
    assert logits.dtype == np.float32 and logits.shape == (256,)
    assert rel(logits, ref) < 1e-5
    assert rel(dec._k[:, :8], rk) < 1e-5 and rel(dec._v[:, :8], rv) < 1e-5
    assert greedy == int(np.argmax(logits))


@pytest.mark.parametrize("backend", backends())
def test_decode_matches_full_forward(tiny, backend, tmp_path):
    """16 tokens one by one through the cache == the logits of one
    forward over all 16 at each position; then a prefill of 5 and 11
    single steps the same."""
    d, cfg, W = tiny
    toks = TOKENS + [8, 9, 10, 11, 200, 201, 5, 6]
    full = R.forward(cfg, W, toks, None, all_logits=True)[0]
    dec = decoder(d, backend, tmp_path)
    for i, t in enumerate(toks):
        lg, _, _ = dec.step([t])
        assert rel(lg, full[i]) < 1e-5, i
    dec.reset()
    lg, _, _ = dec.step(toks[:5])
    assert rel(lg, full[4]) < 1e-5
    for i in range(5, 16):
        lg, _, _ = dec.step([toks[i]])
        assert rel(lg, full[i]) < 1e-5, i


def check_tokens(got, ref, gaps, what):
    """Token for token, but a mismatch at a near tie (the reference's gap
    < 1e-5: f32 sums in another order may pick the other token) ends the
    comparison instead of failing (the sequences diverge after it)."""
    for i, (a, b) in enumerate(zip(got, ref)):
        if a != b:
            assert gaps[i] < 1e-5, "%s: token %d: %d != %d (gap %g)" % (
                what, i, a, b, gaps[i])
            print("%s: near tie at token %d (gap %g)" % (what, i, gaps[i]))
            return
    assert len(got) == len(ref)


@pytest.mark.parametrize("backend", backends())
def test_generate_greedy_and_top_k(tiny, backend, tmp_path):
    d, cfg, W = tiny
    dec = decoder(d, backend, tmp_path)
    prompt = [1, 2, 3, 200, 17]
    got = dec.generate(prompt, 12)
    ref, gaps = R.generate(cfg, W, prompt, 12)
    check_tokens(got, ref, gaps, "greedy")
    for seed, k in ((7, 5), (8, 5), (9, 50), (10, 80)):
        # k = 80 > the graph's kiln_top_k_max (50): sampled in Python
        us = kd.uniforms_from_seed(seed, 16)
        got = dec.generate(prompt, 16, top_k=k, temperature=0.8, seed=seed)
        ref, gaps = R.generate(cfg, W, prompt, 16, k, 0.8, us)
        check_tokens(got, ref, gaps, "top-%d seed %d" % (k, seed))
    assert dec.prefill_ms > 0 and len(dec.decode_ms) == 15


def test_uniforms_from_seed():
    """SplitMix64 (Steele, Lea & Flood 2014): the first output for seed 0
    is 0xE220A8397B1DCDAF (the published reference implementation's
    value); u is its top 24 bits over 2^24."""
    u = kd.uniforms_from_seed(0, 3)
    assert u[0] == np.float32((0xE220A8397B1DCDAF >> 40) / 2.0 ** 24)
    assert u.dtype == np.float32 and np.all((u >= 0) & (u < 1))


@pytest.mark.parametrize("backend", backends())
def test_sampled_in_graph(tiny, backend, tmp_path):
    """The graph's `sampled` output (top_k op, softmax weights, cumsum,
    u) equals the reference's choice from the graph's own logits, over
    many u, k and temperatures (or the reference's gap is a near tie)."""
    d, cfg, W = tiny
    dec = decoder(d, backend, tmp_path)
    rng = np.random.default_rng(11)
    for i in range(40):
        dec.reset()
        u = np.float32(rng.random())
        k = int(rng.integers(1, 51))
        temp = float(rng.choice([0.3, 0.8, 1.0, 2.5]))
        lg, greedy, got = dec.step(TOKENS[:1 + i % 8], u, temp, k)
        want, gap = R.sample(lg, k, temp, u)
        assert got == want or gap < 1e-5, (i, k, temp, u, got, want, gap)
        assert greedy == int(np.argmax(lg))


def test_sample_rule():
    """kiln.decoder's sampling rule equals the reference's (ties to the
    lower index, u picks along the cumulated top-k weights)."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        lg = rng.normal(size=32).astype(np.float32)
        lg[5] = lg[9]                       # a tie
        u = np.float32(rng.random())
        for k, temp in ((1, 1.0), (5, 0.8), (32, 2.0)):
            assert kd.sample(lg, k, temp, u) == R.sample(lg, k, temp, u)[0]


def _cache_counts(d):
    lib = os.environ.get("KILN_LIBRARY", "")
    cli = os.path.join(os.path.dirname(os.path.dirname(lib)), "tools", "kiln")
    if not os.access(cli, os.X_OK):
        pytest.skip("no kiln CLI beside $KILN_LIBRARY")
    out = subprocess.run([cli, "cache", "stats"],
                         env=dict(os.environ, KILN_CACHE_DIR=d),
                         capture_output=True, text=True).stdout
    got = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] in ("hits", "misses"):
            got[parts[0]] = int(parts[1])
    return got.get("hits", 0), got.get("misses", 0)


@pytest.mark.parametrize("backend", [b for b in backends() if b != "interp"])
def test_four_layers_hit_the_two_layer_cache(backend, tmp_path):
    """Layers are identical kernels: a cache filled by the 2-layer model
    serves every kernel of the 4-layer one (no miss)."""
    cache = str(tmp_path / "cache")
    d2 = gen(tmp_path / "l2", layers=2, extra=["--no-weights"])
    d4 = gen(tmp_path / "l4", layers=4, extra=["--no-weights"])
    f2 = kiln.compile(kiln.Graph.parse_file(os.path.join(d2, "model.kg")),
                      backend=backend, tiers=False, cache=cache)
    hits0, miss0 = _cache_counts(cache)
    assert miss0 > 0
    f4 = kiln.compile(kiln.Graph.parse_file(os.path.join(d4, "model.kg")),
                      backend=backend, tiers=False, cache=cache)
    hits1, miss1 = _cache_counts(cache)
    assert miss1 == miss0, "the 4-layer model compiled %d new kernels" % (
        miss1 - miss0)
    assert hits1 > hits0
    del f2, f4


def test_bad_tokens_and_uniforms(tiny, tmp_path):
    """A token outside the vocabulary is refused by name (take would wrap
    -1 to the last row); too few uniforms and a negative max_new say so."""
    d = decoder(tiny[0], "interp", tmp_path)
    for toks in ([-1, 2], [1, d.vocab]):
        with pytest.raises(kiln.KilnError, match="outside the vocabulary"):
            d.step(toks)
    with pytest.raises(kiln.KilnError, match="uniforms for 4 new tokens"):
        d.generate([1, 2], 4, top_k=3, uniforms=[0.5, 0.5])
    with pytest.raises(kiln.KilnError, match="max_new"):
        d.generate([1, 2], -1)
    assert len(d.generate([1, 2], 2)) == 2


def test_bad_temperature(tiny, tmp_path):
    """Negative, non-finite and tiny temperatures (logits / 1e-40
    overflows f32: the attack's F10 drew "5 2 2 0" where greedy gives
    one token repeated) are refused in step and generate."""
    d = decoder(tiny[0], "interp", tmp_path)
    for t in (-1.0, float("inf"), float("nan"), 1e39):
        with pytest.raises(kiln.KilnError, match="finite f32 value >= 0"):
            d.generate([7, 8, 9], 4, top_k=5, temperature=t)
        with pytest.raises(kiln.KilnError, match="finite f32 value >= 0"):
            d.step([7], 0.5, t, 5)
    with pytest.raises(kiln.KilnError, match="below 1e-30"):
        d.generate([7, 8, 9], 4, top_k=5, temperature=1e-40)
    with pytest.raises(kiln.KilnError, match="below 1e-30"):
        d.step([7], 0.5, 1e-40, 5)
    greedy = d.generate([7, 8, 9], 4)
    assert d.generate([7, 8, 9], 4, top_k=5, temperature=0) == greedy
    assert len(d.generate([7, 8, 9], 4, top_k=5, temperature=1e-30)) == 4


def test_weights_bound_by_the_c_reader(tmp_path):
    """kiln.decoder binds the weights with Graph.bind_safetensors (the C
    reader, in place) and has no Python safetensors reader: a file
    lacking a tensor of the graph is refused by the C reader, naming the
    tensor."""
    assert not hasattr(kd, "read_safetensors")
    assert "read_safetensors" not in kd.__all__
    one = gen(tmp_path / "one", layers=1)
    two = gen(tmp_path / "two", layers=2, extra=["--no-weights"])
    os.link(os.path.join(one, "model.safetensors"),
            os.path.join(two, "model.safetensors"))
    with pytest.raises(kiln.KilnError, match="model_layers_1_"):
        kd.Decoder(two, backend="interp", tiers=False, cache=str(tmp_path))
    d = kd.Decoder(one, backend="interp", tiers=False, cache=str(tmp_path))
    assert not hasattr(d, "_weights")
    assert set(d.fn.shared_names) >= {"model_embed_tokens_weight"}


def test_pytensor_decoder_uses_gen_decoders_weights(tiny, tmp_path):
    """examples/smollm/decoder_pytensor.py takes the weights' names,
    shapes and values from gen_decoder.py (one list): its random_weights
    for a seed are the tensors gen_decoder.py writes for that seed; both
    run as scripts from another directory."""
    smol = os.path.join(SRC, "examples", "smollm")
    sys.path.insert(0, smol)
    try:
        import decoder_pytensor as dp
        import gen_decoder as gd
    finally:
        sys.path.remove(smol)
    assert dp.weight_names is gd.weight_names
    assert dp.kg_name is gd.kg_name and dp.load_config is gd.load_config
    d, cfg, W = tiny                 # gen_decoder.py --seed 1
    mine = dp.random_weights(dp.load_config(TINY), seed=1)
    assert list(mine) == list(W)
    for name, w in W.items():
        assert mine[name].dtype == np.float32
        assert np.array_equal(mine[name], w), name
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)      # neither needs kiln nor the other's dir
    for script in ("gen_decoder.py", "decoder_pytensor.py"):
        r = subprocess.run([sys.executable, os.path.join(smol, script),
                            "--help"], cwd=str(tmp_path), env=env,
                           capture_output=True, text=True)
        assert r.returncode == 0 and "usage" in r.stdout, (script, r.stderr)
