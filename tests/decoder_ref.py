"""decoder_ref.py — a numpy reference of the SmolLM2 (Llama) decoder that
examples/smollm/gen_decoder.py writes as .kg, for the tests of issue 29.

Independent of kiln: numpy only (its own small safetensors reader).  The
architecture is Hugging Face's LlamaForCausalLM (transformers'
modeling_llama.py, read for the formulas): RMSNorm
(x * 1/sqrt(mean(x^2) + eps) * w), rotary embeddings on q and k
(inv_freq = 1/theta^(2i/D), cos/sin of cat(freqs, freqs), rotate_half),
grouped-query attention (query head h reads KV head h // G), SiLU MLP
down(silu(gate(x)) * up(x)), residuals, final norm, tied head.  Computed
in f32 throughout, as the graph is.

Entry points (fixed by the plan of issue 29):
  load(dir) -> (cfg, W)                   DIR/config.json + DIR/model.safetensors
  forward(cfg, W, tokens, past, all_logits=False) -> (logits, new_k, new_v)
      tokens: int [T]; past: None or (k, v) of shape [L, t, KVH, D];
      logits: [V] of the last position ([T, V] with all_logits);
      new_k, new_v: [L, T, KVH, D] (after RoPE, as the cache holds them)
  sample(logits, top_k, temperature, u) -> (token, gap)
  generate(cfg, W, prompt, n, top_k, temperature, uniforms) -> (tokens, gaps)

Sampling rule (the same as kiln.decoder and `kiln generate`): greedy when
top_k <= 1 or temperature <= 0 (argmax, first index); else the top_k
logits divided by temperature, sorted descending (ties: lower index
first), e = exp(v - v[0]), c = cumsum(e) in f32, the j-th candidate with
j = number of c[i] <= u * c[k-1] (at most k-1).  `gap` is what the
tie rule of the tests looks at: for greedy the gap between the two largest
logits, for sampling the distance of u * c[k-1] to the nearest c[i].
"""

import json
import os
import struct

import numpy as np

_ST_DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64,
              "I32": np.int32, "BOOL": np.bool_}


def read_safetensors(path):
    """{name: array} of a safetensors file (F32/F64/I64/I32/BOOL)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        dt = np.dtype(_ST_DTYPES[e["dtype"]])
        out[name] = np.frombuffer(raw[base + b:base + end],
                                  dtype=dt).reshape(e["shape"])
    return out


def load(d):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    return cfg, read_safetensors(os.path.join(d, "model.safetensors"))


def dims(cfg):
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    D = cfg.get("head_dim", H // nh)
    return H, nh, cfg["num_key_value_heads"], D


def inv_freq(cfg):
    """HF's rotary frequencies, f32: 1 / theta^(arange(0, D, 2) / D)."""
    D = dims(cfg)[3]
    e = np.arange(0, D, 2, dtype=np.int64).astype(np.float32) / np.float32(D)
    return (np.float32(1.0) /
            (np.float32(cfg["rope_theta"]) ** e)).astype(np.float32)


def _rms(x, w, eps):
    ms = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32)
    return (x * (np.float32(1) / np.sqrt(ms + np.float32(eps)))) * w


def _rope(x, cos, sin):
    h = x.shape[-1] // 2
    rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
    return x * cos + rot * sin


def forward(cfg, W, tokens, past=None, all_logits=False):
    f32 = np.float32
    H, nh, kvh, D = dims(cfg)
    G = nh // kvh
    L = cfg["num_hidden_layers"]
    eps = cfg["rms_norm_eps"]
    tokens = np.asarray(tokens, dtype=np.int64)
    T = tokens.shape[0]
    t = 0 if past is None else past[0].shape[1]
    E = W["model.embed_tokens.weight"]
    x = E[tokens]                                        # [T, H]
    pos = (np.arange(T, dtype=np.int64) + t).astype(f32)
    ang = pos[:, None] * inv_freq(cfg)[None, :]          # [T, D/2]
    emb = np.concatenate([ang, ang], axis=-1)
    cos, sin = np.cos(emb).astype(f32), np.sin(emb).astype(f32)
    scale = f32(D ** -0.5)
    causal = np.tril(np.ones((T, T), dtype=bool))
    new_k = np.zeros((L, T, kvh, D), f32)
    new_v = np.zeros((L, T, kvh, D), f32)
    for l in range(L):
        p = "model.layers.%d." % l
        hn = _rms(x, W[p + "input_layernorm.weight"], eps)
        q = (hn @ W[p + "self_attn.q_proj.weight"].T).reshape(T, kvh, G, D)
        k = (hn @ W[p + "self_attn.k_proj.weight"].T).reshape(T, kvh, D)
        v = (hn @ W[p + "self_attn.v_proj.weight"].T).reshape(T, kvh, D)
        q = _rope(q, cos[:, None, None, :], sin[:, None, None, :])
        k = _rope(k, cos[:, None, :], sin[:, None, :])
        new_k[l], new_v[l] = k, v
        if past is not None:
            k = np.concatenate([past[0][l], k], axis=0)   # [t+T, KVH, D]
            v = np.concatenate([past[1][l], v], axis=0)
        qh = q.transpose(1, 2, 0, 3)                     # [KVH, G, T, D]
        kh = k.transpose(1, 2, 0)[:, None]               # [KVH, 1, D, t+T]
        vh = v.transpose(1, 0, 2)[:, None]               # [KVH, 1, t+T, D]
        s = np.matmul(qh, kh) * scale                    # [KVH, G, T, t+T]
        mask = np.concatenate([np.ones((T, t), bool), causal], axis=1)
        s = np.where(mask, s, f32(-np.inf))
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        a = np.matmul(s, vh) / s.sum(axis=-1, keepdims=True)
        a = a.transpose(2, 0, 1, 3).reshape(T, nh * D)
        x = x + a @ W[p + "self_attn.o_proj.weight"].T
        hn = _rms(x, W[p + "post_attention_layernorm.weight"], eps)
        gt = hn @ W[p + "mlp.gate_proj.weight"].T
        up = hn @ W[p + "mlp.up_proj.weight"].T
        act = gt * (f32(1) / (f32(1) + np.exp(-gt))) * up
        x = x + act @ W[p + "mlp.down_proj.weight"].T
    if not all_logits:
        x = x[-1]
    hn = _rms(x, W["model.norm.weight"], eps)
    return (hn @ E.T).astype(f32), new_k, new_v


def sample(logits, top_k, temperature, u):
    """(token, gap) by the rule in the module's docstring."""
    logits = np.asarray(logits, np.float32)
    if not top_k or top_k <= 1 or temperature <= 0:
        tok = int(np.argmax(logits))
        s = np.sort(logits)
        return tok, float(s[-1] - s[-2]) if s.size > 1 else np.inf
    k = min(int(top_k), logits.size)
    v = logits / np.float32(temperature)
    idx = np.argsort(-v, kind="stable")[:k]
    e = np.exp(v[idx] - v[idx[0]])
    c = np.cumsum(e, dtype=np.float32)
    thr = np.float32(u) * c[-1]
    j = min(int(np.sum(c <= thr)), k - 1)
    return int(idx[j]), float(np.min(np.abs(c - thr)))


def generate(cfg, W, prompt, n, top_k=None, temperature=1.0,
             uniforms=None):
    """Tokens after the prompt (n of them) with a KV cache, and the gap of
    each choice (see sample).  uniforms[i] is the u of the i-th token."""
    L = cfg["num_hidden_layers"]
    _, _, kvh, D = dims(cfg)
    past = (np.zeros((L, 0, kvh, D), np.float32),
            np.zeros((L, 0, kvh, D), np.float32))
    out, gaps = [], []
    cur = list(prompt)
    for i in range(n):
        logits, nk, nv = forward(cfg, W, cur, past)
        past = (np.concatenate([past[0], nk], axis=1),
                np.concatenate([past[1], nv], axis=1))
        u = 0.0 if uniforms is None else uniforms[i]
        tok, gap = sample(logits, top_k, temperature, u)
        out.append(tok)
        gaps.append(gap)
        cur = [tok]
    return out, gaps
