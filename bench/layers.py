#!/usr/bin/python3
"""bench/layers.py — a decoder at SmolLM2-135M shapes: kiln against numpy
and PyTorch on the CPU, on the same number of threads (issue 29).

Usage: /usr/bin/python3 bench/layers.py BUILDDIR [--config C.json]
           [--layers L] [--threads 1,2] [--impls kiln,numpy,torch]
           [--reps 5] [--decode 32] [--out FILE.md] [--keep DIR]

Writes a random-weight model with examples/smollm/gen_decoder.py
(DIR/config.json, model.kg, model.safetensors: f32, Hugging Face's
names) and runs one subprocess per (implementation, threads): 1 thread
pinned to CPU 1 (`taskset -c 1`; CPU 0 is the slow one on the VM of
diag28), 2 threads unpinned; OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = n
for every implementation and torch.set_num_threads(n).

Every worker runs with OpenBLAS's libblas.so.3 first on LD_LIBRARY_PATH
(Debian's libblas.so.3 alternative may be the reference BLAS; numpy and
torch link it, kiln links OpenBLAS): the table's footer lists the BLAS
libraries the workers mapped.

Implementations (each skipped with a line when it is absent):
  kiln   kiln.decoder.Decoder (the package over libkiln in BUILDDIR; its
         plugins from BUILDDIR/backends); a cold process with a fresh
         KILN_CACHE_DIR that runs to tier_wait, then a warm one on that
         cache (the numbers but cold TTFT/RSS are the warm process's)
  numpy  tests/decoder_ref.py's forward (the same OpenBLAS), the past
         passed as views of a preallocated cache
  torch  a functional model below (F.linear, inference_mode), the
         weights as tensors over one buffer read from the file
Metrics per process: time to first token (TTFT: from the worker's start,
imports, weights, compile, a 32-token prefill), peak RSS (VmHWM), prefill
of 32 and of 256 tokens (median of --reps, each from an empty cache) and
decode ms/token at a 256-token context (median of --decode steps, greedy).
The first 32-token logits of every implementation are compared with
numpy's (max relative difference, printed).  Then the model's kernels
by kind (`kiln explain`), `kiln generate` (the
CLI) on the same model, with an empty and a warm cache, and the same decoder
written in PyTensor (examples/smollm/decoder_pytensor.py, KILN mode) is
compiled twice, with an empty and with a warm kiln cache: PyTensor's own
time (build, rewrites, conversion to .kg) and kiln's, printed as lines.

Wall-clock timings on a shared machine are noisy; run it quietly for the
record (docs/performance.md).
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

T_START = time.perf_counter()
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- shared by the workers ------------------------------------------------

def read_weights(path):
    """{name: f32 array} over one writable buffer holding the file (read
    once: one copy of the weights in anonymous memory, as torch holds
    them)."""
    import numpy as np
    size = os.path.getsize(path)
    buf = bytearray(size)
    with open(path, "rb") as f:
        f.readinto(buf)
    (n,) = struct.unpack("<Q", bytes(buf[:8]))
    header = json.loads(bytes(buf[8:8 + n]))
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if e["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {e['dtype']} (the bench reads F32)")
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(buf, np.float32, (end - b) // 4,
                                  8 + n + b).reshape(e["shape"])
    return out


def vm_hwm_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


class NumpyImpl:
    """decoder_ref.forward with the past as views of a preallocated cache."""

    def __init__(self, d, max_len):
        import numpy as np
        sys.path.insert(0, os.path.join(SRC, "tests"))
        import decoder_ref
        self.ref = decoder_ref
        with open(os.path.join(d, "config.json")) as f:
            self.cfg = json.load(f)
        self.W = read_weights(os.path.join(d, "model.safetensors"))
        L = self.cfg["num_hidden_layers"]
        _, _, kvh, D = decoder_ref.dims(self.cfg)
        self.k = np.zeros((L, max_len, kvh, D), np.float32)
        self.v = np.zeros_like(self.k)
        self.pos = 0

    def reset(self):
        self.pos = 0

    def step(self, tokens):
        import numpy as np
        t, T = self.pos, len(tokens)
        past = None if t == 0 else (self.k[:, :t], self.v[:, :t])
        logits, nk, nv = self.ref.forward(self.cfg, self.W, tokens, past)
        self.k[:, t:t + T], self.v[:, t:t + T] = nk, nv
        self.pos = t + T
        return logits, int(np.argmax(logits))


class TorchImpl:
    """A functional Llama decoder in PyTorch (HF's LlamaForCausalLM math:
    RMSNorm, RoPE with rotate_half, GQA, SiLU MLP, tied head), the KV cache
    preallocated, under torch.inference_mode."""

    def __init__(self, d, max_len):
        import torch
        self.torch = torch
        with open(os.path.join(d, "config.json")) as f:
            c = self.cfg = json.load(f)
        self.W = {k: torch.from_numpy(a) for k, a in
                  read_weights(os.path.join(d, "model.safetensors")).items()}
        self.L, H = c["num_hidden_layers"], c["hidden_size"]
        self.nh, self.kvh = c["num_attention_heads"], c["num_key_value_heads"]
        self.D = c.get("head_dim", H // self.nh)
        self.eps = c["rms_norm_eps"]
        e = torch.arange(0, self.D, 2, dtype=torch.int64).float() / self.D
        self.inv_freq = 1.0 / (float(c["rope_theta"]) ** e)
        self.k = torch.zeros(self.L, max_len, self.kvh, self.D)
        self.v = torch.zeros_like(self.k)
        self.pos = 0

    def reset(self):
        self.pos = 0

    def _rms(self, x, w):
        return x * self.torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def _rope(self, x, cos, sin):
        h = x.shape[-1] // 2
        return x * cos + self.torch.cat([-x[..., h:], x[..., :h]], -1) * sin

    def step(self, tokens):
        torch = self.torch
        F = torch.nn.functional
        with torch.inference_mode():
            W, t = self.W, self.pos
            toks = torch.as_tensor(tokens, dtype=torch.int64)
            T, S, G = toks.shape[0], self.pos + toks.shape[0], self.nh // self.kvh
            x = F.embedding(toks, W["model.embed_tokens.weight"])
            ang = torch.arange(t, S, dtype=torch.int64).float()[:, None] * self.inv_freq
            emb = torch.cat([ang, ang], -1)
            cos, sin = emb.cos()[:, None], emb.sin()[:, None]      # [T, 1, D]
            mask = torch.ones(T, S, dtype=torch.bool).tril(t)
            for l in range(self.L):
                p = "model.layers.%d." % l
                hn = self._rms(x, W[p + "input_layernorm.weight"])
                q = F.linear(hn, W[p + "self_attn.q_proj.weight"]).view(T, self.nh, self.D)
                k = F.linear(hn, W[p + "self_attn.k_proj.weight"]).view(T, self.kvh, self.D)
                v = F.linear(hn, W[p + "self_attn.v_proj.weight"]).view(T, self.kvh, self.D)
                self.k[l, t:S] = self._rope(k, cos, sin)
                self.v[l, t:S] = v
                q = self._rope(q, cos, sin).view(T, self.kvh, G, self.D).permute(1, 2, 0, 3)
                K = self.k[l, :S].permute(1, 2, 0)[:, None]           # [KVH, 1, D, S]
                V = self.v[l, :S].permute(1, 0, 2)[:, None]           # [KVH, 1, S, D]
                s = torch.matmul(q, K) * (self.D ** -0.5)            # [KVH, G, T, S]
                a = torch.matmul(s.masked_fill(~mask, float("-inf")).softmax(-1), V)
                x = x + F.linear(a.permute(2, 0, 1, 3).reshape(T, self.nh * self.D),
                                 W[p + "self_attn.o_proj.weight"])
                hn = self._rms(x, W[p + "post_attention_layernorm.weight"])
                x = x + F.linear(F.silu(F.linear(hn, W[p + "mlp.gate_proj.weight"]))
                                 * F.linear(hn, W[p + "mlp.up_proj.weight"]),
                                 W[p + "mlp.down_proj.weight"])
            hn = self._rms(x[-1], W["model.norm.weight"])
            logits = F.linear(hn, W["model.embed_tokens.weight"])
        self.pos = S
        return logits.numpy(), int(logits.argmax())


class KilnImpl:
    def __init__(self, d, max_len):
        from kiln.decoder import Decoder
        self.dec = Decoder(d, max_len=max_len)

    def reset(self):
        self.dec.reset()

    def step(self, tokens):
        r = self.dec.step(tokens)          # (logits, greedy, ...)
        return r[0], r[1]


IMPLS = {"kiln": KilnImpl, "numpy": NumpyImpl, "torch": TorchImpl}


def worker(impl, d, threads, reps, n_decode, phase):
    import numpy as np
    if impl == "torch":
        import torch
        torch.set_num_threads(threads)
    rng = np.random.default_rng(1)
    with open(os.path.join(d, "config.json")) as f:
        V = json.load(f)["vocab_size"]
    prompt = rng.integers(0, V, 256).tolist()
    m = IMPLS[impl](d, 256 + n_decode + 8)
    logits, tok = m.step(prompt[:32])
    res = {"ttft_s": time.perf_counter() - T_START}
    np.save(os.path.join(d, f"logits32_{impl}_{threads}_{phase}.npy"), logits)
    if impl == "kiln":
        t0 = time.perf_counter()
        m.dec.fn.tier_wait()
        res["tier_wait_s"] = time.perf_counter() - t0
        res["compile_s"] = m.dec.compile_s
    for n in (32, 256):
        ts = []
        for _ in range(reps):
            m.reset()
            t0 = time.perf_counter()
            logits, tok = m.step(prompt[:n])
            ts.append(time.perf_counter() - t0)
        res[f"prefill{n}_ms"] = 1e3 * median(ts)
    ts = []
    for _ in range(n_decode):          # the cache now holds 256 tokens
        t0 = time.perf_counter()
        logits, tok = m.step([tok])
        ts.append(time.perf_counter() - t0)
    res["decode_ms"] = 1e3 * median(ts)
    res["rss_mb"] = vm_hwm_mb()
    with open("/proc/self/maps") as f:
        res["blas"] = sorted({os.path.basename(os.path.dirname(line.split()[-1])) + "/"
                              + os.path.basename(line.split()[-1]) for line in f
                              if "blas" in line.split()[-1]})
    print("RESULT " + json.dumps(res), flush=True)


# ---- the driver -------------------------------------------------------------

def available(impl, env):
    code = {"kiln": "import kiln.decoder", "numpy": "import numpy",
            "torch": "import torch"}[impl]
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]


# numpy and torch link libblas.so.3, which Debian's alternatives may point
# at the reference BLAS; kiln links OpenBLAS.  The same BLAS for all:
# OpenBLAS's libblas.so.3 first on the library path
OPENBLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"


def run_worker(impl, d, n, args, env):
    # OMP_WAIT_POLICY=PASSIVE: torch's OpenMP threads otherwise spin
    # between ops and fight OpenBLAS's own threads for the cores (measured
    # on this 2-core VM: torch's 2-thread prefill 256 1632 ms -> 548 ms);
    # the reference as fast as it can be.  numpy and kiln use no OpenMP.
    env = dict(env, OPENBLAS_NUM_THREADS=str(n), OMP_NUM_THREADS=str(n),
               OMP_WAIT_POLICY="PASSIVE")
    if os.path.isdir(OPENBLAS_DIR):
        env["LD_LIBRARY_PATH"] = OPENBLAS_DIR + (
            ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", impl, "--dir", d,
           "--threads", str(n), "--reps", str(args.reps), "--decode", str(args.decode),
           "--phase", env.get("BENCH_PHASE", "run")]
    if n == 1 and shutil.which("taskset"):
        cmd = ["taskset", "-c", "1"] + cmd
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:]), None
    return None, (r.stderr.strip().splitlines() or ["no output"])[-1]


def kernel_kinds(b, d, env):
    """`kiln explain --json` of the model: kernels by kind and distinct
    cache keys (30 layers share their kernels' keys; attention and the
    projections should be DOT kernels, never elementwise loops)."""
    r = subprocess.run([os.path.join(b, "tools", "kiln"), "explain",
                        os.path.join(d, "model.kg"), "--json"], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        return ["", "kernels: `kiln explain` failed: " +
                (r.stderr.strip().splitlines() or ["?"])[0]]
    ks = json.loads(r.stdout).get("kernels", [])
    kinds = {}
    for k in ks:
        kinds[k.get("kind")] = kinds.get(k.get("kind"), 0) + 1
    keys = {k.get("key") for k in ks}
    return ["", f"kernels (`kiln explain`): {len(ks)}, {len(keys)} distinct keys; by kind: "
            + ", ".join(f"{n} {kd}" for kd, n in sorted(kinds.items(), key=lambda x: -x[1]))]


def kiln_generate(b, d, env, tmp, args):
    """`kiln generate` (the CLI, C only) on the same model and prompt: its
    own compile/prefill/decode line and the process's wall time, with an
    empty and a warm cache (1 thread, pinned)."""
    cli = os.path.join(b, "tools", "kiln")
    out = ["", "`kiln generate` (1 thread, pinned; prompt of 32, "
           f"{args.decode + 1} new tokens):", ""]
    import numpy as np
    with open(os.path.join(d, "config.json")) as f:
        V = json.load(f)["vocab_size"]
    prompt = ",".join(map(str, np.random.default_rng(1).integers(0, V, 32)))
    e = dict(env, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
             KILN_CACHE_DIR=tempfile.mkdtemp(prefix="cache-gen-", dir=tmp))
    cmd = [cli, "generate", os.path.join(d, "model.kg"), "--weights",
           os.path.join(d, "model.safetensors"), "--prompt", prompt,
           "--max-new", str(args.decode + 1)]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "1"] + cmd
    for phase in ("empty cache", "warm cache"):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, env=e, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        lines = r.stderr.strip().splitlines() or ["no output"]
        if r.returncode != 0:
            return out + [f"- skipped: {lines[0]}"]
        last = lines[-1]
        out.append(f"- {phase}: {last} (process wall {wall:.2f} s)")
    return out


def pytensor_compile(args, env, tmp):
    """examples/smollm/decoder_pytensor.py at the same configuration: PyTensor's
    own time (graph build, rewrites, conversion) and kiln's, with an empty
    kiln cache and again with the cache it filled (1 thread, pinned)."""
    sp = os.environ.get("KILN_SHARED_PYTHON") or os.path.join(
        os.path.dirname(SRC), "shared", "python")
    pkg = os.path.join(sp, "pytensor-2.27.1")
    out = ["", "PyTensor (KILN mode), examples/smollm/decoder_pytensor.py:", ""]
    if not os.path.isdir(pkg):
        return out + [f"- skipped: no shared PyTensor at {sp} (set KILN_SHARED_PYTHON)"]
    e = dict(env, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
             KILN_CACHE_DIR=tempfile.mkdtemp(prefix="cache-pt-", dir=tmp),
             PYTENSOR_FLAGS="cxx=,base_compiledir=" + os.path.join(tmp, "pytensor"))
    e["PYTHONPATH"] = os.pathsep.join([pkg, os.path.join(sp, "site"), e["PYTHONPATH"]])
    cmd = [sys.executable, os.path.join(SRC, "examples/smollm/decoder_pytensor.py"),
           "--config", args.config]
    if args.layers:
        cmd += ["--layers", str(args.layers)]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "1"] + cmd
    for phase in ("empty kiln cache", "warm kiln cache"):
        r = subprocess.run(cmd, env=e, capture_output=True, text=True)
        last = (r.stdout.strip().splitlines() or r.stderr.strip().splitlines() or ["?"])[-1]
        out.append(f"- {phase}: {last}")
    return out


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("builddir", nargs="?")
    ap.add_argument("--config", default=os.path.join(SRC, "examples/smollm/config.json"))
    ap.add_argument("--layers", type=int)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--impls", default="kiln,numpy,torch")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--out")
    ap.add_argument("--keep")
    ap.add_argument("--worker")
    ap.add_argument("--dir")
    ap.add_argument("--phase", default="run")
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.dir, int(args.threads), args.reps, args.decode, args.phase)
        return 0
    b = os.path.abspath(args.builddir or os.path.join(SRC, "_b"))
    env = dict(os.environ)
    env["KILN_LIBRARY"] = os.path.join(b, ".libs", "libkiln.so")
    env["KILN_PLUGIN_PATH"] = ":".join(os.path.join(b, "backends", x, ".libs")
                                       for x in ("interp", "tcc", "llvm"))
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(SRC, "python"), os.path.join(b, "python")]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    tmp = args.keep or tempfile.mkdtemp(prefix="kiln-layers-")
    d = os.path.join(tmp, "model")
    gen = os.path.join(SRC, "examples/smollm/gen_decoder.py")
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        cmd = [sys.executable, gen, "--config", args.config, "--out", d, "--seed", "0"]
        if args.layers:
            cmd += ["--layers", str(args.layers)]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"# gen_decoder.py failed: {r.stderr.strip()}")
            return 1
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    size = os.path.getsize(os.path.join(d, "model.safetensors")) / 2**20
    lines = [f"{os.path.basename(args.config)}: {cfg['num_hidden_layers']} layers, hidden "
             f"{cfg['hidden_size']}, heads {cfg['num_attention_heads']}/"
             f"{cfg['num_key_value_heads']}, MLP {cfg['intermediate_size']}, vocab "
             f"{cfg['vocab_size']}; weights {size:.0f} MiB f32; {sys.executable}, "
             f"cpus {os.cpu_count()}; prefill median of {args.reps}, decode median "
             f"of {args.decode} steps at context 256", "",
             "| impl | threads | TTFT cold s | TTFT warm s | peak RSS MB (cold/warm) "
             "| prefill 32 ms | prefill 256 ms | decode ms/token | max rel diff vs numpy |",
             "|---|---|---|---|---|---|---|---|---|"]
    import numpy as np
    rows = []
    for impl in args.impls.split(","):
        why = available(impl, env)
        if why:
            lines.append(f"| {impl} | - | skipped: {why} | | | | | | |")
            continue
        for n in [int(x) for x in args.threads.split(",")]:
            e = dict(env)
            cold = None
            if impl == "kiln":
                e["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="cache-", dir=tmp)
                e["BENCH_PHASE"] = "cold"
                cold, err = run_worker(impl, d, n, args, e)
                if cold is None:
                    lines.append(f"| {impl} | {n} | failed: {err} | | | | | | |")
                    continue
                e["BENCH_PHASE"] = "warm"
            res, err = run_worker(impl, d, n, args, e)
            if res is None:
                lines.append(f"| {impl} | {n} | failed: {err} | | | | | | |")
                continue
            rows.append((impl, n, res, cold, e.get("BENCH_PHASE", "run")))
    for impl, n, res, cold, phase in rows:
        diff = "-"
        ref = os.path.join(d, f"logits32_numpy_{n}_run.npy")
        if impl != "numpy" and os.path.exists(ref):
            a = np.load(os.path.join(d, f"logits32_{impl}_{n}_{phase}.npy"))
            r0 = np.load(ref)
            diff = "%.1e" % float(np.max(np.abs(a - r0)) / np.max(np.abs(r0)))
        rss = (f"{cold['rss_mb']:.0f} / {res['rss_mb']:.0f}" if cold
               else f"{res['rss_mb']:.0f}")
        tc = f"{cold['ttft_s']:.2f}" if cold else f"{res['ttft_s']:.2f}"
        lines.append(f"| {impl} | {n} | {tc} | {res['ttft_s']:.2f} | {rss} | "
                     f"{res['prefill32_ms']:.1f} | {res['prefill256_ms']:.1f} | "
                     f"{res['decode_ms']:.2f} | {diff} |")
        if cold:
            lines.append(f"|  | | (cold: compile {cold['compile_s']:.2f} s, tier_wait "
                         f"{cold['tier_wait_s']:.2f} s) | | | | | | |")
    rows = [r[:3] for r in rows]
    blas = sorted({b for _, _, r in rows for b in r.get("blas", [])})
    lines += ["", "BLAS libraries mapped by the workers: " + (", ".join(blas) or "none")]
    if any(i == "torch" for i, _, _ in rows):
        lines += ["", "Ratios to torch at the same threads (goal: <= 1.25 time, <= 1.2 RSS):", ""]
        tr = {n: r for i, n, r in rows if i == "torch"}
        for impl, n, r in rows:
            if impl == "torch" or n not in tr:
                continue
            t = tr[n]
            lines.append(f"- {impl}, {n} thread(s): prefill 32 "
                         f"{r['prefill32_ms'] / t['prefill32_ms']:.2f}x, prefill 256 "
                         f"{r['prefill256_ms'] / t['prefill256_ms']:.2f}x, decode "
                         f"{r['decode_ms'] / t['decode_ms']:.2f}x, RSS "
                         f"{r['rss_mb'] / t['rss_mb']:.2f}x")
    lines += kernel_kinds(b, d, env)
    lines += kiln_generate(b, d, env, tmp, args)
    lines += pytensor_compile(args, env, tmp)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
