#!/usr/bin/python3
"""bench/kg2numba.py — translate kiln's expanded graph (`kiln check FILE.kg`)
into the Python source of one @njit function, the way PyTensor's numba
backend generates a whole graph as one function (make bench-calls,
docs/performance.md).

Ops covered (everything the bench-calls models use after expansion):
  elementwise  add sub mul true_div neg square exp log log1p sqrt sin
               gammaln digamma (scalar helpers: math.lgamma; digamma by
               recurrence + asymptotic series, as PyTensor's scalar op)
  reductions   sum (all axes; axis=0 with keepdims on rank-1)
  shape        expand_dims(axis=0) squeeze(axis=0) fill
  indexing     x[idx] (take, axis 0 of a 1-D x)
               inc_subtensor(x[idx], v) (advanced_inc_subtensor, axis 0)
  literals     NAME = NUMBER, numbers inline as arguments
Anything else raises Unsupported with the op's name.

prepare(kiln, path, outdir) -> dict: one model made ready for numba (below)
translate(text) -> (source, inputs, data, outputs)
  source   Python source defining `logp_grad(*inputs, *data)` and `empty`
  inputs   [(name, dtype, shape)] in declaration order
  data     [(name, dtype, shape, kind, args)] shared/const declarations
  outputs  [name] in declaration order

Command line: kg2numba.py MODULE.py ARGS.npz NCALLS (main: time it) and
kg2numba.py prepare KILN MODEL.kg OUTDIR (prepare: write OUTDIR/g.py and
OUTDIR/args.npz, or print why not and exit 3).
"""
import json, math, os, re, subprocess

class Unsupported(Exception):
    pass

ELEM = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
        "true_div": "({0} / {1})", "neg": "(-{0})", "square": "({0} * {0})",
        "exp": "np.exp({0})", "log": "np.log({0})", "log1p": "np.log1p({0})",
        "sqrt": "np.sqrt({0})", "sin": "np.sin({0})",
        "gammaln": "_gammaln({0})", "digamma": "_digamma({0})"}

HELPERS = '''
import math
import numpy as np
from numba import njit

@njit(cache=True)
def _gammaln(x):
    return math.lgamma(x)

@njit(cache=True)
def _digamma(x):
    r = 0.0
    while x < 6.0:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    return r + math.log(x) - 0.5 / x - f * (1.0/12 - f * (1.0/120 - f * (1.0/252
        - f * (1.0/240 - f * (1.0/132)))))

@njit(cache=True)
def _fill(model, value):
    out = np.empty(model.shape)
    out[:] = value
    return out

@njit(cache=True)
def _inc(x, idx, v):
    out = x.copy()
    for i in range(idx.size):
        out[idx[i]] += v[i]
    return out
'''

DECL = re.compile(r'^\s*(input|shared|const)\s+(\w+):\s*(\w+)(?:\[([^\]]*)\])?(?:\s*=\s*(.*))?$')
CALL = re.compile(r'^(\w+)\((.*)\)$')

def _split(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip()); cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out

def translate(text):
    inputs, data, outputs, body = [], [], [], []
    rank = {}
    def arg(a):
        if re.match(r'^-?[0-9.]', a) or a in ("inf", "-inf", "nan"):
            return repr(float(a)), 0
        if a not in rank:
            raise Unsupported("unknown name " + a)
        return a, rank[a]
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("kiln ") or s.startswith("graph ") or s == "end" or s.startswith("#"):
            continue
        m = DECL.match(s)
        if m:
            kind, name, dt, dims, init = m.groups()
            shape = [d.strip() for d in dims.split(",")] if dims else []
            rank[name] = len(shape)
            if kind == "input":
                inputs.append((name, dt, shape))
            else:
                data.append((name, dt, shape, kind, init))
            continue
        if s.startswith("output "):
            outputs.append(s.split()[1])
            continue
        if " = " not in s:
            raise Unsupported("line " + s)
        lhs, rhs = s.split(" = ", 1)
        if "," in lhs:
            raise Unsupported("multi-output node " + s)
        m = CALL.match(rhs)
        if not m:
            if re.match(r'^(\w+)\[(\w+)\]$', rhs):           # take
                x, i = re.match(r'^(\w+)\[(\w+)\]$', rhs).groups()
                if rank[x] != 1:
                    raise Unsupported("take of rank %d" % rank[x])
                body.append("%s = %s[%s]" % (lhs, x, i)); rank[lhs] = rank[i]
                continue
            e, r = arg(rhs)                                 # literal / alias
            body.append("%s = %s" % (lhs, e)); rank[lhs] = r
            continue
        op, rest = m.groups()
        parts = _split(rest)
        pos = [p for p in parts if "=" not in p or "[" in p]
        kw = dict(p.split("=", 1) for p in parts if "=" in p and "[" not in p)
        if op in ELEM:
            a = [arg(p) for p in pos]
            body.append("%s = %s" % (lhs, ELEM[op].format(*[e for e, _ in a])))
            rank[lhs] = max(r for _, r in a)
        elif op == "sum":
            x, r = arg(pos[0])
            if "axis" not in kw:
                body.append("%s = np.sum(%s)" % (lhs, x)); rank[lhs] = 0
            elif kw["axis"] == "0" and r == 1 and kw.get("keepdims") == "true":
                body.append("%s = np.full(1, np.sum(%s))" % (lhs, x)); rank[lhs] = 1
            else:
                raise Unsupported("sum %s on rank %d" % (kw, r))
        elif op == "expand_dims":
            x, r = arg(pos[0])
            if kw.get("axis") != "0" or r != 0:
                raise Unsupported("expand_dims %s on rank %d" % (kw, r))
            body.append("%s = np.full(1, %s)" % (lhs, x)); rank[lhs] = 1
        elif op == "squeeze":
            x, r = arg(pos[0])
            if kw.get("axis") != "0" or r != 1:
                raise Unsupported("squeeze %s on rank %d" % (kw, r))
            body.append("%s = %s[0]" % (lhs, x)); rank[lhs] = 0
        elif op == "fill":
            (mo, rm), (v, rv) = arg(pos[0]), arg(pos[1])
            if rm == 0 and rv == 0:
                body.append("%s = %s" % (lhs, v)); rank[lhs] = 0
            else:
                body.append("%s = _fill(%s, %s)" % (lhs, mo, v)); rank[lhs] = max(rm, rv)
        elif op == "inc_subtensor":
            mm = re.match(r'^(\w+)\[(\w+)\]$', pos[0])
            if not mm or rank[mm.group(1)] != 1:
                raise Unsupported("inc_subtensor " + pos[0])
            v, _ = arg(pos[1])
            body.append("%s = _inc(%s, %s, %s)" % (lhs, mm.group(1), mm.group(2), v))
            rank[lhs] = 1
        else:
            raise Unsupported("op " + op)
    args = ", ".join([n for n, _, _ in inputs] + [d[0] for d in data])
    src = [HELPERS, "@njit(cache=True)", "def logp_grad(%s):" % args]
    src += ["    " + b for b in body]
    src.append("    return (%s,)" % ", ".join(outputs))
    src += ["", "@njit(cache=True)", "def empty(%s):" % args, "    return None", ""]
    return "\n".join(src), inputs, data, outputs


def value(k, j):
    """Input k's element j: the same deterministic point for every engine
    (bench/calls.py, bench/bench_tiers.c)."""
    return 0.4 * math.sin(1.3 * k + 0.7 * j + 0.5)


def prepare(kiln, path, outdir):
    """Make model PATH ready for numba: translate `KILN check PATH`, fill
    its inputs with value(k, j), load its data (const, npy(), csv()), and
    write OUTDIR/g.py (the module) and OUTDIR/args.npz (its arguments);
    OUTDIR is created only then.  Returns a dict: inputs [(name, dtype,
    shape)], flat (the input values, flattened in order), iargs (the same
    as `kiln run` -i options), and either module and npz (paths) or skip
    (why numba cannot run the model)."""
    import numpy as np
    base = os.path.dirname(os.path.abspath(path))
    kiln = os.path.abspath(kiln) if os.sep in kiln else kiln
    chk = subprocess.run([kiln, "check", os.path.basename(path)], cwd=base,
                         capture_output=True, text=True, check=True).stdout
    m = {}
    try:
        source, inputs, data, outputs = translate(chk)
    except Unsupported as e:
        source, m["skip"] = None, "translator: %s" % e
        inputs = [DECL.match(l.strip()).groups()[1:4] for l in chk.splitlines()
                  if l.strip().startswith("input ")]
        inputs = [(n, d, [x for x in (s or "").split(",") if x]) for n, d, s in inputs]
    flat, iargs, arrays = [], [], []
    for k, (name, dt, shape) in enumerate(inputs):
        size = int(np.prod([int(s) for s in shape])) if shape else 1
        v = [float("%.17g" % value(k, j)) for j in range(size)]
        flat += v
        iargs += ["-i", "%s=%s" % (name, ("%.17g" % v[0]) if not shape else
                                    "[" + ", ".join("%.17g" % x for x in v) + "]")]
        arrays.append(np.array(v) if shape else np.float64(v[0]))
    m.update(inputs=inputs, flat=flat, iargs=iargs)
    if source:
        for name, dt, shape, kind, init in data:
            if kind == "const":
                arrays.append(np.array(json.loads(init), dtype=np.float64 if dt.startswith("f") else np.int64))
            elif init.startswith("npy("):
                arrays.append(np.load(os.path.join(base, init[5:-2])))
            elif init.startswith("csv("):
                f, col = [s.strip().strip('"') for s in init[4:-1].split(",")]
                tab = np.genfromtxt(os.path.join(base, f), delimiter=",", names=True,
                                    dtype=None, encoding="utf-8")
                arrays.append(np.ascontiguousarray(tab[col], dtype=np.int64 if dt.startswith("i") else np.float64))
            else:
                source, m["skip"] = None, "data %s: %s" % (name, init)
                break
    if source:
        os.makedirs(outdir)
        m["module"] = os.path.join(outdir, "g.py")
        with open(m["module"], "w") as f:
            f.write(source)
        m["npz"] = os.path.join(outdir, "args.npz")
        np.savez(m["npz"], **{"a%d" % i: a for i, a in enumerate(arrays)})
    return m


def _time_blocks(f, args, calls):
    import time
    blk = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(calls):
            f(*args)
        blk.append((time.perf_counter() - t0) / calls * 1e6)
    blk.sort()
    return blk[3]


def main(argv):
    """kg2numba.py MODULE.py ARGS.npz NCALLS: import the generated module
    (its numba cache next to it), call it once (compile_ms: compile or cache
    load), then time NCALLS calls net of an empty @njit call with the same
    arguments; print JSON {compile_ms, us_per_call, outputs}."""
    import importlib.util, json, os, sys, time
    import numpy as np
    mod_path, npz, calls = argv[1], argv[2], int(argv[3])
    z = np.load(npz)
    args = [z["a%d" % i] if z["a%d" % i].ndim else float(z["a%d" % i])
            for i in range(len(z.files))]
    t0 = time.perf_counter()
    # an ordinary import: numba's cache of a module loaded by
    # spec_from_file_location does not load in the next process
    sys.path.insert(0, os.path.dirname(os.path.abspath(mod_path)))
    m = importlib.import_module(os.path.basename(mod_path)[:-3])
    out = m.logp_grad(*args)
    m.empty(*args)
    compile_ms = (time.perf_counter() - t0) * 1e3
    full = _time_blocks(m.logp_grad, args, calls)
    base = _time_blocks(m.empty, args, calls)
    print(json.dumps({"compile_ms": compile_ms, "us_per_call": full - base,
                      "us_call_overhead": base,
                      "outputs": [np.asarray(o).tolist() for o in out]}))


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 5 and sys.argv[1] == "prepare":
        r = prepare(*sys.argv[2:5])
        if "skip" in r:
            print(r["skip"])
            sys.exit(3)
    else:
        main(sys.argv)
