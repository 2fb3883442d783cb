#!/usr/bin/env python3
"""gen_decoder.py — write a SmolLM2-shaped (Llama) decoder as kiln .kg text
with random weights in a safetensors file (issue 29; docs/decoder.md).

    gen_decoder.py --config C.json --out DIR [--seed N] [--layers L]
                   [--primitives | --composites] [--top-k-max K]
                   [--no-weights]

writes DIR/config.json (the configuration, with --layers applied),
DIR/model.kg and DIR/model.safetensors (f32, Hugging Face's tensor names:
model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ...;
matrices N(0, 0.02), norm weights 1 + N(0, 0.02); the head is tied to
the embedding, as SmolLM2's).  numpy only; the safetensors file is
written here (8-byte little-endian header length, JSON header, raw data).

The graph serves prefill and decode with a KV cache held by the caller
(plan of issue 29, decision 3).  Inputs:
    tokens: i64[T]                 the new tokens
    pos0: i64                      their first position (= t)
    u: f32, temperature: f32, top_k: i64   sampling (below)
    past_k_<l>, past_v_<l>: f32[t, KVH, D]   the cache's first t rows
Outputs:
    logits: f32[V]                 of the last new token
    new_k_<l>, new_v_<l>: f32[T, KVH, D]  rows to append to the caches
                                   (one output per layer: a stack would be
                                   a copy and a kernel whose width is L)
    greedy: i64                    argmax of logits (first index)
    sampled: i64                   the token drawn by u from the top_k
                                   (1 <= top_k <= --top-k-max, written to
                                   config.json as kiln_top_k_max) largest
                                   logits / temperature: candidates sorted
                                   descending (top_k op: ties to the lower
                                   index), c = cumsum(exp(v - v[0])), the
                                   j-th with j = #(c <= u * c[top_k-1])
Attention over past and new keys without joining them: scores against
the past and against the new keys (causal mask) are shifted by their
common maximum, and the two weighted sums and normalisers are added.
With t = 0 the past terms are empty (max of nothing is -inf, a product
over k = 0 is zeros).

--primitives writes RMSNorm, SiLU, the positions and argmax from
primitive ops (mean/sqrt/sigmoid/cumsum/where) instead of the layer
composites (rms_norm, silu, arange, argmax; docs/ops.md "Layers").
"""

import argparse
import json
import os
import struct
import sys

import numpy as np


def weight_names(cfg):
    """(name, shape) of every tensor, in Hugging Face's order."""
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    kvh = cfg["num_key_value_heads"]
    D = cfg.get("head_dim", H // nh)
    I = cfg["intermediate_size"]
    V = cfg["vocab_size"]
    out = [("model.embed_tokens.weight", (V, H))]
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        out += [(p + "self_attn.q_proj.weight", (nh * D, H)),
                (p + "self_attn.k_proj.weight", (kvh * D, H)),
                (p + "self_attn.v_proj.weight", (kvh * D, H)),
                (p + "self_attn.o_proj.weight", (H, nh * D)),
                (p + "mlp.gate_proj.weight", (I, H)),
                (p + "mlp.up_proj.weight", (I, H)),
                (p + "mlp.down_proj.weight", (H, I)),
                (p + "input_layernorm.weight", (H,)),
                (p + "post_attention_layernorm.weight", (H,))]
    out.append(("model.norm.weight", (H,)))
    return out


def kg_name(name):
    """The shared value's name: every byte outside [A-Za-z0-9_] made _
    (the binding rule of kiln_graph_bind_safetensors)."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def random_tensors(cfg, seed):
    """(name, f32 array) of every tensor, in weight_names' order, one at
    a time: matrices N(0, 0.02), norm weights 1 + N(0, 0.02), from
    numpy's default_rng(seed) (the weights of model.safetensors for
    --seed; decoder_pytensor.py's random_weights)."""
    rng = np.random.default_rng(seed)
    for name, shape in weight_names(cfg):
        w = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
        if len(shape) == 1:                 # norm weights around 1
            w += np.float32(1)
        yield name, w


def load_config(path, layers=None):
    """The configuration file ``path`` (its "_comment" dropped), with
    num_hidden_layers = ``layers`` unless None."""
    with open(path) as f:
        cfg = json.load(f)
    cfg.pop("_comment", None)
    if layers is not None:
        cfg["num_hidden_layers"] = int(layers)
    return cfg


def write_safetensors(path, cfg, seed):
    """Random f32 weights (random_tensors), written tensor by tensor (no
    second copy of the whole model in memory)."""
    names = weight_names(cfg)
    header, off = {}, 0
    for name, shape in names:
        n = int(np.prod(shape)) * 4
        header[name] = {"dtype": "F32", "shape": list(shape),
                        "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt",
                              "generator": "kiln gen_decoder.py seed %d"
                              % seed}
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)             # data 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for _, w in random_tensors(cfg, seed):
            f.write(np.ascontiguousarray(w, dtype="<f4").tobytes())
    os.replace(tmp, path)


def inv_freq(cfg, D):
    e = np.arange(0, D, 2, dtype=np.int64).astype(np.float32) / np.float32(D)
    return (np.float32(1.0) /
            (np.float32(cfg["rope_theta"]) ** e)).astype(np.float32)


def lit(x):
    """A float literal that reads back as the same f32."""
    return repr(float(np.float32(x)))


def write_kg(path, cfg, primitives, kmax):
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    kvh = cfg["num_key_value_heads"]
    D = cfg.get("head_dim", H // nh)
    G = nh // kvh
    L = cfg["num_hidden_layers"]
    V = cfg["vocab_size"]
    eps = lit(cfg["rms_norm_eps"])
    scale = lit(D ** -0.5)
    h2 = D // 2
    o = []
    w = o.append

    def rms(x, wt, axis):
        if primitives:
            ms = "mean(square(%s), axis=%d, keepdims=true)" % (x, axis)
            return ("mul(mul(%s, true_div(1.0, sqrt(add(%s, %s)))), %s)"
                    % (x, ms, eps, wt))
        return "rms_norm(%s, %s, axis=%d, eps=%s)" % (x, wt, axis, eps)

    def silu(x):
        return "mul(%s, sigmoid(%s))" % (x, x) if primitives \
            else "silu(%s)" % x

    def W(name):
        return kg_name(name)

    w("kiln 1")
    w("# SmolLM2 (Llama) decoder: %d layers, hidden %d, %d heads, %d KV "
      "heads, head_dim %d, MLP %d, vocab %d"
      % (L, H, nh, kvh, D, cfg["intermediate_size"], V))
    w("# written by examples/smollm/gen_decoder.py%s (docs/decoder.md)"
      % (" --primitives" if primitives else ""))
    w("graph smollm2")
    w("  input tokens: i64[T]")
    w("  input pos0: i64")
    w("  input u: f32")
    w("  input temperature: f32")
    w("  input top_k: i64")
    for l in range(L):
        w("  input past_k_%d: f32[t, %d, %d]" % (l, kvh, D))
        w("  input past_v_%d: f32[t, %d, %d]" % (l, kvh, D))
    for name, shape in weight_names(cfg):
        w("  shared %s: f32[%s]" % (kg_name(name),
                                     ", ".join(str(s) for s in shape)))
    w("  const inv_freq: f32[%d] = [%s]"
      % (h2, ", ".join(lit(x) for x in inv_freq(cfg, D))))
    w("  # positions pos0 .. pos0+T-1 and the rotary tables")
    if primitives:
        w("  ar = sub(cumsum(fill(tokens, 1), axis=0), 1)")
    else:
        w("  ar = arange(shape=[T])")
    w("  ang = mul(expand_dims(cast(add(ar, pos0), dtype=f32), axis=1), "
      "inv_freq)")
    w("  emb = join(1, ang, ang)")
    w("  rc = cos(emb)")
    w("  rs = sin(emb)")
    w("  rc4 = expand_dims(rc, axis=[1, 2])")
    w("  rs4 = expand_dims(rs, axis=[1, 2])")
    w("  rc3 = expand_dims(rc, axis=1)")
    w("  rs3 = expand_dims(rs, axis=1)")
    w("  causal = ge(expand_dims(ar, axis=1), expand_dims(ar, axis=0))")
    w("  h = take(%s, tokens, axis=0)" % W("model.embed_tokens.weight"))
    h = "h"
    for l in range(L):
        p = "model.layers.%d." % l
        P = "l%d_" % l
        w("  # layer %d" % l)
        w("  %sn1 = %s" % (P, rms(h, W(p + "input_layernorm.weight"), 1)))
        for nm, shp in (("q", "[T, %d, %d, %d]" % (kvh, G, D)),
                        ("k", "[T, %d, %d]" % (kvh, D)),
                        ("v", "[T, %d, %d]" % (kvh, D))):
            w("  %s%s = reshape(dot(%sn1, transpose(%s)), shape=%s)"
              % (P, nm, P, W(p + "self_attn.%s_proj.weight" % nm), shp))
        w("  %sqr = add(mul(%sq, rc4), mul(join(3, neg(%sq[:, :, :, %d:]), "
          "%sq[:, :, :, :%d]), rs4))" % (P, P, P, h2, P, h2))
        w("  %skr = add(mul(%sk, rc3), mul(join(2, neg(%sk[:, :, %d:]), "
          "%sk[:, :, :%d]), rs3))" % (P, P, P, h2, P, h2))
        w("  %sqh = transpose(%sqr, axes=[1, 2, 0, 3])" % (P, P))
        w("  %ssp = mul(matmul(%sqh, expand_dims(transpose(past_k_%d, "
          "axes=[1, 2, 0]), axis=1)), %s)" % (P, P, l, scale))
        w("  %ssn = where(causal, mul(matmul(%sqh, expand_dims(transpose("
          "%skr, axes=[1, 2, 0]), axis=1)), %s), -inf)" % (P, P, P, scale))
        w("  %sm = maximum(max(%ssp, axis=3, keepdims=true), max(%ssn, "
          "axis=3, keepdims=true))" % (P, P, P))
        w("  %sep = exp(sub(%ssp, %sm))" % (P, P, P))
        w("  %sen = exp(sub(%ssn, %sm))" % (P, P, P))
        w("  %snum = add(matmul(%sep, expand_dims(transpose(past_v_%d, "
          "axes=[1, 0, 2]), axis=1)), matmul(%sen, expand_dims(transpose("
          "%sv, axes=[1, 0, 2]), axis=1)))" % (P, P, l, P, P))
        w("  %sden = add(sum(%sep, axis=3, keepdims=true), sum(%sen, "
          "axis=3, keepdims=true))" % (P, P, P))
        w("  %satt = reshape(transpose(true_div(%snum, %sden), axes=[2, 0, "
          "1, 3]), shape=[T, %d])" % (P, P, P, nh * D))
        w("  %sh = add(%s, dot(%satt, transpose(%s)))"
          % (P, h, P, W(p + "self_attn.o_proj.weight")))
        w("  %sn2 = %s" % (P, rms(P + "h",
                                  W(p + "post_attention_layernorm.weight"),
                                  1)))
        w("  %sg = dot(%sn2, transpose(%s))"
          % (P, P, W(p + "mlp.gate_proj.weight")))
        w("  %su = dot(%sn2, transpose(%s))"
          % (P, P, W(p + "mlp.up_proj.weight")))
        w("  %sx = add(%sh, dot(mul(%s, %su), transpose(%s)))"
          % (P, P, silu(P + "g"), P, W(p + "mlp.down_proj.weight")))
        h = P + "x"
    w("  # the last position: final norm, tied head")
    w("  hn = %s" % rms(h + "[-1]", W("model.norm.weight"), 0))
    w("  output logits = dot(hn, transpose(%s))"
      % W("model.embed_tokens.weight"))
    for l in range(L):
        w("  output new_k_%d = l%d_kr" % (l, l))
        w("  output new_v_%d = l%d_v" % (l, l))
    if primitives:
        w("  iv = sub(cumsum(cast(fill(logits, 1), dtype=i64), axis=0), 1)")
        w("  output greedy = min(where(eq(logits, max(logits)), iv, %d))"
          % V)
    else:
        w("  output greedy = argmax(logits, axis=0)")
    w("  # top-k sampling with the caller's uniform u: the first top_k (at "
      "most %d)" % kmax)
    w("  # of the sorted logits/temperature, j = #(cumsum(exp(v - v[0])) "
      "<= u * total)")
    w("  tk = top_k(true_div(logits, temperature), k=%d)" % kmax)
    w("  ti = result(tk, index=1)")
    w("  tj = sub(cumsum(fill(ti, 1), axis=0), 1)")
    w("  te = where(lt(tj, top_k), exp(sub(tk, tk[0])), 0.0)")
    w("  tc = cumsum(te, axis=0)")
    w("  tn = sum(cast(le(tc, mul(u, tc[-1])), dtype=i64))")
    w("  output sampled = take(ti, minimum(tn, sub(top_k, 1)), axis=0)")
    w("end")
    text = "\n".join(o) + "\n"
    with open(path, "w") as f:
        f.write(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--primitives", dest="primitives", action="store_true",
                    default=False,
                    help="primitive ops instead of rms_norm/silu/arange/"
                    "argmax")
    ap.add_argument("--composites", dest="primitives",
                    action="store_false",
                    help="the layer composites rms_norm, silu, arange, "
                    "argmax (the default)")
    ap.add_argument("--top-k-max", type=int, default=50,
                    help="the largest top_k the graph samples from "
                    "(default 50)")
    ap.add_argument("--no-weights", action="store_true",
                    help="write config.json and model.kg only")
    a = ap.parse_args(argv)
    cfg = load_config(a.config, a.layers)
    os.makedirs(a.out, exist_ok=True)
    kmax = min(a.top_k_max, cfg["vocab_size"])
    cfg["kiln_top_k_max"] = kmax
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")
    write_kg(os.path.join(a.out, "model.kg"), cfg, a.primitives, kmax)
    if not a.no_weights:
        write_safetensors(os.path.join(a.out, "model.safetensors"), cfg,
                          a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
