"""kiln.decoder — text generation with a KV cache over a decoder graph
written by examples/smollm/gen_decoder.py (issue 29; docs/decoder.md).

    from kiln.decoder import Decoder
    d = Decoder("DIR")                 # DIR/config.json, model.kg, model.safetensors
    tokens = d.generate([1, 2, 3], max_new=16)                  # greedy
    tokens = d.generate([1, 2, 3], 16, top_k=5, temperature=0.8, seed=7)

One compiled function serves the prefill and every decode step: its
inputs are the new tokens, their first position and, per layer, the
cache's first t rows (past_k_<l>, past_v_<l>: f32[t, KVH, D], contiguous
prefixes of the caches [L, Smax, KVH, D] this object holds, passed
without a copy); its outputs the last position's logits, the new rows
(new_k_<l>, new_v_<l>: [T, KVH, D], copied into the caches after each
call)
and the greedy token.  A decode step therefore costs one step over t
cached rows, not a forward over t tokens.

Sampling (the rule of tests/decoder_ref.py): greedy when top_k is
None/<= 1 or temperature <= 0 (the graph's `greedy`); else the top_k
logits / temperature sorted descending (ties to the lower index),
c = cumsum(exp(v - v[0])) in f32, the candidate j = #(c <= u * c[-1])
(at most k-1): the graph's `sampled` (its top_k op keeps at most
config.json's kiln_top_k_max candidates; a larger top_k is sampled here
from the logits by ``sample``).  The uniforms u come from `uniforms` or from
``uniforms_from_seed(seed, n)``: SplitMix64 (Steele, Lea & Flood,
"Fast splittable pseudorandom number generators", OOPSLA 2014), the top
24 bits of each output times 2^-24, the same stream as `kiln generate
--seed`.
"""

import json
import os
import time

import numpy as np

from . import compile as _compile, Graph, KilnError

__all__ = ["Decoder", "uniforms_from_seed", "sample"]

_M64 = (1 << 64) - 1

# The smallest temperature other than 0 (greedy): below it logits / T
# overflows f32 (as kiln generate's --temperature, docs/decoder.md).
MIN_TEMPERATURE = 1e-30
_F32_MAX = float(np.finfo(np.float32).max)


def _check_temperature(where, temperature):
    t = float(temperature)
    if not (0 <= t <= _F32_MAX):
        raise KilnError("%s: temperature %r: expected a finite f32 value "
                        ">= 0 (0 for greedy)" % (where, temperature))
    if 0 < t < MIN_TEMPERATURE:
        raise KilnError("%s: temperature %r is below %g (logits / T would "
                        "overflow); use top_k=1 or temperature=0 for greedy"
                        % (where, temperature, MIN_TEMPERATURE))


def uniforms_from_seed(seed, n):
    """n f32 uniforms in [0, 1) from SplitMix64 seeded with ``seed``."""
    s = int(seed) & _M64
    out = np.empty(n, np.float32)
    for i in range(n):
        s = (s + 0x9E3779B97F4A7C15) & _M64
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        z ^= z >> 31
        out[i] = np.float32((z >> 40) * (1.0 / (1 << 24)))
    return out


def sample(logits, top_k, temperature, u):
    """The token chosen from ``logits`` (f32 [V]) by the rule above."""
    if top_k is None or top_k <= 1 or temperature <= 0:
        return int(np.argmax(logits))
    v = np.asarray(logits, np.float32) / np.float32(temperature)
    k = min(int(top_k), v.size)
    idx = np.argsort(-v, kind="stable")[:k]
    c = np.cumsum(np.exp(v[idx] - v[idx[0]]), dtype=np.float32)
    j = min(int(np.count_nonzero(c <= np.float32(u) * c[-1])), k - 1)
    return int(idx[j])


class Decoder:
    """A decoder compiled once, with its caches.  ``model_dir`` holds
    config.json, model.kg and model.safetensors (gen_decoder.py);
    ``max_len`` the cache's rows (grown by doubling when a call needs
    more; default 256); the other keywords go to kiln.compile (backend,
    tiers, cache, ...).  Not thread-safe (one cache)."""

    def __init__(self, model_dir, max_len=256, **options):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = cfg = json.load(f)
        H = cfg["hidden_size"]
        nh = cfg["num_attention_heads"]
        self.n_layers = cfg["num_hidden_layers"]
        self.n_kv = cfg["num_key_value_heads"]
        self.head_dim = cfg.get("head_dim", H // nh)
        self.vocab = cfg["vocab_size"]
        self.top_k_max = cfg.get("kiln_top_k_max", 1)
        t0 = time.perf_counter()
        g = Graph.parse_file(os.path.join(model_dir, "model.kg"))
        # the weights bound in place from the file's read-only mapping
        # (kiln_graph_bind_safetensors), before the compile
        g.bind_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.bind_s = time.perf_counter() - t0
        self.fn = _compile(g, **options)
        self.compile_s = time.perf_counter() - t0 - self.bind_s
        self._k = self._v = None
        self._alloc(max_len)
        self.pos = 0
        self.prefill_ms = None
        self.decode_ms = []

    def _alloc(self, n):
        shp = (self.n_layers, n, self.n_kv, self.head_dim)
        k, v = np.zeros(shp, np.float32), np.zeros(shp, np.float32)
        if self._k is not None:
            k[:, :self.pos] = self._k[:, :self.pos]
            v[:, :self.pos] = self._v[:, :self.pos]
        self._k, self._v = k, v

    def reset(self):
        """Forget the cache (the next call is a prefill)."""
        self.pos = 0

    def step(self, tokens, u=0.0, temperature=1.0, top_k=1):
        """Run the new ``tokens`` (ints) after the cached ones; append
        their keys and values to the cache.  Returns (logits of the last
        token: f32[V], greedy token, sampled token): the sampled one is
        drawn in the graph by ``u`` from the ``top_k`` (1 ..
        ``top_k_max``) largest logits / ``temperature``."""
        toks = np.ascontiguousarray(tokens, dtype=np.int64).reshape(-1)
        T, t = toks.shape[0], self.pos
        if T == 0:
            raise KilnError("step: no tokens")
        _check_temperature("step", temperature)
        bad = (toks < 0) | (toks >= self.vocab)
        if bad.any():
            i = int(np.argmax(bad))
            raise KilnError("step: token %d (position %d) is outside the "
                            "vocabulary [0, %d)" % (toks[i], i, self.vocab))
        if t + T > self._k.shape[1]:
            self._alloc(max(2 * self._k.shape[1], t + T))
        k = min(max(int(top_k), 1), self.top_k_max)
        args = [toks, np.int64(t), np.float32(u), np.float32(temperature),
                np.int64(k)]
        for l in range(self.n_layers):
            args += [self._k[l, :t], self._v[l, :t]]
        out = dict(zip(self.fn.output_names, self.fn(*args)))
        for l in range(self.n_layers):
            self._k[l, t:t + T] = out["new_k_%d" % l]
            self._v[l, t:t + T] = out["new_v_%d" % l]
        self.pos = t + T
        return out["logits"], int(out["greedy"]), int(out["sampled"])

    def generate(self, prompt, max_new, top_k=None, temperature=1.0,
                 seed=0, uniforms=None):
        """``max_new`` tokens after ``prompt`` (a fresh cache), as a list
        of ints.  Greedy without top_k; else top-k sampling with
        ``uniforms`` (one per token) or those of ``seed``.  Sets
        ``prefill_ms`` and ``decode_ms`` (one entry per later token)."""
        if len(prompt) == 0:
            raise KilnError("generate: empty prompt")
        _check_temperature("generate", temperature)
        sampled = not (top_k is None or top_k <= 1 or temperature <= 0)
        if max_new < 0:
            raise KilnError("generate: max_new is %d (a count: >= 0)"
                            % max_new)
        if sampled and uniforms is None:
            uniforms = uniforms_from_seed(seed, max_new)
        if sampled and len(uniforms) < max_new:
            raise KilnError("generate: %d uniforms for %d new tokens (one "
                            "per token)" % (len(uniforms), max_new))
        self.reset()
        self.decode_ms = []
        out = []
        cur = list(prompt)
        in_graph = sampled and top_k <= self.top_k_max
        for i in range(max_new):
            t0 = time.perf_counter()
            if in_graph:
                _, _, tok = self.step(cur, uniforms[i], temperature, top_k)
            else:
                logits, tok, _ = self.step(cur)
                if sampled:   # more candidates than the graph keeps
                    tok = sample(logits, top_k, temperature, uniforms[i])
            ms = (time.perf_counter() - t0) * 1e3
            if i == 0:
                self.prefill_ms = ms
            else:
                self.decode_ms.append(ms)
            out.append(tok)
            cur = [tok]
        return out
