#!/usr/bin/env python3
"""The SmolLM2 decoder written in PyTensor (examples/smollm/decoder_pytensor.py)
in the KILN mode, against tests/decoder_ref.py (numpy), issue 29 (pytest).

On the tiny configuration (examples/smollm/tiny.json): no node is left to
PyTensor's Python VM (KilnFallbackWarning is an error) and the whole step
is one kiln function; a prefill of 8 tokens and a decode of 2 more with
the cache of the first agree with the numpy reference to 1e-5 (relative
to the largest logit; keys and values too) on every backend, and so do
they with the same graph in PyTensor's Python mode (py linker); a second
process compiling the same graph gets every kernel from kiln's disk cache.
Needs PyTensor (the shared copy) and numpy; SKIPs without them.
"""
import json
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kiln_pt_common import (SRCDIR, setup_or_skip, backends_available, rebind,  # noqa: E402
                            caching_backend_or_skip, run_twice_all_hits, skip_all)

setup_or_skip()

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import pytensor  # noqa: E402

import kiln.pytensor as kp  # noqa: E402

SMOL = os.path.join(SRCDIR, "examples", "smollm")
sys.path.insert(0, SMOL)
sys.path.insert(0, os.path.join(SRCDIR, "tests"))
import decoder_pytensor as dp  # noqa: E402
try:
    import decoder_ref as ref  # noqa: E402
except ImportError:
    skip_all("no tests/decoder_ref.py")

BACKENDS = backends_available()
CFG = dp.load_config(os.path.join(SMOL, "tiny.json"))
W = dp.random_weights(CFG, seed=5)
L = CFG["num_hidden_layers"]
KVH = CFG["num_key_value_heads"]
D = CFG.get("head_dim", CFG["hidden_size"] // CFG["num_attention_heads"])
TOKENS = np.array([5, 17, 200, 3, 99, 42, 7, 1], np.int64)


@pytest.fixture(scope="module")
def step():
    if not BACKENDS:
        pytest.skip("no backend")
    ins, outs = dp.build(CFG, W)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kp.KilnFallbackWarning)
        return pytensor.function(ins, outs, mode=kp.mode(backend=BACKENDS[0]))


def close(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == np.float32, f"{what}: dtype {got.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, numpy {want.shape}"
    err = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
    assert err < 1e-5, f"{what}: relative difference {err:.2e}"


def test_one_kiln_function(step):
    kinds = [type(n.op).__name__ for n in step.maker.fgraph.toposort()]
    assert kinds == ["KilnOp"], f"nodes after linking: {kinds}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_prefill_and_decode_match_numpy(step, backend):
    rebind(step, backend)
    empty = [np.zeros((0, KVH, D), np.float32)] * (2 * L)
    r = step(TOKENS, np.int64(0), *empty)
    logits, nk, nv = ref.forward(CFG, W, TOKENS, None)
    close(r[0], logits, "prefill logits")
    for l in range(L):
        close(r[2 + 2 * l], nk[l], f"new_k_{l}")
        close(r[3 + 2 * l], nv[l], f"new_v_{l}")
    top2 = np.sort(logits)[-2:]
    if top2[1] - top2[0] > 1e-5:           # the tie rule of issue 29's tests
        assert int(r[1]) == int(np.argmax(logits))
    past = [a for l in range(L) for a in (r[2 + 2 * l], r[3 + 2 * l])]
    more = np.array([11, 250], np.int64)
    r2 = step(more, np.int64(len(TOKENS)), *past)
    logits2, nk2, _ = ref.forward(CFG, W, more, (nk, nv))
    close(r2[0], logits2, "decode logits")
    close(r2[2 + 2 * (L - 1)], nk2[L - 1], "decode new_k")
    # the decode step equals a prefill of all 10 tokens
    full, _, _ = ref.forward(CFG, W, np.concatenate([TOKENS, more]), None)
    close(r2[0], full, "decode logits vs a 10-token forward")


@pytest.fixture(scope="module")
def python_mode():
    """The same PyTensor graph in PyTensor's Python mode: the py linker
    (each node's numpy perform), no rewrites."""
    from pytensor.compile.mode import Mode
    ins, outs = dp.build(CFG, W)
    return pytensor.function(ins, outs, mode=Mode(linker="py", optimizer=None))


def close_outputs(got, want, what):
    """logits and the new keys/values to 1e-5; greedy equal unless the
    reference's top-2 logits are within 1e-5 (the tie rule)."""
    close(got[0], want[0], f"{what} logits")
    for l in range(L):
        close(got[2 + 2 * l], want[2 + 2 * l], f"{what} new_k_{l}")
        close(got[3 + 2 * l], want[3 + 2 * l], f"{what} new_v_{l}")
    top2 = np.sort(np.asarray(want[0]))[-2:]
    if top2[1] - top2[0] > 1e-5:
        assert int(got[1]) == int(want[1]), f"{what} greedy"


@pytest.mark.parametrize("backend", BACKENDS)
def test_kiln_mode_matches_python_mode(step, python_mode, backend):
    """KILN mode against PyTensor's own Python mode on the same graph: a
    prefill of 8 tokens and a decode step of 2 over the prefill's cache
    (the Python mode's rows, the same inputs for both)."""
    rebind(step, backend)
    empty = [np.zeros((0, KVH, D), np.float32)] * (2 * L)
    want = python_mode(TOKENS, np.int64(0), *empty)
    assert np.asarray(want[0]).dtype == np.float32
    close_outputs(step(TOKENS, np.int64(0), *empty), want, "prefill")
    past = [np.asarray(want[i]) for i in range(2, 2 + 2 * L)]
    more = np.array([11, 250], np.int64)
    want2 = python_mode(more, np.int64(len(TOKENS)), *past)
    close_outputs(step(more, np.int64(len(TOKENS)), *past), want2, "decode")


def test_second_process_all_cache_hits(tmp_path):
    be = caching_backend_or_skip(BACKENDS)
    code = (
        "import sys, warnings, numpy as np, pytensor\n"
        f"sys.path.insert(0, {SMOL!r})\n"
        "import decoder_pytensor as dp, kiln.pytensor as kp\n"
        "warnings.simplefilter('error', kp.KilnFallbackWarning)\n"
        f"cfg = dp.load_config({os.path.join(SMOL, 'tiny.json')!r})\n"
        "ins, outs = dp.build(cfg, dp.random_weights(cfg, seed=5))\n"
        f"f = pytensor.function(ins, outs, mode=kp.mode(backend={be!r}))\n"
        f"past = [np.zeros((0, {KVH}, {D}), np.float32)] * {2 * L}\n"
        "print(f(np.arange(6, dtype=np.int64), np.int64(0), *past)[0][:4])\n")
    err = run_twice_all_hits(code, tmp_path)
    assert err is None, err


def test_config_names_match_decoder_ref():
    """the weights' names are those decoder_ref reads (HF's)."""
    with open(os.path.join(SMOL, "tiny.json")) as f:
        assert json.load(f)["num_hidden_layers"] == L
    assert set(W) >= {"model.embed_tokens.weight", "model.norm.weight",
                      "model.layers.0.mlp.down_proj.weight"}
