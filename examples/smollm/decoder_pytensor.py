#!/usr/bin/python3
"""decoder_pytensor.py — the SmolLM2 (Llama) decoder of gen_decoder.py
written in PyTensor, for the KILN mode (issue 29, docs/pytensor.md).

    import decoder_pytensor as dp
    ins, outs = dp.build(cfg, W)          # W: {HF name: f32 array}
    f = pytensor.function(ins, outs, mode="KILN")
    logits, greedy, *new_kv = f(tokens, pos0, *past)

The same math as tests/decoder_ref.py (Hugging Face's LlamaForCausalLM:
RMSNorm, rotary embeddings with rotate_half, grouped-query attention,
SiLU MLP, residuals, final norm, tied head), in f32, one prefill/decode
step with a caller-held KV cache, as the .kg of gen_decoder.py:

  inputs   tokens: int64[T]; pos0: int64 (their first position = t);
           per layer l: past_k_l, past_v_l: float32[t, KVH, D]
  outputs  logits: float32[V] of the last token; greedy: int64 (argmax,
           first index); per layer new_k_l, new_v_l: float32[T, KVH, D]
           (keys after RoPE, the rows to append to the caches)

The weights are pytensor.shared (borrow=True, static shapes), named as
gen_decoder.py names the .kg shared values (HF name, bytes outside
[A-Za-z0-9_] made _); the KILN mode passes them to kiln as inputs,
without a copy.  Attention: scores of the new queries against the past
and new keys joined (GQA by broadcasting the KV heads in matmul), the
causal mask key position <= query position (the past's keys at 0..t-1,
the new ones at pos0 + 0..T-1), softmax, weighted sum.

Run as a script it reports PyTensor's own compile time (graph build,
rewrites, conversion to .kg; wall and process CPU time) and
pytensor.function's in the KILN mode (the same plus kiln's compile):

    decoder_pytensor.py [--config examples/smollm/config.json] [--layers L]
"""
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:        # gen_decoder.py, beside this file
    sys.path.insert(0, HERE)
# the weights' names, shapes and values and the configuration's reading
# are gen_decoder.py's (one list for the .kg and this graph)
from gen_decoder import (weight_names, kg_name, random_tensors,  # noqa: E402,F401
                         load_config)


def random_weights(cfg, seed=0):
    """{HF name: f32 array}: gen_decoder.py's weights for ``seed`` (those
    of its model.safetensors for --seed)."""
    return dict(random_tensors(cfg, seed))


def build(cfg, W):
    """(inputs, outputs) of one prefill/decode step (see the docstring)."""
    import pytensor
    import pytensor.tensor as pt

    f32 = np.float32
    H, nh, kvh = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim", H // nh)
    G, L = nh // kvh, cfg["num_hidden_layers"]
    eps = pt.constant(f32(cfg["rms_norm_eps"]))
    e = np.arange(0, D, 2, dtype=np.int64).astype(f32) / f32(D)
    inv_freq = pt.constant((f32(1.0) / (f32(cfg["rope_theta"]) ** e)).astype(f32))
    scale = pt.constant(f32(D ** -0.5))
    one = pt.constant(f32(1.0))

    def shared(name):
        a = W[name]
        return pytensor.shared(a, name=kg_name(name), borrow=True, shape=a.shape)

    def rms(x, w):
        ms = pt.mean(x * x, axis=-1, keepdims=True)
        return x * (one / pt.sqrt(ms + eps)) * w

    def rope(x, cos, sin):
        h = D // 2
        return x * cos + pt.concatenate([-x[..., h:], x[..., :h]], axis=-1) * sin

    def linear(x, w):                      # x @ w.T, w [out, in] (HF's layout)
        return pt.dot(x, w.T)

    tokens = pt.tensor("tokens", dtype="int64", shape=(None,))
    pos0 = pt.scalar("pos0", dtype="int64")
    past = [(pt.tensor(f"past_k_{l}", dtype="float32", shape=(None, kvh, D)),
             pt.tensor(f"past_v_{l}", dtype="float32", shape=(None, kvh, D)))
            for l in range(L)]
    E = shared("model.embed_tokens.weight")
    x = E[tokens]                                              # [T, H]
    qpos = pos0 + pt.arange(tokens.shape[0])                   # [T]
    ang = pt.cast(qpos, "float32")[:, None] * inv_freq[None, :]
    emb = pt.concatenate([ang, ang], axis=-1)                  # [T, D]
    cos, sin = pt.cos(emb), pt.sin(emb)
    new = []
    for l in range(L):
        p = "model.layers.%d." % l
        hn = rms(x, shared(p + "input_layernorm.weight"))
        q = linear(hn, shared(p + "self_attn.q_proj.weight")).reshape((-1, kvh, G, D))
        k = linear(hn, shared(p + "self_attn.k_proj.weight")).reshape((-1, kvh, D))
        v = linear(hn, shared(p + "self_attn.v_proj.weight")).reshape((-1, kvh, D))
        q = rope(q, cos[:, None, None, :], sin[:, None, None, :])
        k = rope(k, cos[:, None, :], sin[:, None, :])
        new += [k, v]
        kk = pt.concatenate([past[l][0], k], axis=0)          # [S, KVH, D]
        vv = pt.concatenate([past[l][1], v], axis=0)
        qh = q.dimshuffle(1, 2, 0, 3)                          # [KVH, G, T, D]
        kh = kk.dimshuffle(1, "x", 2, 0)                       # [KVH, 1, D, S]
        vh = vv.dimshuffle(1, "x", 0, 2)                       # [KVH, 1, S, D]
        s = pt.matmul(qh, kh) * scale                          # [KVH, G, T, S]
        kpos = pt.concatenate([pt.arange(past[l][0].shape[0]), qpos])  # [S]
        mask = pt.le(kpos[None, :], qpos[:, None])             # [T, S]
        s = pt.where(mask, s, pt.constant(f32(-np.inf)))
        a = pt.matmul(pt.special.softmax(s, axis=-1), vh)      # [KVH, G, T, D]
        a = a.dimshuffle(2, 0, 1, 3).reshape((-1, nh * D))
        x = x + linear(a, shared(p + "self_attn.o_proj.weight"))
        hn = rms(x, shared(p + "post_attention_layernorm.weight"))
        gt = linear(hn, shared(p + "mlp.gate_proj.weight"))
        up = linear(hn, shared(p + "mlp.up_proj.weight"))
        x = x + linear(gt * pt.sigmoid(gt) * up, shared(p + "mlp.down_proj.weight"))
    hn = rms(x[-1], shared("model.norm.weight"))
    logits = pt.dot(E, hn)                                     # the tied head
    ins = [tokens, pos0] + [t for kv in past for t in kv]
    return ins, [logits, pt.argmax(logits)] + new


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=os.path.join(HERE, "config.json"))
    ap.add_argument("--layers", type=int)
    ap.add_argument("--backend")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    import pytensor
    from pytensor.graph.fg import FunctionGraph
    import kiln.pytensor as kp
    t_imp = time.perf_counter()
    cfg = load_config(args.config, args.layers)
    W = random_weights(cfg)
    t_w = time.perf_counter()
    ins, outs = build(cfg, W)
    t_b = time.perf_counter()
    # PyTensor's rewrites (the KILN mode's) and the conversion alone
    from pytensor.graph.basic import graph_inputs
    from pytensor.compile.sharedvalue import SharedVariable
    shared = [v for v in graph_inputs(outs) if isinstance(v, SharedVariable)]
    fg = FunctionGraph(ins + shared, outs, clone=True)
    c_b = time.process_time()
    kp.optdb.query(kp.KILN.provided_optimizer).rewrite(fg)
    t_rw, c_rw = time.perf_counter(), time.process_time()
    try:
        kg_bytes = f"{len(kp.fgraph_to_kg(fg).text)} bytes"
    except kp.Unsupported as e:          # an op this libkiln lacks
        kg_bytes = f"not whole: {e}"
    t_kg = time.perf_counter()
    c_kg = time.process_time()
    f = pytensor.function(ins, outs, mode=kp.mode(backend=args.backend))
    t_f, c_f = time.perf_counter(), time.process_time()
    H = cfg["hidden_size"]
    kvh = cfg["num_key_value_heads"]
    D = cfg.get("head_dim", H // cfg["num_attention_heads"])
    past = [np.zeros((0, kvh, D), np.float32)] * (2 * cfg["num_hidden_layers"])
    r = f(np.arange(8, dtype=np.int64), np.int64(0), *past)
    t_r = time.perf_counter()
    print(f"{cfg['num_hidden_layers']} layers: imports {t_imp - t0:.2f} s, random weights "
          f"{t_w - t_imp:.2f} s, graph build {t_b - t_w:.2f} s, PyTensor rewrites "
          f"{t_rw - t_b:.2f} s (CPU {c_rw - c_b:.2f} s), conversion to .kg {t_kg - t_rw:.2f} s ({kg_bytes}); "
          f"pytensor.function(mode=KILN) {t_f - t_kg:.2f} s (CPU {c_f - c_kg:.2f} s; rewrites + "
          f"conversion + kiln compile); first call (8 tokens) {t_r - t_f:.2f} s; "
          f"greedy token {int(r[1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
