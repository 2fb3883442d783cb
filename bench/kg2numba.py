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

translate(text) -> (source, inputs, data, outputs)
  source   Python source defining `logp_grad(*inputs, *data)` and `empty`
  inputs   [(name, dtype, shape)] in declaration order
  data     [(name, dtype, shape, kind, args)] shared/const declarations
  outputs  [name] in declaration order
"""
import re

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
    main(sys.argv)
