"""PyTensor on kiln: the ``kiln`` linker and the ``KILN`` mode.

``import kiln.pytensor`` registers a linker ``"kiln"`` and a mode ``"KILN"``
with PyTensor, so that::

    pytensor.function(ins, outs, mode="KILN")
    model.compile_logp(mode="KILN"); model.compile_dlogp(mode="KILN")

compile the graph with kiln.  ``import kiln`` alone never imports PyTensor.

How it works (docs/pytensor.md has the op table):

* ``fgraph_to_kg(fgraph)`` (or ``to_kg(inputs, outputs)``) converts a
  PyTensor graph to kiln's ``.kg`` text through a dispatch table keyed by Op
  class (``KG_CONVERTERS``) and, for ``Elemwise``, by scalar-op class
  (``KG_SCALAR_CONVERTERS``).  It returns a ``KgGraph``: the text and the
  ordered input and output names.
* The linker partitions the ``FunctionGraph``: every node the table
  converts runs in kiln (maximal groups, one kiln function each); any other
  node (an op kiln lacks, a complex or float16 dtype, a shape computed at
  run time) stays in PyTensor's own VM (Python ``perform``, never C), and
  one ``KilnFallbackWarning`` line names those ops and why.
* Compiled kiln functions are memoised per process by their ``.kg`` text
  and compile options; across processes kiln's disk cache (docs/cache.md)
  supplies the kernels.
"""

import importlib
import json
import re
import threading
import warnings

import numpy as np

import kiln as _kiln

import pytensor
import pytensor.scalar as ps
import pytensor.scalar.math as psm
from pytensor.scalar.loop import ScalarLoop
from pytensor.compile.builders import OpFromGraph
from pytensor.compile.mode import Mode, optdb, register_linker, register_mode, predefined_linkers, predefined_modes
from pytensor.compile.ops import DeepCopyOp, ViewOp
from pytensor.graph.basic import Apply, Constant
from pytensor.graph.fg import FunctionGraph
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.graph.rewriting.db import RewriteDatabaseQuery
from pytensor.link.vm import VMLinker
from pytensor.raise_op import CheckAndRaise
from pytensor.scan.op import Scan
from pytensor.tensor.special import LogSoftmax, Softmax, SoftmaxGrad
from pytensor.tensor.einsum import Einsum
from pytensor.tensor.type import TensorType

# modules by full name: pytensor.tensor re-exports functions called `shape`,
# `basic`... that shadow the submodules
ptb = importlib.import_module("pytensor.tensor.basic")
pte = importlib.import_module("pytensor.tensor.elemwise")
ptx = importlib.import_module("pytensor.tensor.extra_ops")
ptm = importlib.import_module("pytensor.tensor.math")
ptsh = importlib.import_module("pytensor.tensor.shape")
ptst = importlib.import_module("pytensor.tensor.subtensor")
ptsl = importlib.import_module("pytensor.tensor.slinalg")
ptnl = importlib.import_module("pytensor.tensor.nlinalg")
ptbw = importlib.import_module("pytensor.tensor.blockwise")
ptblas = importlib.import_module("pytensor.tensor.blas")
__all__ = [
    "KgGraph", "Unsupported", "KilnFallbackWarning", "KilnLinker", "KilnOp",
    "fgraph_to_kg", "to_kg", "mode", "KILN", "KG_CONVERTERS",
    "KG_SCALAR_CONVERTERS", "kiln_has_op", "kiln_builds",
]


class Unsupported(_kiln.KilnError):
    """A node the converter cannot express in kiln; str() says why (a
    kiln.KilnError, so ``except kiln.KilnError`` catches it)."""

    def __init__(self, msg, code=None):
        super().__init__(msg, _kiln._lib.ERR_ARG if code is None else code)


class KilnFallbackWarning(UserWarning):
    """One line naming the ops that stayed in PyTensor, and why."""


# --------------------------------------------------------------------------
# dtypes

_KDT = {"float64": "f64", "float32": "f32", "int64": "i64", "int32": "i32",
        "bool": "bool"}
# integer dtypes kiln lacks: held as i64 inside kiln (values are exact), cast
# back at the boundary; arithmetic producing them stays in PyTensor (it could
# wrap where i64 does not)
_WIDE = {"int8", "int16", "uint8", "uint16", "uint32"}
_NP_OF_KDT = {"f64": np.float64, "f32": np.float32, "i64": np.int64,
              "i32": np.int32, "bool": np.bool_}


def _kdt(dtype, what="value"):
    """kiln dtype of a PyTensor dtype, or Unsupported."""
    if dtype in _KDT:
        return _KDT[dtype]
    if dtype in _WIDE:
        return "i64"
    if dtype.startswith("complex"):
        raise Unsupported(f"kiln has no complex dtype ({what} is {dtype})")
    if dtype == "float16":
        raise Unsupported(f"kiln has no float16 ({what} is float16; cast to float32)")
    raise Unsupported(f"kiln has no dtype {dtype} ({what})")


def _is_float(dtype):
    return dtype.startswith("float")


# --------------------------------------------------------------------------
# which ops this libkiln knows (the new elementwise ops may be missing)

_op_probe = {}
_op_probe_lock = threading.Lock()
_PROBE_ARGS = {1: "x", 2: "x, x", 3: "x, x, x"}


def kiln_has_op(name, nargs=1, attrs=""):
    """True when the loaded libkiln knows op NAME (probed once by parsing)."""
    key = (name, nargs, attrs)
    with _op_probe_lock:
        if key in _op_probe:
            return _op_probe[key]
    text = (f"kiln 1\ngraph probe\n  input x: f64[2]\n"
            f"  output y = {name}({_PROBE_ARGS[nargs]}{attrs})\nend\n")
    try:
        _kiln.Graph.parse(text, filename="<probe>")
        ok = True
    except _kiln.KilnError as e:
        ok = "unknown op" not in str(e) and "unknown attribute" not in str(e)
    with _op_probe_lock:
        _op_probe[key] = ok
    return ok


_build_probe = {}


def kiln_builds(expr, types):
    """None when this libkiln builds ``expr`` (text over inputs named a, b,
    ... of TYPES, (kiln dtype, static shape with None for unknown)) into a
    graph, else kiln's message: for ops whose shape rules depend on which
    dims are symbolic (repeat, einsum), checked before a node is taken so
    that a refusal stays with that node (memoised)."""
    key = (expr, tuple((d, tuple(sh)) for d, sh in types))
    with _op_probe_lock:
        if key in _build_probe:
            return _build_probe[key]
    decls = "".join(
        f"  input {chr(97 + i)}: {d}" + (
            "[" + ", ".join("?" if n is None else str(int(n)) for n in sh) + "]" if sh else "")
        + "\n" for i, (d, sh) in enumerate(types))
    text = f"kiln 1\ngraph probe\n{decls}  output y = {expr}\nend\n"
    try:
        _kiln.Graph.parse(text, filename="<probe>")
        why = None
    except _kiln.KilnError as e:
        why = str(e).split("<probe>:", 1)[-1].split(": ", 1)[-1].strip() or str(e)
    with _op_probe_lock:
        _build_probe[key] = why
    return why


def _need(name, nargs=1, attrs=""):
    if not kiln_has_op(name, nargs, attrs):
        raise Unsupported(f"this libkiln has no op '{name}'")
    return name


# --------------------------------------------------------------------------
# .kg text emission

_IDENT = re.compile(r"[^A-Za-z0-9_]")
_RESERVED = {"kiln", "graph", "end", "input", "shared", "const", "output",
             "true", "false", "inf", "nan", "param", "grad"}


def _fmt_values(arr, kdt):
    """Nested-list text of ARR (already of kiln dtype KDT)."""
    if kdt == "bool":
        return json.dumps(arr.astype(bool).tolist())
    if kdt in ("i64", "i32"):
        return json.dumps(arr.astype(np.int64).tolist())
    text = json.dumps(arr.astype(np.float64).tolist(), allow_nan=True)
    if "N" in text or "I" in text:
        text = text.replace("NaN", "nan").replace("Infinity", "inf")
    return text


def _kg_text(msg):
    """MSG as kiln will report it: one line, no NUL, never empty."""
    return " ".join(str(msg).replace("\x00", "").split()) or "check failed"


def _kg_string(msg):
    """MSG as a one-line .kg string literal."""
    msg = _kg_text(msg)
    return '"' + msg.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Emitter:
    """Accumulates .kg declarations and statements with fresh names."""

    def __init__(self):
        self.decls = []
        self.lines = []
        self.n = 0
        self.val = {}       # PyTensor Variable -> kiln name
        self.kdt = {}       # kiln name -> kiln dtype
        self.consts = {}    # (kdt, shape, bytes) -> name
        self.checks = {}    # written msg -> (exception type, original msg)
        self.bodies = []    # `graph NAME ... end` blocks of scans' bodies

    def fresh(self, prefix="v"):
        self.n += 1
        return f"{prefix}{self.n}"

    def let(self, expr, kdt):
        name = self.fresh()
        self.lines.append(f"  {name} = {expr}")
        self.kdt[name] = kdt
        return name

    def input(self, var, kdt):
        base = _IDENT.sub("_", var.name or "")[:40]
        name = self.fresh("in") + ("_" + base if base else "")
        dims = getattr(var.type, "shape", ())   # ScalarType: rank 0
        shape = ", ".join("?" if s is None else str(int(s)) for s in dims)
        self.decls.append(f"  input {name}: {kdt}" + (f"[{shape}]" if dims else ""))
        self.kdt[name] = kdt
        self.val[var] = name
        return name

    def const(self, data, kdt):
        arr = np.asarray(data)
        key = (kdt, arr.shape, arr.dtype.str, arr.tobytes())
        name = self.consts.get(key)
        if name is None:
            name = self.fresh("c")
            shape = ", ".join(str(s) for s in arr.shape)
            typ = kdt + (f"[{shape}]" if arr.ndim else "")
            self.decls.append(f"  const {name}: {typ} = {_fmt_values(arr, kdt)}")
            self.kdt[name] = kdt
            self.consts[key] = name
        return name

    def cast(self, name, kdt):
        """NAME as kiln dtype KDT (a cast only when it differs)."""
        if self.kdt[name] == kdt:
            return name
        if kdt == "bool":
            return self.let(f"ne({name}, 0)", "bool")
        return self.let(f"cast({name}, dtype={kdt})", kdt)

    def text(self, gname, outputs, header=True):
        out = ["kiln 1"] + self.bodies if header else []
        out += [f"graph {gname}"] + self.decls + self.lines
        out += [f"  output {o} = {v}" for o, v in outputs]
        out.append("end")
        return "\n".join(out) + "\n"


def _name_of(em, var):
    """kiln name of a PyTensor variable already converted, or a constant."""
    if var in em.val:
        return em.val[var]
    if isinstance(var, Constant):
        kdt = _kdt(var.type.dtype, "a constant")
        data = np.asarray(var.data)
        if var.type.dtype in _WIDE or var.type.dtype == "uint32":
            data = data.astype(np.int64)
        name = em.const(data, kdt)
        em.val[var] = name
        return name
    raise Unsupported(f"input {var} was not converted")


def _const_value(var):
    """A constant scalar or array folded from VAR, else Unsupported."""
    if isinstance(var, Constant):
        return np.asarray(var.data)
    try:
        return np.asarray(ptb.get_underlying_scalar_constant_value(var))
    except Exception:
        raise Unsupported(f"'{var}' is computed at run time; kiln needs it constant "
                          "(give a static shape or a constant)") from None


# --------------------------------------------------------------------------
# Elemwise scalar ops

KG_SCALAR_CONVERTERS = {}


def _scalar(*classes):
    def deco(fn):
        for c in classes:
            KG_SCALAR_CONVERTERS[c] = fn
        return fn
    return deco


def _simple(kop, nargs=None, wide_ok=False):
    """Op computed in the output dtype: cast the inputs to it, apply KOP."""
    def conv(em, sop, args, idt, odt):
        if odt in _WIDE and not wide_ok:
            raise Unsupported(f"{odt} arithmetic (kiln computes in i64, which could differ on overflow)")
        if nargs is not None and len(args) != nargs:
            raise Unsupported(f"{len(args)} inputs")
        _need(kop, len(args))
        k = _kdt(odt)
        a = [em.cast(x, k) for x in args]
        return em.let(f"{kop}({', '.join(a)})", k)
    return conv


def _chain(kop):
    def conv(em, sop, args, idt, odt):
        if odt in _WIDE:
            raise Unsupported(f"{odt} arithmetic (kiln computes in i64)")
        k = _kdt(odt)
        a = [em.cast(x, k) for x in args]
        acc = a[0]
        if len(a) == 1:
            return acc
        for x in a[1:]:
            acc = em.let(f"{kop}({acc}, {x})", k)
        return acc
    return conv


for _c, _k in [(ps.Neg, "neg"), (ps.Abs, "abs"), (ps.Sqr, "square"),
               (ps.Sqrt, "sqrt"), (ps.Exp, "exp"), (ps.Expm1, "expm1"),
               (ps.Log, "log"), (ps.Log1p, "log1p"), (ps.Tanh, "tanh"),
               (ps.Sin, "sin"), (ps.Cos, "cos"), (psm.Erf, "erf"),
               (psm.Erfc, "erfc"), (psm.GammaLn, "gammaln"),
               (psm.Psi, "digamma"), (psm.TriGamma, "trigamma"),
               (psm.Sigmoid, "sigmoid"), (psm.Softplus, "softplus"),
               (psm.Log1mexp, "log1mexp"), (psm.Erfcx, "erfcx"),
               (psm.Erfinv, "erfinv"), (ps.Floor, "floor"), (ps.Ceil, "ceil"),
               (ps.Trunc, "trunc"), (ps.RoundHalfToEven, "round"),
               (ps.RoundHalfAwayFromZero, "round_half_away_from_zero"),
               (psm.Erfcinv, "erfcinv"), (ps.Sign, "sign"),
               (psm.I0, "i0"), (psm.I1, "i1")]:
    KG_SCALAR_CONVERTERS[_c] = _simple(_k, 1)
for _c, _k in [(ps.Sub, "sub"), (ps.TrueDiv, "true_div"), (ps.Pow, "pow"),
               (ps.ScalarMaximum, "maximum"), (ps.ScalarMinimum, "minimum"),
               (ps.Mod, "mod"), (psm.GammaInc, "gammainc"),
               (psm.GammaIncC, "gammaincc")]:
    KG_SCALAR_CONVERTERS[_c] = _simple(_k, 2)
KG_SCALAR_CONVERTERS[psm.BetaInc] = _simple("betainc", 3)


def _betainc_grad_wrtp(sop):
    """Whether ScalarLoop SOP is PyTensor 2.27's betainc_grad loop in p
    (True), in q (False), or not that loop (None)."""
    if getattr(sop, "name", None) != "betainc_grad" or sop.nin != 16 or sop.nout != 11:
        return None
    # d a_n / dp (Boik & Robison-Cox's polynomial) has the coefficients 46
    # and 66; d a_n / dq and d b_n / dq have none
    consts = {float(c.data) for c in sop.fgraph.variables
              if isinstance(c, Constant) and np.asarray(c.data).ndim == 0}
    return 66.0 in consts and 46.0 in consts


def _loop_rest(em, value, odts):
    """The outputs of a replaced ScalarLoop: VALUE first, then a stand-in
    of each other output's dtype (the gradients read only the first and
    the `converged` flag, which is true)."""
    out = [value]
    for dt in odts[1:]:
        k = _kdt(dt)
        if k == "bool":
            out.append(em.let(f"fill({value}, {em.const(np.array(True), 'bool')})", "bool"))
        elif k in ("f64", "f32"):
            out.append(em.cast(value, k))
        else:
            out.append(em.let(f"fill({value}, {em.const(np.array(0), k)})", k))
    return out


def _gamma_loop(em, sop, args, idt, odts):
    """PyTensor 2.27's four ScalarLoops of gammainc_grad / gammaincc_grad
    (what GammaInc.grad and GammaIncC.grad build: dP/dk by Gautschi's
    series, dQ/dk by a 9-term asymptotic series or an alternating series)
    as the exact sums those loops approximate, from kiln's gammainc,
    gammaincc and gammainc_da = dP/dk (core/runtime/special.c):
      gammainc_grad_a   sum_a = e^x P(k, x)         (so that
      gammainc_grad_b   sum_b = e^x (log x P - dP/dk)   e^-x (log x sum_a - sum_b) = dP/dk)
      gammaincc_grad_a  sum_a = (dQ/dk - Q (log x - psi k)) Gamma(k) e^x x^(1-k)
      gammaincc_grad_b  sum_b = (dQ/dk - P (psi k - log x)) Gamma(k) x^-k
    with dQ/dk = -dP/dk; Gamma(k) x^... as exp of logs.  The loops stop
    at a term of 1e-10 (P) or 1e-6 (Q's alternating series) or after 9
    terms, so PyTensor's own value differs from the exact one by up to
    about those amounts; kiln's is within ~1e-13 (docs/ops.md)."""
    name = sop.name
    dt = odts[0]
    if dt not in ("float64", "float32"):
        raise Unsupported(f"{name} in {dt}")
    _need("gammainc_da", 2)
    k_ = _kdt(dt)
    def a(i):
        return em.cast(args[i], k_)
    # args: n_steps, the loop's initial state, its constants
    if name == "gammainc_grad_a":      # init sum, lgamma(k+1), k; const log x
        k, lx = a(3), a(4)
    elif name == "gammainc_grad_b":    # init sum, lgamma(k+1), n, k; const log x
        k, lx = a(4), a(5)
    elif name == "gammaincc_grad_a":   # init sum, delta, x, k-1, fac, dfac; const x
        k = em.let(f"add({a(4)}, 1)", k_)
        lx = em.let(f"log({a(7)})", k_)
    else:                              # gammaincc_grad_b: init sum, log_s,
        k, lx = a(6), a(7)             # sign, log_delta, n; const k, log x
    x = em.let(f"exp({lx})", k_)
    da = em.let(f"gammainc_da({k}, {x})", k_)
    if name == "gammainc_grad_a":
        v = em.let(f"mul(exp({x}), gammainc({k}, {x}))", k_)
    elif name == "gammainc_grad_b":
        v = em.let(f"mul(exp({x}), sub(mul({lx}, gammainc({k}, {x})), {da}))", k_)
    elif name == "gammaincc_grad_a":
        v = em.let(f"mul(sub(neg({da}), mul(gammaincc({k}, {x}), sub({lx}, digamma({k})))), "
                   f"exp(sub(add(gammaln({k}), {x}), mul(sub({k}, 1), {lx}))))", k_)
    else:
        v = em.let(f"mul(sub(neg({da}), mul(gammainc({k}, {x}), sub(digamma({k}), {lx}))), "
                   f"exp(sub(gammaln({k}), mul({k}, {lx}))))", k_)
    return _loop_rest(em, v, odts)


_GAMMA_LOOPS = {"gammainc_grad_a": 5, "gammainc_grad_b": 6,
                "gammaincc_grad_a": 8, "gammaincc_grad_b": 8}


@_scalar(psm.Gamma)
def _gamma(em, sop, args, idt, odt):
    """Gamma(x) = sign exp(gammaln(x)), the sign (-1)^ceil(-x) for x < 0
    (negative on (-1, 0), (-3, -2), ...)."""
    k = _kdt(odt)
    x = em.cast(args[0], k)
    sg = em.let(f"where(or(gt({x}, 0), eq(mod(floor({x}), 2), 0)), 1.0, -1.0)", k)
    return em.let(f"mul({sg}, exp(gammaln({x})))", k)


@_scalar(ScalarLoop)
def _scalar_loop(em, sop, args, idt, odts):
    """PyTensor's betainc_grad loop (what BetaInc.grad builds: the
    derivative of I_x(p, q) in p or q by its continued fraction, run for
    the elements of one branch of a switch) as kiln's betainc_da /
    betainc_db on every element; other ScalarLoops fall back.  The loop's
    constants are f = q x / (p (1-x)), p, q, K, dK; x and 1 - x are
    recovered from r = f p / q as r / (1+r) and 1 / (1+r) (a few ulps),
    and where x >= 1/2 the derivative is taken of the mirror
    I_x(p, q) = 1 - I_{1-x}(q, p) so that 1 - x is never formed from x.
    Outputs: the derivative, the loop's other state (unused by the
    gradient; the derivative again, n = 1) and `converged` = true."""
    if _GAMMA_LOOPS.get(getattr(sop, "name", None)) == sop.nin:
        return _gamma_loop(em, sop, args, idt, odts)
    wrtp = _betainc_grad_wrtp(sop)
    if wrtp is None:
        raise Unsupported("kiln has no scalar op ScalarLoop (only PyTensor's "
                          "betainc_grad and gammainc(c)_grad)")
    dt = odts[0]
    if dt not in ("float64", "float32") or any(d != dt for d in idt[11:16]):
        raise Unsupported(f"betainc_grad in {dt}")
    _need("betainc_da", 3)
    _need("betainc_db", 3)
    k = _kdt(dt)
    f, p, q = (em.cast(v, k) for v in args[11:14])
    one = em.const(np.array(1.0), k)
    r = em.let(f"true_div(mul({f}, {p}), {q})", k)
    r1 = em.let(f"add({one}, {r})", k)
    x = em.let(f"true_div({r}, {r1})", k)
    y = em.let(f"true_div({one}, {r1})", k)
    own, mirror = ("betainc_da", "betainc_db") if wrtp else ("betainc_db", "betainc_da")
    d = em.let(f"where(lt({r}, {one}), {own}({p}, {q}, {x}), "
               f"neg({mirror}({q}, {p}, {y})))", k)
    n = em.let(f"fill({d}, {em.const(np.array(1), 'i64')})", "i64")
    done = em.let(f"fill({d}, {em.const(np.array(True), 'bool')})", "bool")
    return [d] * 9 + [n, done]
KG_SCALAR_CONVERTERS[ps.Clip] = _simple("clip", 3)
KG_SCALAR_CONVERTERS[ps.Add] = _chain("add")
KG_SCALAR_CONVERTERS[ps.Mul] = _chain("mul")


@_scalar(ps.Reciprocal)
def _reciprocal(em, sop, args, idt, odt):
    k = _kdt(odt)
    one = em.const(np.array(1.0), k) if k in ("f64", "f32") else None
    if one is None:
        raise Unsupported("integer reciprocal")
    return em.let(f"true_div({one}, {em.cast(args[0], k)})", k)


@_scalar(ps.Log2, ps.Log10)
def _logb(em, sop, args, idt, odt):
    k = _kdt(odt)
    base = 2.0 if isinstance(sop, ps.Log2) else 10.0
    c = em.const(np.array(np.log(base)), k)
    return em.let(f"true_div(log({em.cast(args[0], k)}), {c})", k)


@_scalar(ps.Exp2)
def _exp2(em, sop, args, idt, odt):
    k = _kdt(odt)
    two = em.const(np.array(2.0), k)
    return em.let(f"pow({two}, {em.cast(args[0], k)})", k)


@_scalar(ps.Sinh, ps.Cosh, ps.Tan, ps.ArcTanh)
def _hyperbolic(em, sop, args, idt, odt):
    """Formulas without cancellation: sinh = (expm1(x) - expm1(-x))/2 (the
    two terms have opposite signs), cosh = (exp(x) + exp(-x))/2, tan =
    sin/cos, arctanh = (log1p(x) - log1p(-x))/2."""
    k = _kdt(odt)
    if k not in ("f64", "f32"):
        raise Unsupported(f"{type(sop).__name__} to {odt}")
    x = em.cast(args[0], k)
    half = em.const(np.array(0.5), k)
    if isinstance(sop, ps.Tan):
        return em.let(f"true_div(sin({x}), cos({x}))", k)
    nx = em.let(f"neg({x})", k)
    if isinstance(sop, ps.Sinh):
        return em.let(f"mul({half}, sub(expm1({x}), expm1({nx})))", k)
    if isinstance(sop, ps.Cosh):
        return em.let(f"mul({half}, add(exp({x}), exp({nx})))", k)
    return em.let(f"mul({half}, sub(log1p({x}), log1p({nx})))", k)


@_scalar(ps.ArcSinh, ps.ArcCosh)
def _inverse_hyperbolic(em, sop, args, idt, odt):
    """Formulas without cancellation (Kahan; the forms glibc and Boost
    use): arcsinh(x) = sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))),
    arccosh(x) = log1p(t + sqrt(t (t + 2))) with t = x - 1 (NaN below 1,
    as NumPy).  Beyond |x| = 1e150 (1e18 in f32) x^2 would overflow, and
    both are sign(x) (log|x| + log 2) to the last bit."""
    k = _kdt(odt)
    if k not in ("f64", "f32"):
        raise Unsupported(f"{type(sop).__name__} to {odt}")
    x = em.cast(args[0], k)
    one = em.const(np.array(1.0), k)
    lim = em.const(np.array(1e150 if k == "f64" else 1e18), k)
    ln2 = em.const(np.array(np.log(2.0)), k)
    if isinstance(sop, ps.ArcCosh):
        t = em.let(f"sub({x}, {one})", k)
        two = em.const(np.array(2.0), k)
        small = em.let(f"log1p(add({t}, sqrt(mul({t}, add({t}, {two})))))", k)
        big = em.let(f"where(gt({x}, {lim}), add(log({x}), {ln2}), {small})", k)
        nan = em.const(np.array(np.nan), k)
        return em.let(f"where(lt({x}, {one}), {nan}, {big})", k)
    a = em.let(f"abs({x})", k)
    a2 = em.let(f"square({a})", k)
    small = em.let(f"log1p(add({a}, true_div({a2}, add({one}, sqrt(add({one}, {a2}))))))", k)
    r = em.let(f"where(gt({a}, {lim}), add(log({a}), {ln2}), {small})", k)
    return em.let(f"mul(sign({x}), {r})", k)


_CMP = {ps.LT: "lt", ps.GT: "gt", ps.LE: "le", ps.GE: "ge", ps.EQ: "eq", ps.NEQ: "ne"}


@_scalar(*_CMP)
def _compare(em, sop, args, idt, odt):
    kop = _CMP[type(sop)]
    # compare in the promoted dtype, as NumPy/PyTensor do
    up = ps.upcast(*idt)
    k = _kdt(up) if up not in _WIDE else "i64"
    a = [em.cast(x, k) for x in args]
    return em.let(f"{kop}({a[0]}, {a[1]})", "bool")


@_scalar(ps.IsNan, ps.IsInf)
def _isnanf(em, sop, args, idt, odt):
    kop = "isnan" if isinstance(sop, ps.IsNan) else "isinf"
    _need(kop)
    x = args[0]
    if not _is_float(idt[0]):
        return em.let(f"ne({em.cast(x, 'i64')}, {em.cast(x, 'i64')})", "bool")
    return em.let(f"{kop}({x})", "bool")


@_scalar(ps.AND, ps.OR, ps.XOR)
def _logic(em, sop, args, idt, odt):
    if any(d != "bool" for d in idt):
        raise Unsupported("bitwise and/or/xor on integers")
    kop = {ps.AND: "and", ps.OR: "or", ps.XOR: "ne"}[type(sop)]
    acc = args[0]
    for x in args[1:]:
        acc = em.let(f"{kop}({acc}, {x})", "bool")
    return acc


@_scalar(ps.Invert)
def _invert(em, sop, args, idt, odt):
    if idt[0] != "bool":
        raise Unsupported("bitwise invert on integers")
    return em.let(f"not({args[0]})", "bool")


@_scalar(ps.Switch)
def _switch(em, sop, args, idt, odt):
    k = _kdt(odt)
    c = em.cast(args[0], "bool")
    return em.let(f"where({c}, {em.cast(args[1], k)}, {em.cast(args[2], k)})", k)


@_scalar(ps.Second)
def _second(em, sop, args, idt, odt):
    k = _kdt(odt)
    return em.let(f"fill({args[0]}, {em.cast(args[1], k)})", k)


@_scalar(ps.Identity)
def _identity(em, sop, args, idt, odt):
    return em.cast(args[0], _kdt(odt))


@_scalar(ps.Cast)
def _castop(em, sop, args, idt, odt):
    k = _kdt(odt)
    if odt in _WIDE and idt[0] not in ("bool",) and not (idt[0] in _WIDE and
                                                        np.can_cast(idt[0], odt)):
        raise Unsupported(f"cast {idt[0]} -> {odt} (wraps in NumPy; kiln holds {odt} as i64)")
    if odt == "bool":
        return em.cast(args[0], "bool")
    return em.cast(args[0], k)


@_scalar(ps.Composite)
def _composite(em, sop, args, idt, odt):
    fg = sop.fgraph
    sub = dict(zip(fg.inputs, args))
    for node in fg.toposort():
        ins = []
        for v in node.inputs:
            if v in sub:
                ins.append(sub[v])
            elif isinstance(v, Constant):
                ins.append(em.const(np.asarray(v.data).astype(
                    _NP_OF_KDT[_kdt(v.type.dtype)]), _kdt(v.type.dtype)))
            else:
                raise Unsupported(f"composite input {v}")
        outs = _convert_scalar(em, node.op, ins, [v.type.dtype for v in node.inputs],
                               [o.type.dtype for o in node.outputs])
        sub.update(zip(node.outputs, outs))
    res = []
    for o in fg.outputs:
        if o in sub:
            res.append(sub[o])
        else:
            res.append(em.const(np.asarray(o.data), _kdt(o.type.dtype)))
    return res


def _convert_scalar(em, sop, args, idt, odts):
    fn = None
    for cls in type(sop).__mro__:
        fn = KG_SCALAR_CONVERTERS.get(cls)
        if fn is not None:
            break
    if fn is None:
        raise Unsupported(f"kiln has no scalar op {type(sop).__name__}")
    for d in idt:
        _kdt(d, "an input")
    res = fn(em, sop, args, idt, odts[0] if len(odts) == 1 else odts)
    return res if isinstance(res, list) else [res]


# --------------------------------------------------------------------------
# Op converters: fn(em, node, ins) -> list of kiln names (one per output)

KG_CONVERTERS = {}


def kg_convert(*classes):
    """Register a converter for the given PyTensor Op classes."""
    def deco(fn):
        for c in classes:
            KG_CONVERTERS[c] = fn
        return fn
    return deco


@kg_convert(pte.Elemwise)
def _elemwise(em, node, ins):
    return _convert_scalar(em, node.op.scalar_op, ins,
                           [v.type.dtype for v in node.inputs],
                           [o.type.dtype for o in node.outputs])


_REDUCE = {ps.Add: "sum", ps.Mul: "prod", ps.ScalarMaximum: "max",
           ps.ScalarMinimum: "min", ps.AND: "all", ps.OR: "any"}


@kg_convert(pte.CAReduce)
def _careduce(em, node, ins):
    op = node.op
    kop = _REDUCE.get(type(op.scalar_op))
    if kop is None:
        raise Unsupported(f"kiln has no reduction by {type(op.scalar_op).__name__}")
    _need(kop)
    x, = ins
    idt = node.inputs[0].type.dtype
    odt = node.outputs[0].type.dtype
    ko = _kdt(odt)
    if kop in ("sum", "prod"):
        acc = op._acc_dtype(idt)
        if acc in _WIDE or acc == "uint64":
            raise Unsupported(f"accumulation in {acc}")
        x = em.cast(x, _kdt(acc))
        rk = _kdt(acc) if not (acc in ("bool", "int32")) else "i64"
    elif kop in ("max", "min"):
        if idt == "bool":
            kop = "all" if kop == "min" else "any"
            _need(kop)
            rk = "bool"
        else:
            rk = em.kdt[x]
    else:
        x = em.cast(x, "bool")
        rk = "bool"
    ndim = node.inputs[0].type.ndim
    axis = op.axis if op.axis is not None else tuple(range(ndim))
    if len(axis) == 0:
        r = x
    else:
        ax = ", ".join(str(a % ndim) for a in axis)
        r = em.let(f"{kop}({x}, axis=[{ax}])", rk)
    return [em.cast(r, ko)]


@kg_convert(pte.DimShuffle)
def _dimshuffle(em, node, ins):
    x, = ins
    op = node.op
    order = list(op.new_order)
    kept = [d for d in order if d != "x"]
    ndim = op.input_ndim
    drop = [d for d in range(ndim) if d not in kept]
    if drop:
        # index 0 rather than squeeze: PyTensor knows these dims are 1, kiln
        # may only know a symbol (a slice of a symbolic dim)
        ix = ", ".join("0" if d in drop else ":" for d in range(ndim))
        x = em.let(f"{x}[{ix}]", em.kdt[x])
    srt = sorted(kept)
    perm = [srt.index(d) for d in kept]
    if perm != list(range(len(perm))):
        x = em.let(f"transpose({x}, axes=[{', '.join(map(str, perm))}])", em.kdt[x])
    newax = [i for i, d in enumerate(order) if d == "x"]
    if newax:
        x = em.let(f"expand_dims({x}, axis=[{', '.join(map(str, newax))}])", em.kdt[x])
    return [x]


def _dims_text(dims):
    return ", ".join(str(int(d)) for d in dims)


@kg_convert(ptsh.Reshape)
def _reshape(em, node, ins):
    x = ins[0]
    try:
        shp = [int(s) for s in np.asarray(_const_value(node.inputs[1])).reshape(-1)]
    except Unsupported:
        st = node.outputs[0].type.shape
        if sum(s is None for s in st) > 1:
            raise
        shp = [-1 if s is None else s for s in st]
    return [em.let(f"reshape({x}, shape=[{_dims_text(shp)}])", em.kdt[x])]


def _static_or_const_shape(node, shape_inputs):
    out = []
    st = node.outputs[0].type.shape
    for i, v in enumerate(shape_inputs):
        try:
            out.append(int(_const_value(v)))
        except Unsupported:
            if st[i] is None:
                raise
            out.append(int(st[i]))
    return out


@kg_convert(ptb.Alloc)
def _alloc(em, node, ins):
    k = _kdt(node.outputs[0].type.dtype)
    v = em.cast(ins[0], k)
    dims = _alloc_dims(node)
    if dims is None or all(kind == "const" for kind, _ in dims):
        shp = _static_or_const_shape(node, node.inputs[1:])
        return [em.let(f"alloc({v}, shape=[{_dims_text(shp)}])", k)]
    # sizes from Shape_i of other values (PyTensor's gradients build these):
    # a zero model with one vector per dim, each of that dim's size
    r = len(dims)
    model = None
    for p, (kind, val) in enumerate(dims):
        if kind == "const":
            u = em.let(f"zeros(shape=[{val}], dtype={k})", k)
        else:
            xvar, d = val
            x = em.val[xvar]
            zero = em.const(np.array(0, dtype=_NP_OF_KDT[k]), k)
            z = em.let(f"fill({x}, {zero})", k)
            others = [a for a in range(xvar.type.ndim) if a != d]
            u = em.let(f"sum({z}, axis=[{', '.join(map(str, others))}])", k) if others else z
        if r > 1:
            axes = ", ".join(str(a) for a in range(r) if a != p)
            u = em.let(f"expand_dims({u}, axis=[{axes}])", k)
        model = u if model is None else em.let(f"add({model}, {u})", k)
    return [em.let(f"fill({model}, {v})", k)]


def _alloc_dims(node):
    """Per output dim of an Alloc: ("const", size) or ("shape", (X, d)) for
    Shape_i{d}(X); None when some size is neither."""
    out = []
    for v in node.inputs[1:]:
        if v.owner is not None and isinstance(v.owner.op, ptsh.Shape_i) and \
                isinstance(v.owner.inputs[0].type, TensorType):
            out.append(("shape", (v.owner.inputs[0], v.owner.op.i)))
            continue
        try:
            out.append(("const", int(_const_value(v))))
        except Unsupported:
            return None
    return out


def _reads(node):
    """The variables a node's kiln conversion reads (usually its inputs)."""
    if isinstance(node.op, (ptb.ARange, ptb.Tri)):
        out = []
        for v in node.inputs:
            sd = _shape_dim(v)
            w = sd[0] if sd is not None else v
            if w not in out:
                out.append(w)
        return out
    if isinstance(node.op, ptb.Alloc):
        dims = _alloc_dims(node)
        if dims is not None:
            xs = []
            for kind, val in dims:
                if kind == "shape" and val[0] not in xs:
                    xs.append(val[0])
            return [node.inputs[0]] + xs
    return node.inputs


@kg_convert(ptb.Join)
def _join(em, node, ins):
    k = _kdt(node.outputs[0].type.dtype)
    axis = int(_const_value(node.inputs[0])) % node.outputs[0].type.ndim
    xs = [em.cast(x, k) for x in ins[1:]]
    if len(xs) == 1:
        return [xs[0]]
    return [em.let(f"join({axis}, {', '.join(xs)})", k)]


@kg_convert(ptb.Split)
def _split(em, node, ins):
    """Split(x, axis, sizes) with constant sizes (Join's gradient): one
    basic slice of x per output."""
    nd = node.outputs[0].type.ndim
    axis = int(_const_value(node.inputs[1])) % nd
    sv = node.inputs[2]
    if sv.owner is not None and isinstance(sv.owner.op, ptb.MakeVector):
        sizes = [_const_value(v) for v in sv.owner.inputs]
    else:
        sizes = _const_value(sv)
    out, at = [], 0
    for n in np.ravel(sizes).astype(int):
        idx = ", ".join([":"] * axis + [f"{at}:{at + n}"])
        out.append(em.let(f"{ins[0]}[{idx}]", em.kdt[ins[0]]))
        at += n
    return out


@kg_convert(ptb.MakeVector)
def _makevector(em, node, ins):
    k = _kdt(node.outputs[0].type.dtype)
    if not ins:
        raise Unsupported("an empty MakeVector")
    xs = [em.cast(x, k) for x in ins]
    return [em.let(f"stack({', '.join(xs)})", k)]


def _dim_size(em, x, xvar, d):
    """i64 scalar: the size of dim D of X (static: a constant; else counted
    with kiln ops, exact: kiln has no shape op)."""
    st = xvar.type.shape[d]
    if st is not None:
        return em.const(np.array(st, dtype=np.int64), "i64")
    one = em.const(np.array(1, dtype=np.int64), "i64")
    ones = em.let(f"fill({x}, {one})", "i64")
    nd = xvar.type.ndim
    if nd == 1:
        return em.let(f"sum({ones})", "i64")
    others = ", ".join(str(a) for a in range(nd) if a != d)
    per = em.let(f"sum({ones}, axis=[{others}])", "i64")
    return em.let(f"sum(cast(ge({per}, 0), dtype=i64))", "i64")


@kg_convert(ptsh.Shape_i)
def _shape_i(em, node, ins):
    return [_dim_size(em, ins[0], node.inputs[0], node.op.i)]


@kg_convert(ptsh.Shape)
def _shape(em, node, ins):
    xv = node.inputs[0]
    st = xv.type.shape
    if all(s is not None for s in st):
        return [em.const(np.array(st, dtype=np.int64), "i64")]
    dims = [_dim_size(em, ins[0], xv, d) for d in range(xv.type.ndim)]
    return [em.let(f"stack({', '.join(dims)})", "i64")]


@kg_convert(ptsh.SpecifyShape)
def _specify_shape(em, node, ins):
    x = ins[0]
    st = node.outputs[0].type.shape
    if all(s is not None for s in st) and st != node.inputs[0].type.shape and st:
        return [em.let(f"broadcast_to({x}, shape=[{_dims_text(st)}])", em.kdt[x])]
    return [x]


@kg_convert(DeepCopyOp, ViewOp, ptb.TensorFromScalar, ptb.ScalarFromTensor,
            ptsh.Unbroadcast)
def _identity_op(em, node, ins):
    return [ins[0]]


def _index_text(em, entries):
    parts = []
    for e in entries:
        if isinstance(e, slice):
            vals = []
            for v in (e.start, e.stop, e.step):
                if v is None or (isinstance(v, Constant) and v.data is None):
                    vals.append("")
                else:
                    vals.append(str(int(_const_value(v) if not isinstance(v, (int, np.integer)) else v)))
            parts.append(":".join(vals) if vals[2] else f"{vals[0]}:{vals[1]}")
        else:
            parts.append(str(int(_const_value(e) if not isinstance(e, (int, np.integer)) else e)))
    return ", ".join(parts) if parts else ":"


@kg_convert(ptst.Subtensor)
def _subtensor(em, node, ins):
    idx = ptst.get_idx_list(node.inputs, node.op.idx_list)
    return [em.let(f"{ins[0]}[{_index_text(em, idx)}]", em.kdt[ins[0]])]


@kg_convert(ptst.IncSubtensor)
def _incsubtensor(em, node, ins):
    op = node.op
    idx = ptst.get_idx_list(node.inputs[1:], op.idx_list)
    x = ins[0]
    v = em.cast(ins[1], em.kdt[x])
    f = "set_subtensor" if op.set_instead_of_inc else "inc_subtensor"
    if not idx:
        raise Unsupported("an empty index")
    return [em.let(f"{f}({x}[{_index_text(em, idx)}], {v})", em.kdt[x])]


def _index_name(em, var, name):
    if var.type.dtype == "bool":
        raise Unsupported("boolean mask indexing")
    if var.type.dtype not in ("int64", "int32") and not var.type.dtype.startswith(("int", "uint")):
        raise Unsupported(f"index of dtype {var.type.dtype}")
    return em.cast(name, "i64") if em.kdt[name] not in ("i64", "i32") else name


@kg_convert(ptst.AdvancedSubtensor1)
def _adv_sub1(em, node, ins):
    x, i = ins
    i = _index_name(em, node.inputs[1], i)
    return [em.let(f"{x}[{i}]", em.kdt[x])]


@kg_convert(ptst.AdvancedIncSubtensor1)
def _adv_inc1(em, node, ins):
    x, v, i = ins
    i = _index_name(em, node.inputs[2], i)
    v = em.cast(v, em.kdt[x])
    f = "set_subtensor" if node.op.set_instead_of_inc else "inc_subtensor"
    return [em.let(f"{f}({x}[{i}], {v})", em.kdt[x])]


def _one_tensor_index(node, idx_inputs):
    """Axis and variable of the single integer tensor index among full slices."""
    axis, tvar = None, None
    for pos, v in enumerate(idx_inputs):
        if isinstance(v.type, TensorType):
            if tvar is not None:
                raise Unsupported("more than one index array")
            axis, tvar = pos, v
            continue
        if isinstance(v, Constant) and isinstance(v.data, slice) and \
                v.data == slice(None, None, None):
            continue
        raise Unsupported("an index other than one array and full slices")
    if tvar is None:
        raise Unsupported("no index array")
    return axis, tvar


def _several_index_arrays(em, node, x, idx):
    """x[..., i0, i1, ..., ik, ...]: k >= 2 integer index arrays on
    adjacent axes among full slices, x of static shape (pm.Categorical's
    p[arange(n), y]).  NumPy's result is take() of x with those axes
    merged, at the linear index ((i0 n1 + i1) n2 + i2)...; each index is
    checked against its own axis first (IndexError, as NumPy and
    PyTensor), so a linear index never hides an out-of-range one.
    Returns (x with the axes merged, linear index, axis)."""
    arr = [p for p, v in enumerate(idx) if isinstance(v.type, TensorType)]
    for p, v in enumerate(idx):
        if p in arr:
            continue
        if not (isinstance(v, Constant) and isinstance(v.data, slice)
                and v.data == slice(None, None, None)):
            raise Unsupported("an index other than index arrays and full slices")
    if arr != list(range(arr[0], arr[0] + len(arr))):
        raise Unsupported("index arrays on axes that are not adjacent")
    shape = node.inputs[0].type.shape
    if any(d is None for d in shape):
        raise Unsupported("several index arrays on a tensor whose shape is "
                          "not static (give it a static shape)")
    _need("check", 2)
    _need("all")
    a = arr[0]
    lin, conds = None, []
    for j, p in enumerate(arr):
        var = idx[p]
        n = int(shape[a + j])
        i = _index_name(em, var, em.val.get(var) or _name_of(em, var))
        nn = em.const(np.array(n), "i64")
        lo = em.const(np.array(-n), "i64")
        conds.append(em.let(f"all(and(ge({i}, {lo}), lt({i}, {nn})))", "bool"))
        zero = em.const(np.array(0), "i64")
        i = em.let(f"where(lt({i}, {zero}), add({i}, {nn}), {i})", "i64")
        lin = i if lin is None else em.let(f"add(mul({lin}, {nn}), {i})", "i64")
    msg = "kiln: index out of bounds in advanced indexing"
    em.checks[msg] = (IndexError, "index out of bounds")
    lin = em.let(f"check({lin}, {', '.join(conds)}, msg={_kg_string(msg)})", "i64")
    merged = list(shape[:a]) + [int(np.prod(shape[a:a + len(arr)], dtype=np.int64))] \
        + list(shape[a + len(arr):])
    xr = em.let(f"reshape({x}, shape=[{', '.join(str(int(d)) for d in merged)}])",
                em.kdt[x])
    return xr, lin, a


def _n_index_arrays(idx):
    return sum(isinstance(v.type, TensorType) for v in idx)


def _two_index_arrays_by_diagonal(em, node, x, idx):
    """x[..., i, j, ...] with two 1-D integer index arrays of one static
    length L on adjacent axes a, a+1 among full slices, for an x whose
    shape is not static (PyMC's LKJCholeskyCov: chol[tril rows, tril
    cols] on a (3, ?) matrix): take(take(x, i, a), j, a+1) is x[..., i_p,
    j_q, ...] for every pair (p, q); its diagonal p = q, moved back to
    axis a, is NumPy's result.  O(L^2) values; take checks each index
    against its own axis (IndexError) and counts negative ones from the
    end, as NumPy.  Returns None when the node is not of that form."""
    arr = [p for p, v in enumerate(idx) if isinstance(v.type, TensorType)]
    if len(arr) != 2 or arr[1] != arr[0] + 1:
        return None
    if any(p not in arr and not (isinstance(v, Constant) and isinstance(v.data, slice)
                                 and v.data == slice(None, None, None))
           for p, v in enumerate(idx)):
        return None
    iv, jv = idx[arr[0]], idx[arr[1]]
    if iv.type.ndim != 1 or jv.type.ndim != 1 or iv.type.shape[0] is None \
            or iv.type.shape != jv.type.shape:
        return None
    a, nd = arr[0], node.inputs[0].type.ndim
    i = _index_name(em, iv, em.val.get(iv) or _name_of(em, iv))
    j = _index_name(em, jv, em.val.get(jv) or _name_of(em, jv))
    k = em.kdt[x]
    t = em.let(f"take(take({x}, {i}, axis={a}), {j}, axis={a + 1})", k)
    if nd > 2:   # the pair to the last two axes, for diagonal
        perm = [d for d in range(nd) if d not in (a, a + 1)] + [a, a + 1]
        t = em.let(f"transpose({t}, axes=[{', '.join(map(str, perm))}])", k)
    d = em.let(f"diagonal({t})", k)
    if nd > 2 and a != nd - 2:   # L from the last axis back to axis a
        perm = list(range(a)) + [nd - 2] + list(range(a, nd - 2))
        d = em.let(f"transpose({d}, axes=[{', '.join(map(str, perm))}])", k)
    return d


@kg_convert(ptst.AdvancedSubtensor)
def _adv_sub(em, node, ins):
    if _n_index_arrays(node.inputs[1:]) > 1:
        if any(s is None for s in node.inputs[0].type.shape):
            d = _two_index_arrays_by_diagonal(em, node, ins[0], node.inputs[1:])
            if d is not None:
                return [d]
        xr, lin, a = _several_index_arrays(em, node, ins[0], node.inputs[1:])
        return [em.let(f"take({xr}, {lin}, axis={a})", em.kdt[ins[0]])]
    axis, tvar = _one_tensor_index(node, node.inputs[1:])
    i = _index_name(em, tvar, em.val.get(tvar) or _name_of(em, tvar))
    x = ins[0]
    return [em.let(f"take({x}, {i}, axis={axis})", em.kdt[x])]


@kg_convert(ptst.AdvancedIncSubtensor)
def _adv_inc(em, node, ins):
    if getattr(node.op, "ignore_duplicates", False) and not node.op.set_instead_of_inc:
        raise Unsupported("inc with ignore_duplicates")
    f = "set_subtensor" if node.op.set_instead_of_inc else "inc_subtensor"
    if _n_index_arrays(node.inputs[2:]) > 1:
        x = ins[0]
        xr, lin, a = _several_index_arrays(em, node, x, node.inputs[2:])
        v = em.cast(ins[1], em.kdt[x])
        colons = ", ".join([":"] * a + [lin])
        r = em.let(f"{f}({xr}[{colons}], {v})", em.kdt[x])
        shape = node.inputs[0].type.shape
        return [em.let(f"reshape({r}, shape=[{', '.join(str(int(d)) for d in shape)}])",
                       em.kdt[x])]
    axis, tvar = _one_tensor_index(node, node.inputs[2:])
    i = _index_name(em, tvar, em.val.get(tvar) or _name_of(em, tvar))
    x = ins[0]
    v = em.cast(ins[1], em.kdt[x])
    colons = ", ".join([":"] * axis + [i])
    return [em.let(f"{f}({x}[{colons}], {v})", em.kdt[x])]


@kg_convert(ptm.Dot)
def _dot(em, node, ins):
    """Dot; a Blockwise of it (pt.matmul and vectorised dots over batch
    axes, which broadcast) as kiln's batched matmul for (m,k),(k,n)->(m,n)
    and as the same broadcast product summed over k for the vector
    signatures."""
    odt = node.outputs[0].type.dtype
    if not _is_float(odt):
        raise Unsupported(f"integer dot ({odt})")
    k = _kdt(odt)
    a, b = (em.cast(x, k) for x in ins)
    na, nb = (v.type.ndim for v in node.inputs)
    if not isinstance(node.op, ptbw.Blockwise):
        if na not in (1, 2) or nb not in (1, 2):
            raise Unsupported("dot of arrays of rank > 2")
        return [em.let(f"dot({a}, {b})", k)]
    core = [len([d for d in sig.split(",") if d.strip()])
            for sig in re.findall(r"\(([^)]*)\)",
                                  node.op.signature.split("->")[0])]
    if core == [2, 2]:
        return [em.let(f"matmul({a}, {b})", k)]
    if core == [2, 1]:     # [..., m, k] . [..., k] -> [..., m]
        b = em.let(f"expand_dims({b}, axis={nb - 1})", k)
        p, axis = em.let(f"mul({a}, {b})", k), max(na, nb + 1) - 1
    elif core == [1, 2]:   # [..., k] . [..., k, n] -> [..., n]
        a = em.let(f"expand_dims({a}, axis={na})", k)
        p, axis = em.let(f"mul({a}, {b})", k), max(na + 1, nb) - 2
    elif core == [1, 1]:   # [..., k] . [..., k] -> [...]
        p, axis = em.let(f"mul({a}, {b})", k), max(na, nb) - 1
    else:
        raise Unsupported(f"Blockwise(Dot) with signature {node.op.signature}")
    return [em.let(f"sum({p}, axis={axis})", k)]


# ---- linear algebra (issue 28; docs/ops.md "Linear algebra") ------------
# kiln's ops take a batch of leading axes themselves, so a Blockwise over
# one of these core ops converts as the core op does (its batch axes must
# then be equal, not broadcast: kiln refuses others when the graph is built).

def _core(node):
    return getattr(node.op, "core_op", node.op)


def _linalg_ins(em, node, ins, what):
    for v in node.inputs:
        if not _is_float(v.type.dtype) and v.type.dtype not in ("int64", "int32"):
            raise Unsupported(f"{what} of {v.type.dtype}")
    _need("cholesky", 1)
    return [em.cast(x, "f64") if em.kdt[x] != "f64" else x for x in ins]


def _swap_last(em, x, ndim):
    perm = list(range(ndim))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return em.let(f"transpose({x}, axes=[{', '.join(map(str, perm))}])", "f64")


def _out_f64(em, node, name):
    """NAME (f64) in the node's output dtype."""
    k = _kdt(node.outputs[0].type.dtype)
    return em.cast(name, k) if k != "f64" else name


@kg_convert(ptsl.Cholesky)
def _cholesky(em, node, ins):
    """lower: cholesky(a) reads a's lower triangle; upper: the transpose
    of cholesky(a^T), which reads a's upper triangle (SciPy's).
    on_error="nan" gives NaNs where PyTensor does (PyMC's MvNormal)."""
    op = _core(node)
    a, = _linalg_ins(em, node, ins, "Cholesky")
    nd = node.inputs[0].type.ndim
    attr = ", nan_on_error=true" if op.on_error == "nan" else ""
    if op.lower:
        r = em.let(f"cholesky({a}{attr})", "f64")
    else:
        r = _swap_last(em, em.let(f"cholesky({_swap_last(em, a, nd)}{attr})",
                                  "f64"), nd)
    return [_out_f64(em, node, r)]


@kg_convert(ptsl.SolveTriangular)
def _solve_triangular(em, node, ins):
    op = _core(node)
    if op.unit_diagonal:
        raise Unsupported("SolveTriangular(unit_diagonal=True)")
    a, b = _linalg_ins(em, node, ins, "SolveTriangular")
    trans = op.trans in (1, 2, "T", "C")
    attrs = (", lower=true" if op.lower else "") + (", trans=true" if trans else "")
    return [_out_f64(em, node, em.let(f"solve_triangular({a}, {b}{attrs})", "f64"))]


@kg_convert(ptsl.Solve)
def _solve(em, node, ins):
    """every assume_a ('gen', 'sym', 'pos', ...) as an LU solve: the same
    solution for the matrices those assume"""
    a, b = _linalg_ins(em, node, ins, "Solve")
    return [_out_f64(em, node, em.let(f"solve({a}, {b})", "f64"))]


@kg_convert(ptnl.MatrixInverse)
def _matrix_inverse(em, node, ins):
    a, = _linalg_ins(em, node, ins, "MatrixInverse")
    return [_out_f64(em, node, em.let(f"inverse({a})", "f64"))]


@kg_convert(ptblas.BatchedDot)
def _batched_dot(em, node, ins):
    """(b,m,k),(b,k,n)->(b,m,n): what PyTensor specialises a matmul
    without broadcast batch axes to"""
    odt = node.outputs[0].type.dtype
    if not _is_float(odt):
        raise Unsupported(f"integer BatchedDot ({odt})")
    k = _kdt(odt)
    a, b = (em.cast(x, k) for x in ins)
    return [em.let(f"matmul({a}, {b})", k)]


@kg_convert(ptnl.Det)
def _det(em, node, ins):
    a, = _linalg_ins(em, node, ins, "Det")
    _need("det", 1)
    return [_out_f64(em, node, em.let(f"det({a})", "f64"))]


@kg_convert(ptnl.SLogDet)
def _slogdet(em, node, ins):
    """[sign, log|det|], as numpy.linalg.slogdet (PyTensor rewrites
    sign(det) and log(abs(det)) to it)"""
    a, = _linalg_ins(em, node, ins, "SLogDet")
    _need("sign_det", 1)
    return [_out_f64(em, node, em.let(f"sign_det({a})", "f64")),
            _out_f64(em, node, em.let(f"log_det({a})", "f64"))]


@kg_convert(ptb.ExtractDiag)
def _extract_diag(em, node, ins):
    op = _core(node)
    nd = node.inputs[0].type.ndim
    if op.offset != 0 or sorted((op.axis1 % nd, op.axis2 % nd)) != [nd - 2, nd - 1]:
        raise Unsupported("ExtractDiag with an offset or axes other than the last two")
    a, = _linalg_ins(em, node, ins, "ExtractDiag")
    return [_out_f64(em, node, em.let(f"diagonal({a})", "f64"))]


@kg_convert(ptb.AllocDiag)
def _alloc_diag(em, node, ins):
    op = _core(node)
    nd = node.outputs[0].type.ndim
    if (op.offset != 0 or len(node.inputs) != 1 or
            sorted((op.axis1 % nd, op.axis2 % nd)) != [nd - 2, nd - 1]):
        raise Unsupported("AllocDiag with an offset or axes other than the last two")
    v, = _linalg_ins(em, node, ins, "AllocDiag")
    return [_out_f64(em, node, em.let(f"diag({v})", "f64"))]


def _shape_dim(var):
    """(X, d) when VAR is the size of dim d of tensor X (Shape_i, maybe
    through scalar/tensor wrappers or an integer cast), else None."""
    while var.owner is not None:
        op = var.owner.op
        if isinstance(op, ptsh.Shape_i) and isinstance(var.owner.inputs[0].type, TensorType):
            return var.owner.inputs[0], op.i
        if isinstance(op, (ptb.ScalarFromTensor, ptb.TensorFromScalar)) or (
                isinstance(op, pte.Elemwise) and isinstance(op.scalar_op, ps.Cast)
                and var.type.dtype in ("int64", "int32")):
            var = var.owner.inputs[0]
            continue
        return None
    return None


def _iota_of_dim(em, xvar, d):
    """i64 [n]: 0, 1, ..., n-1 for n the size of dim D of XVAR (already
    converted), computed from x itself (cumsum of ones along that dim),
    so it needs no size when the graph is built: kiln has no shape op."""
    x = em.val[xvar]
    nd = xvar.type.ndim
    if nd > 1:
        ix = ", ".join(":" if a == d else "0:1" for a in range(nd))
        x = em.let(f"{x}[{ix}]", em.kdt[x])
    one = em.const(np.array(1, dtype=np.int64), "i64")
    ones = em.let(f"fill({x}, {one})", "i64")
    c = em.let(f"cumsum({ones}, axis={d})", "i64")
    if nd > 1:
        c = em.let(f"reshape({c}, shape=[-1])", "i64")
    return em.let(f"sub({c}, {one})", "i64")


def _iota(em, var):
    """i64 [n] 0..n-1 for an integer scalar VAR: a constant, or the size
    of a tensor's dim; else Unsupported."""
    sd = _shape_dim(var)
    if sd is not None:
        return _iota_of_dim(em, *sd)
    try:
        n = int(_const_value(var))
    except Unsupported:
        raise Unsupported(f"a length computed at run time ('{var}'); kiln sizes "
                          "an arange or a Tri from a constant or a tensor's dim") from None
    return em.const(np.arange(max(n, 0), dtype=np.int64), "i64")


@kg_convert(ptb.ARange)
def _arange(em, node, ins):
    """ARange(start, stop, step) with constant start >= 0 and step > 0 and
    stop a constant or the size of a tensor's dim (pt.arange(x.shape[0])):
    0..stop-1 from that dim, sliced [start::step] (numpy.arange's values)."""
    start_v, stop_v, step_v = node.inputs
    try:
        start, step = (_const_value(v).item() for v in (start_v, step_v))
    except Unsupported:
        raise Unsupported("ARange with a start or step computed at run time") from None
    if start != int(start) or step != int(step) or start < 0 or step <= 0:
        raise Unsupported(f"ARange with start {start}, step {step} (kiln: "
                          "integers, start >= 0, step > 0)")
    r = _iota(em, stop_v)
    start, step = int(start), int(step)
    if start or step != 1:
        r = em.let(f"{r}[{start}::{step}]" if step != 1 else f"{r}[{start}:]", "i64")
    return [em.cast(r, _kdt(node.outputs[0].type.dtype))]


@kg_convert(ptb.Tri)
def _tri(em, node, ins):
    """Tri(N, M, k): ones on and below the k-th diagonal.  Constant N, M
    and k 0 or -1 (what tril / triu and Cholesky's gradient make): kiln's
    tril; else (N or M the size of a tensor's dim, any constant k) the
    mask j <= i + k of two index vectors."""
    try:
        n, mm, k = (int(_const_value(v)) for v in node.inputs)
        if k in (0, -1) and (k == 0 or n == mm) and kiln_has_op("tril"):
            t = em.let(f"tril(ones(shape=[{n}, {mm}]))", "f64")
            if k == -1:
                t = em.let(f"sub({t}, diag(ones(shape=[{n}])))", "f64")
            return [em.cast(t, _kdt(node.outputs[0].type.dtype))]
    except Unsupported:
        pass
    try:
        k = int(_const_value(node.inputs[2]))
    except Unsupported:
        raise Unsupported("Tri with a diagonal offset k computed at run time") from None
    i = em.let(f"expand_dims({_iota(em, node.inputs[0])}, axis=1)", "i64")
    j = em.let(f"expand_dims({_iota(em, node.inputs[1])}, axis=0)", "i64")
    if k:
        i = em.let(f"add({i}, {em.const(np.array(k, dtype=np.int64), 'i64')})", "i64")
    return [em.cast(em.let(f"le({j}, {i})", "bool"), _kdt(node.outputs[0].type.dtype))]


@kg_convert(ptm.Argmax)
def _argmax(em, node, ins):
    """Argmax over one axis (kiln's argmax: the first index of the max,
    NaN the max, as NumPy) or over every axis (of the flattened x)."""
    x, = ins
    nd = node.inputs[0].type.ndim
    axes = tuple(range(nd)) if node.op.axis is None else tuple(node.op.axis)
    _need("argmax", 1, ", axis=0")
    if nd == 0:
        return [em.const(np.array(0, dtype=np.int64), "i64")]
    if len(axes) == 1:
        return [em.let(f"argmax({x}, axis={axes[0] % nd})", "i64")]
    if sorted(a % nd for a in axes) != list(range(nd)):
        raise Unsupported(f"Argmax over axes {axes} of a rank-{nd} tensor "
                          "(kiln: one axis, or all)")
    if nd > 1:
        x = em.let(f"reshape({x}, shape=[-1])", em.kdt[x])
    return [em.let(f"argmax({x}, axis=0)", "i64")]


@kg_convert(ptx.Repeat)
def _repeat(em, node, ins):
    """Repeat(x, repeats) with one constant count (a scalar, or a vector of
    equal counts): kiln's repeat (numpy.repeat; axis None flattens)."""
    _need("repeat", 1, ", repeats=2")
    try:
        reps = np.ravel(_const_value(node.inputs[1]))
    except Unsupported:
        raise Unsupported("Repeat with counts computed at run time") from None
    if reps.size == 0 or np.any(reps != reps[0]):
        raise Unsupported("Repeat with unequal counts per element")
    ax = "" if node.op.axis is None else f", axis={node.op.axis % node.inputs[0].type.ndim}"
    attrs = f"repeats={int(reps[0])}{ax}"
    why = kiln_builds(f"repeat(a, {attrs})", [(em.kdt[ins[0]], node.inputs[0].type.shape)])
    if why:
        raise Unsupported(why)
    return [em.let(f"repeat({ins[0]}, {attrs})", em.kdt[ins[0]])]


_EINSUM_SPEC = re.compile(r"^([a-zA-Z]*),([a-zA-Z]*)->([a-zA-Z]*)$")


def _einsum_why(op, inputs):
    """None when kiln's einsum takes this Einsum whole (two float operands,
    a spec of letters with '->', shapes it can group into matrices), else
    why not."""
    spec = op.subscripts.replace(" ", "")
    if len(inputs) != 2 or _EINSUM_SPEC.match(spec) is None:
        return (f"Einsum '{op.subscripts}' with {len(inputs)} operand(s) (kiln's "
                "einsum: two, letters and '->')")
    if not all(_is_float(v.type.dtype) for v in inputs):
        return "integer einsum"
    if not kiln_has_op("einsum", 2, ', spec="i,i->i"'):
        return "this libkiln has no op 'einsum'"
    return kiln_builds(f'einsum(a, b, spec="{spec}")',
                       [(_kdt(v.type.dtype), v.type.shape) for v in inputs])


@kg_convert(Einsum)
def _einsum(em, node, ins):
    """A two-operand Einsum as kiln's einsum (the KILN mode keeps such
    Einsums whole; others are inlined to PyTensor's tensordot graph)."""
    why = _einsum_why(node.op, node.inputs)
    if why:
        raise Unsupported(why)
    k = _kdt(node.outputs[0].type.dtype)
    a, b = (em.cast(x, k) for x in ins)
    spec = node.op.subscripts.replace(" ", "")
    return [em.let(f'einsum({a}, {b}, spec="{spec}")', k)]


@kg_convert(ptbw.Blockwise)
def _blockwise(em, node, ins):
    fn = KG_CONVERTERS.get(type(node.op.core_op))
    if fn is None or fn is _blockwise:
        raise Unsupported(f"Blockwise of {type(node.op.core_op).__name__}")
    return fn(em, node, ins)


@kg_convert(ptx.CumOp)
def _cumop(em, node, ins):
    op = node.op
    kop = "cumsum" if op.mode == "add" else "cumprod"
    _need(kop, 1, ", axis=0")
    dt = node.inputs[0].type.dtype
    if dt in _WIDE or dt == "bool":
        raise Unsupported(f"{kop} of {dt}")
    x = ins[0]
    if op.axis is None:
        if node.inputs[0].type.ndim != 1:
            x = em.let(f"reshape({x}, shape=[-1])", em.kdt[x])
        axis = 0
    else:
        axis = op.axis % node.inputs[0].type.ndim
    return [em.let(f"{kop}({x}, axis={axis})", em.kdt[x])]


def _softmax_axes(em, node, x):
    """(kiln dtype of x, its softmax axes as .kg text) of a Softmax,
    LogSoftmax or SoftmaxGrad node: axis None is every axis."""
    ndim = node.inputs[-1].type.ndim
    axis = node.op.axis
    axes = range(ndim) if axis is None else [axis % ndim]
    kd = em.kdt[x]
    if kd not in ("f64", "f32"):
        raise Unsupported(f"{type(node.op).__name__} of {kd}")
    return kd, "[" + ", ".join(map(str, axes)) + "]"


@kg_convert(Softmax, LogSoftmax)
def _softmax(em, node, ins):
    """kiln's softmax / log_softmax composites along one axis (issue 29,
    max-shifted); axis None (every axis, as PyTensor's) or a libkiln
    without them: log_softmax(x) = x - logsumexp(x, axis, keepdims)
    (logsumexp is max-shifted, so no overflow), softmax its exp.  PyMC's simplex transform becomes these."""
    x, = ins
    kd, axes = _softmax_axes(em, node, x)
    fn = "log_softmax" if isinstance(node.op, LogSoftmax) else "softmax"
    if node.op.axis is not None and kiln_has_op(fn, 1, ", axis=0"):
        return [em.let(f"{fn}({x}, axis={axes[1:-1]})", kd)]
    lse = em.let(f"logsumexp({x}, axis={axes}, keepdims=true)", kd)
    d = em.let(f"sub({x}, {lse})", kd)
    return [d if isinstance(node.op, LogSoftmax) else em.let(f"exp({d})", kd)]


@kg_convert(SoftmaxGrad)
def _softmax_grad(em, node, ins):
    """softmax's vector-Jacobian product: (dy - sum(dy sm, axis,
    keepdims)) sm, axis None every axis (PyTensor's SoftmaxGrad)."""
    dy, sm = ins
    kd, axes = _softmax_axes(em, node, sm)
    dy = em.cast(dy, kd)
    s_ = em.let(f"sum(mul({dy}, {sm}), axis={axes}, keepdims=true)", kd)
    return [em.let(f"mul(sub({dy}, {s_}), {sm})", kd)]


@kg_convert(CheckAndRaise)
def _check(em, node, ins):
    _need("check", 2)
    x, *conds = ins
    cs = []
    for var, c in zip(node.inputs[1:], conds):
        c = em.cast(c, "bool")
        if var.type.ndim:
            _need("all")
            c = em.let(f"all({c})", "bool")
        cs.append(c)
    # the message kiln reports identifies the check: one used before with
    # another exception type gets a suffix, so the failing check decides
    want = (node.op.exc_type, node.op.msg)
    written = _kg_text(node.op.msg)
    k = 1
    while em.checks.get(written, want) != want:
        k += 1
        written = _kg_text(f"{node.op.msg} [check {k}]")
    em.checks[written] = want
    msg = _kg_string(written)
    if not cs:
        return [x]
    return [em.let(f"check({x}, {', '.join(cs)}, msg={msg})", em.kdt[x])]


def _converter_for(op):
    for cls in type(op).__mro__:
        fn = KG_CONVERTERS.get(cls)
        if fn is not None:
            return fn
    return None


def _check_types(node):
    for v in list(node.inputs) + list(node.outputs):
        t = v.type
        if isinstance(t, TensorType) or isinstance(t, ps.ScalarType):
            _kdt(t.dtype, f"'{v}'")
        elif isinstance(v, Constant) and isinstance(node.op, (ptst.AdvancedSubtensor,
                                                             ptst.AdvancedIncSubtensor)):
            continue
        else:
            raise Unsupported(f"a value of type {t}")


def _convert_node(em, node):
    if isinstance(node.op, KilnOp):
        raise Unsupported("already a kiln function")
    fn = _converter_for(node.op)
    if fn is None:
        raise Unsupported("no kiln conversion for this op; kiln.pytensor.kg_convert adds one")
    _check_types(node)
    reads = _reads(node)
    for v in reads:
        if v not in node.inputs:
            _name_of(em, v)
    ins = []
    for v in node.inputs:
        if isinstance(v.type, (TensorType, ps.ScalarType)) and v in reads:
            ins.append(_name_of(em, v))
        else:
            ins.append(None)
    outs = fn(em, node, ins)
    if len(outs) != len(node.outputs):
        raise Unsupported("output count")
    # the kiln dtype of each result must be the PyTensor dtype
    fixed = []
    for o, name in zip(node.outputs, outs):
        fixed.append(em.cast(name, _kdt(o.type.dtype)))
    em.val.update(zip(node.outputs, fixed))
    return fixed


# --------------------------------------------------------------------------
# Scan (issue 28): a kiln scan whose body is the inner graph

def _scan_body_input(be, var, kdt=None):
    return be.input(var, kdt or _kdt(var.type.dtype, f"scan input '{var}'"))


@kg_convert(ptb.AllocEmpty)
def _alloc_empty(em, node, ins):
    """An uninitialised buffer (Scan's output buffers): zeros of its shape."""
    out = node.outputs[0]
    dims = []
    for d, v in zip(out.type.shape, node.inputs):
        if d is None:
            try:
                d = int(_const_value(v))
            except Unsupported:
                raise Unsupported("AllocEmpty of a size computed at run time") from None
        dims.append(str(int(d)))
    kdt = _kdt(out.type.dtype)
    return [em.let(f"zeros(shape=[{', '.join(dims)}], dtype={kdt})", kdt)]


def _window_input(be, var, kdt, prefix="win"):
    """A body input for a window slot no tap reads (typed like VAR)."""
    nm_ = be.fresh(prefix)
    dims = ", ".join("?" if d is None else str(int(d)) for d in var.type.shape)
    be.decls.append(f"  input {nm_}: {kdt}" + (f"[{dims}]" if dims else ""))
    be.kdt[nm_] = kdt
    return nm_


@kg_convert(Scan)
def _scan(em, node, ins):
    """PyTensor's Scan as kiln's scan (docs/pytensor.md, "Scan").

    sit_sot carries, mit_sot carries (a window of -min(taps) carries the
    body shifts), mit_mot buffers (the scans PyTensor's gradient makes: a
    window over the buffer, its first slot final and emitted each step),
    sequences, non-sequences and nit_sot outputs.  Refused (the op then
    runs in PyTensor's VM): a stopping condition (as_while), shared outputs
    (RNG and shared-variable updates), truncate_gradient != -1, a mit_mot
    output tap before its first input tap.
    """
    op = node.op
    info = op.info
    if info.as_while:
        raise Unsupported("Scan with a stopping condition (as_while) is not converted")
    if info.n_shared_outs:
        raise Unsupported("Scan with shared outputs (RNG or shared-variable updates) is not converted")
    if op.truncate_gradient != -1:
        raise Unsupported(f"Scan with truncate_gradient={op.truncate_gradient} is not converted")
    ns, nmm, nm, nss = info.n_seqs, info.n_mit_mot, info.n_mit_sot, info.n_sit_sot
    nn, na = info.n_nit_sot, info.n_non_seqs
    n_steps = None
    try:
        n_steps = int(_const_value(node.inputs[0]))
    except Unsupported:
        pass
    # outer inputs: n_steps, seqs, mit_mot, mit_sot, sit_sot, (shared),
    # nit_sot sizes, non_seqs
    o = 1
    o_seqs = ins[o:o + ns]; o += ns
    o_mm = ins[o:o + nmm]; o += nmm
    o_mit = ins[o:o + nm]; o += nm
    o_sit = ins[o:o + nss]; o += nss
    o += nn                                  # nit_sot sizes: T
    o_non = ins[o:o + na]
    # inner inputs: seqs, mit_mot taps, mit_sot taps, sit_sot, non_seqs
    inner = list(op.inner_inputs)
    i = ns
    i_mm = []
    mm_win = []                              # per mit_mot: (min tap, width)
    for j, (taps, otaps) in enumerate(zip(info.mit_mot_in_slices,
                                           info.mit_mot_out_slices)):
        lo = min(taps)
        if any(t < lo for t in otaps):
            raise Unsupported("Scan mit_mot with an output tap before its first input tap "
                              "is not converted")
        w = max(list(taps) + list(otaps)) - lo + 1
        mm_win.append((lo, w))
        i_mm.append(inner[i:i + len(taps)])
        i += len(taps)
    i_mit = []
    for taps in info.mit_sot_in_slices:
        if any(t >= 0 for t in taps):
            raise Unsupported("Scan mit_sot with a non-negative tap is not converted")
        i_mit.append(inner[i:i + len(taps)])
        i += len(taps)
    i_sit = inner[i:i + nss]; i += nss
    i_non = inner[i:i + na]
    # the mit_mot buffers' slices: carries B[0 .. W-2], the sequence
    # B[W-1 : W-1+T] (slot W-1 of step t's window, not yet written), and
    # after the scan the untouched tail B[T+W-1 :]
    for j, buf in enumerate(node.inputs[1 + ns:1 + ns + nmm]):
        L = buf.type.shape[0]
        if n_steps is None and ns == 0:
            raise Unsupported("Scan with mit_mot and no sequence needs a constant n_steps")
        if L is not None and n_steps is not None and L < n_steps + mm_win[j][1] - 1:
            raise Unsupported(f"Scan mit_mot buffer of {L} entries for {n_steps} steps "
                              f"and a window of {mm_win[j][1]} (it wraps around)")
    be = _Emitter()
    # body inputs: carries (mit_mot windows, mit_sot windows, sit_sot),
    # then sequences (mit_mot slots, the scan's), then non-sequences
    mm_names = []                            # per mit_mot: its W slot names
    for j, taps in enumerate(info.mit_mot_in_slices):
        lo, w = mm_win[j]
        var = i_mm[j][0]
        kdt = _kdt(var.type.dtype)
        mm_names.append([None] * w)
        for q in range(w - 1):
            tap = q + lo
            if tap in taps:
                mm_names[j][q] = _scan_body_input(be, i_mm[j][list(taps).index(tap)], kdt)
            else:
                mm_names[j][q] = _window_input(be, var, kdt)
    win = []                                 # per mit_sot: its carry names
    for j, taps in enumerate(info.mit_sot_in_slices):
        k = -min(taps)
        kdt = _kdt(i_mit[j][0].type.dtype)
        names = []
        for q in range(k):
            tap = q - k
            if tap in taps:
                names.append(_scan_body_input(be, i_mit[j][list(taps).index(tap)], kdt))
            else:                            # a slot of the window no tap reads
                names.append(_window_input(be, i_mit[j][0], kdt))
        win.append(names)
    sit_names = [_scan_body_input(be, v) for v in i_sit]
    for j, taps in enumerate(info.mit_mot_in_slices):
        lo, w = mm_win[j]
        var = i_mm[j][0]
        kdt = _kdt(var.type.dtype)
        tap = w - 1 + lo
        if tap in taps:
            mm_names[j][w - 1] = _scan_body_input(be, i_mm[j][list(taps).index(tap)], kdt)
        else:
            mm_names[j][w - 1] = _window_input(be, var, kdt)
    for v in inner[:ns]:
        _scan_body_input(be, v)
    for v in i_non:
        _scan_body_input(be, v)
    for n2 in op.fgraph.toposort():
        _convert_node(be, n2)
    iout = list(op.inner_outputs)
    k = 0
    for j, otaps in enumerate(info.mit_mot_out_slices):   # writes into the window
        lo, w = mm_win[j]
        kdt = be.kdt[mm_names[j][0]]
        for t in otaps:
            mm_names[j][t - lo] = be.cast(_name_of(be, iout[k]), kdt)
            k += 1
    iout = iout[k:]
    new_mit = [be.cast(_name_of(be, v), _kdt(v.type.dtype)) for v in iout[:nm]]
    new_sit = [be.cast(_name_of(be, v), _kdt(v.type.dtype)) for v in iout[nm:nm + nss]]
    new_nit = [_name_of(be, v) for v in iout[nm + nss:nm + nss + nn]]
    outs = []
    for j in range(nmm):                     # slot 0 is final: the window moves on
        outs += [(f"m{j}_{q}", n_) for q, n_ in enumerate(mm_names[j][1:])]
    for j in range(nm):                      # the window moves on by one
        outs += [(f"w{j}_{q}", n_) for q, n_ in enumerate(win[j][1:] + [new_mit[j]])]
    outs += [(f"c{j}", n_) for j, n_ in enumerate(new_sit)]
    per_step = [mm_names[j][0] for j in range(nmm)] + new_mit + new_sit + new_nit
    outs += [(f"y{j}", n_) for j, n_ in enumerate(per_step)]
    bname = em.fresh("scan_body")
    em.bodies += be.bodies
    em.bodies.append(be.text(bname, outs, header=False))
    em.checks.update(be.checks)
    # the scan: carries, sequences, args
    args = []
    mm_first = []                            # per mit_mot: index of its first carry
    for j in range(nmm):
        buf = o_mm[j]
        mm_first.append(len(args))
        for q in range(mm_win[j][1] - 1):
            args.append(em.let(f"{buf}[{q}]", em.kdt[buf]))
    for j, taps in enumerate(info.mit_sot_in_slices):
        buf = o_mit[j]
        for q in range(-min(taps)):
            args.append(em.let(f"{buf}[{q}]", em.kdt[buf]))
    for buf in o_sit:
        args.append(em.let(f"{buf}[0]", em.kdt[buf]))
    n_carry = len(args)
    for j in range(nmm):
        w = mm_win[j][1]
        stop = "" if n_steps is None else str(w - 1 + n_steps)
        args.append(em.let(f"{o_mm[j]}[{w - 1}:{stop}]", em.kdt[o_mm[j]]))
    args += list(o_seqs) + list(o_non)
    steps = ""
    if ns + nmm == 0:
        if n_steps is None:
            raise Unsupported("Scan without sequences needs a constant n_steps")
        steps = f", n_steps={n_steps}"
    kdt0 = _kdt(node.outputs[0].type.dtype) if node.outputs else "f64"
    s_ = em.let(f"scan({', '.join(args)}, body={bname}, carries={n_carry}, "
                f"seqs={ns + nmm}{steps})", kdt0 if n_carry == 0 else em.kdt[args[0]])

    def res(idx, kdt):
        return s_ if idx == 0 else em.let(f"result({s_}, index={idx})", kdt)
    results = [res(n_carry + j, _kdt(node.outputs[j].type.dtype))
               for j in range(len(per_step))]
    outv = []
    for j in range(nmm):                     # the whole buffer, rewritten
        buf, w = o_mm[j], mm_win[j][1]
        kdt = em.kdt[buf]
        parts = [results[j]]
        for q in range(w - 1):               # the last window's slots
            c = res(mm_first[j] + q, kdt)
            parts.append(em.let(f"expand_dims({c}, axis=0)", kdt))
        if n_steps is not None:
            parts.append(em.let(f"{buf}[{n_steps + w - 1}:]", kdt))
        outv.append(em.let(f"join(0, {', '.join(parts)})", kdt))
    for j, taps in enumerate(info.mit_sot_in_slices):     # the whole buffer
        k = -min(taps)
        outv.append(em.let(f"join(0, {o_mit[j]}[:{k}], {results[nmm + j]})", em.kdt[o_mit[j]]))
    for j in range(nss):
        first = em.let(f"expand_dims({o_sit[j]}[0], axis=0)", em.kdt[o_sit[j]])
        outv.append(em.let(f"join(0, {first}, {results[nmm + nm + j]})", em.kdt[o_sit[j]]))
    outv += results[nmm + nm + nss:]
    return outv


def node_support(node):
    """None when kiln can run NODE, else the reason it cannot (a string)."""
    em = _Emitter()
    for v in _reads(node):
        if not isinstance(v, Constant) and isinstance(v.type, (TensorType, ps.ScalarType)):
            try:
                em.input(v, _kdt(v.type.dtype, f"'{v}'"))
            except Unsupported as e:
                return str(e)
    try:
        _convert_node(em, node)
    except Unsupported as e:
        return str(e)
    except Exception as e:  # a converter bug must not sink the graph
        return f"conversion failed: {type(e).__name__}: {e}"
    return None


class KgGraph:
    """A PyTensor graph as kiln text.

    ``text``: the ``.kg`` text; ``input_names``/``output_names``: kiln names
    in the order of ``inputs``/``outputs`` (the PyTensor variables);
    ``checks``: the run-time check messages as written in the text, mapped to
    (exception type PyTensor raises, original message).
    """

    def __init__(self, text, inputs, outputs, input_names, output_names, checks,
                 in_dtypes, out_dtypes):
        self.text = text
        self.inputs = inputs
        self.outputs = outputs
        self.input_names = input_names
        self.output_names = output_names
        self.checks = checks
        self.in_dtypes = in_dtypes
        self.out_dtypes = out_dtypes

    def __repr__(self):
        return f"KgGraph({len(self.inputs)} inputs, {len(self.outputs)} outputs)\n{self.text}"


def _nodes_to_kg(nodes, inputs, outputs, name="pytensor"):
    em = _Emitter()
    in_names = []
    for v in inputs:
        in_names.append(em.input(v, _kdt(v.type.dtype, f"input '{v}'")))
    for node in nodes:
        try:
            _convert_node(em, node)
        except Unsupported as e:
            named = [o.name for o in node.outputs if o.name]
            where = f"node {node.op}" + (f" -> '{named[0]}'" if named else "")
            raise Unsupported(f"{where}: {e}") from None
    outs = []
    out_names = []
    for i, v in enumerate(outputs):
        vn = _name_of(em, v)
        on = f"out{i}"
        outs.append((on, vn))
        out_names.append(on)
    text = em.text(name, outs)
    kg = KgGraph(text, list(inputs), list(outputs), in_names, out_names, em.checks,
                 [v.type.dtype for v in inputs], [v.type.dtype for v in outputs])
    # kiln name -> the PyTensor variable it came from (for messages that
    # name a node of the text, e.g. a partition's refusal)
    kg.var_of = {}
    for var, kname in em.val.items():
        kg.var_of.setdefault(kname, var)
    return kg


def fgraph_to_kg(fgraph, name="pytensor"):
    """Convert a whole FunctionGraph to a ``KgGraph`` (raises ``Unsupported``).

    Inputs are ``fgraph.inputs`` in order (named ``inN_<name>``), outputs
    ``fgraph.outputs`` in order (named ``outN``).  PyTensor dtypes int8,
    int16, uint8, uint16, uint32 are i64 in kiln; cast outputs back with
    ``numpy.asarray(r, dtype=out_dtypes[i])``.
    """
    return _nodes_to_kg(fgraph.toposort(), fgraph.inputs, fgraph.outputs, name)


def to_kg(inputs, outputs, rewrite=True, name="pytensor", include=()):
    """Convert PyTensor ``outputs`` of ``inputs`` to a ``KgGraph``.

    With ``rewrite=True`` the KILN mode's rewrites run first (on a clone),
    with the rewrites named in ``include`` added (e.g. PyMC's
    ``local_check_parameter_to_ninf_switch``, as ``pm.compile`` adds it).
    """
    fg = FunctionGraph(list(inputs), list(outputs), clone=True)
    if rewrite:
        opt = KILN.provided_optimizer
        if include:
            opt = opt.including(*include)
        optdb.query(opt).rewrite(fg)
    return fgraph_to_kg(fg, name)


# --------------------------------------------------------------------------
# compiled kiln functions, memoised by text and options

_fn_cache = {}
_fn_lock = threading.Lock()


def _compile(text, options):
    key = (text, tuple(sorted(options.items())))
    with _fn_lock:
        fn = _fn_cache.get(key)
    if fn is None:
        g = _kiln.Graph.parse(text, filename="<pytensor>")
        fn = _kiln.compile(g, **options)
        with _fn_lock:
            fn = _fn_cache.setdefault(key, fn)
    return fn


class KilnOp(Op):
    """A subgraph compiled by kiln; its perform calls the kiln function."""

    __props__ = ()

    def __init__(self, kg, fn, options=None):
        self.kg = kg
        self.fn = fn
        self.options = dict(options or {})
        self._in_np = [_NP_OF_KDT[_kdt(d)] for d in kg.in_dtypes]
        self._out_np = [np.dtype(d) for d in kg.out_dtypes]
        self._copy = [n in kg.input_names for n in kg.output_names]
        self._scalar = [isinstance(o.type, ps.ScalarType) for o in kg.outputs]

    def __getstate__(self):
        # the compiled function is a handle into libkiln: pickle the text and
        # options, recompile (from the disk cache) on load -- PyMC pickles
        # compiled functions for multiprocess sampling
        state = dict(self.__dict__)
        state.pop("fn", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.fn = _compile(self.kg.text, self.options)

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __str__(self):
        return f"Kiln{{{len(self.kg.inputs)}->{len(self.kg.outputs)}}}"

    def make_node(self, *inputs):
        return Apply(self, list(inputs), [o.type() for o in self.kg.outputs])

    def perform(self, node, inputs, output_storage):
        in_np = self._in_np
        args = [x if type(x) is np.ndarray and x.dtype == d else np.asarray(x, dtype=d)
                for x, d in zip(inputs, in_np)]
        try:
            res = self.fn._run_list(args)
        except _kiln.CheckError as e:
            self._raise_check(e)
        out_np, copy, scalar = self._out_np, self._copy, self._scalar
        for i, r in enumerate(res):
            d = out_np[i]
            if r.dtype != d:
                r = r.astype(d)
            elif copy[i]:
                r = r.copy()
            output_storage[i][0] = r[()] if scalar[i] else r

    def _raise_check(self, e):
        """A failed kiln check as the exception PyTensor would raise."""
        checks = self.kg.checks
        key = getattr(e, "check_message", None)
        if key not in checks:
            # the longest message the error contains
            hits = [w for w in checks if w in str(e)]
            key = max(hits, key=len) if hits else None
        if key is None:
            raise e
        exc_type, msg = checks[key]
        raise exc_type(msg) from e


# --------------------------------------------------------------------------
# partition and link

def _partition(fgraph):
    """Groups of kiln-supported nodes (lists in topological order) and the
    unsupported nodes with their reasons."""
    order = fgraph.toposort()
    reason = {}
    for node in order:
        r = node_support(node)
        if r is not None:
            reason[node] = r
    # level: number of unsupported nodes on the longest path into a value;
    # supported nodes of one level never reach each other through an
    # unsupported node, so each level is one kiln function (no cycles)
    vlevel = {}
    groups = {}
    for node in order:
        lv = max([vlevel.get(v, 0) for v in
                  (node.inputs if node in reason else _reads(node))], default=0)
        if node in reason:
            for o in node.outputs:
                vlevel[o] = lv + 1
        else:
            for o in node.outputs:
                vlevel[o] = lv
            groups.setdefault(lv, []).append(node)
    return [groups[k] for k in sorted(groups)], reason


def _group_io(fgraph, nodes):
    inside = set(nodes)
    produced = {o for n in nodes for o in n.outputs}
    ins, seen = [], set()
    for n in nodes:
        for v in _reads(n):
            if v not in produced and not isinstance(v, Constant) and v not in seen:
                seen.add(v)
                ins.append(v)
    outs = []
    fg_outs = set(fgraph.outputs)
    for n in nodes:
        for o in n.outputs:
            if o in fg_outs or any(c != "output" and c not in inside
                                   for c, _ in fgraph.clients.get(o, [])):
                outs.append(o)
    return ins, outs


class KilnLinker(VMLinker):
    """PyTensor linker running the graph in kiln (see the module docstring).

    ``backend``, ``policy``, ``tiers``, ``cache``: passed to ``kiln.compile``
    (None: kiln's defaults and environment, e.g. ``KILN_BACKEND``).
    """

    def __init__(self, backend=None, policy=None, tiers=None, cache=None, allow_gc=None,
                 **kwargs):
        kwargs["use_cloop"] = False
        kwargs["c_thunks"] = False
        super().__init__(allow_gc=allow_gc, **kwargs)
        self.kiln_options = {k: v for k, v in dict(
            backend=backend, policy=policy, tiers=tiers, cache=cache).items() if v is not None}

    def accept(self, fgraph, no_recycling=None, profile=None):
        if self.fgraph is not None and self.fgraph is not fgraph:
            new = type(self)(allow_gc=self.allow_gc, **self.kiln_options)
            return new.accept(fgraph, no_recycling, profile)
        return super().accept(fgraph, no_recycling, profile)

    def _kilnify(self):
        fgraph = self.fgraph
        groups, reason = _partition(fgraph)
        replaced = 0
        for gi, nodes in enumerate(groups):
            ins, outs = _group_io(fgraph, nodes)
            if not outs:
                continue
            try:
                kg = _nodes_to_kg(nodes, ins, outs, name=f"pytensor{gi}")
                fn = _compile(kg.text, self.kiln_options)
            except Exception as e:  # noqa: BLE001 -- never sink the graph
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                for n in nodes:
                    reason[n] = f"the kiln graph failed: {msg}"
                continue
            op = KilnOp(kg, fn, self.kiln_options)
            new = op(*ins, return_list=True)
            fgraph.replace_all(list(zip(outs, new)), reason="kiln", import_missing=True)
            swap = dict(zip(outs, new))
            self.no_recycling = [swap.get(v, v) for v in self.no_recycling]
            # shared-variable updates (pytensor.function(updates=...)) name
            # their new values by variable: follow them into the kiln node
            self.updated_vars = {k: swap.get(v, v)
                                 for k, v in getattr(self, "updated_vars", {}).items()}
            replaced += 1
        if replaced:
            # views of values now computed inside kiln are gone from the graph
            self.no_recycling = [v for v in self.no_recycling if v in fgraph.variables]
        left = [(n, r) for n, r in reason.items() if not isinstance(n.op, KilnOp)
                and n in fgraph.apply_nodes]
        if left:
            by = {}
            for n, r in left:
                names = by.setdefault((str(n.op), r), [])
                names.append(next((o.name for o in n.outputs if o.name), None))
            items = []
            for (op, r), names in by.items():
                named = [f"'{x}'" for x in names if x][:2]
                what = op + (f" x{len(names)}" if len(names) > 1 else "")
                what += (" -> " + ", ".join(named)) if named else ""
                items.append(f"{what} ({r})")
            warnings.warn(f"kiln: {len(left)} node(s) run in PyTensor's Python VM, "
                          f"not kiln: {'; '.join(items)}", KilnFallbackWarning,
                          stacklevel=2)

    def make_all(self, input_storage=None, output_storage=None, storage_map=None):
        self._kilnify()
        return super().make_all(input_storage=input_storage, output_storage=output_storage, storage_map=storage_map)


# --------------------------------------------------------------------------
# constant folding without C compilation

@node_rewriter(None)
def kiln_constant_folding(fgraph, node):
    """PyTensor's constant folding with Python thunks (never compiles C)."""
    if not all(isinstance(i, Constant) for i in node.inputs):
        return False
    if not node.op.do_constant_folding(fgraph, node):
        return False
    storage = {i: [i.data] for i in node.inputs}
    computed = {i: [True] for i in node.inputs}
    for o in node.outputs:
        storage[o] = [None]
        computed[o] = [False]
    try:
        thunk = node.op.make_thunk(node, storage, computed, no_recycling=[], impl="py")
    except (NotImplementedError, TypeError):
        return False
    thunk()
    res = []
    for o in node.outputs:
        data = storage[o][0]
        if isinstance(o.type, TensorType):
            t = TensorType(o.type.dtype, shape=np.shape(data), name=o.type.name)
        else:
            t = o.type
        res.append(t.make_constant(data))
    return res


@node_rewriter([OpFromGraph])
def kiln_inline_ofg(fgraph, node):
    """Inline a plain OpFromGraph (exactly that class, not a subclass such
    as AllocDiag that kiln converts as one op): PyTensor leaves the
    non-inline ones in place, e.g. the gradient an OpFromGraph's L_op
    builds (pm.gp.Marginal's K + sigma^2 I: AllocDiag's gradient), and
    kiln converts ops, not OpFromGraph wrappers.  An Einsum (an
    OpFromGraph too) stays whole when kiln's einsum takes it (two
    operands; PyTensor's own inline_optimized_einsum is excluded), else
    it is inlined here: its tensordot graph converts op by op."""
    if isinstance(node.op, Einsum):
        if _einsum_why(node.op, node.inputs) is None:
            return False
    elif type(node.op) is not OpFromGraph:
        return False
    from pytensor import clone_replace
    op = node.op
    return clone_replace(op.inner_outputs,
                         dict(zip(op.inner_inputs, node.inputs)))


def _register_rewrites():
    # registered straight into the equilibrium databases with the tag
    # kiln_only alone: PyTensor's register_canonicalize & co. would add
    # fast_run and so run it in every other mode too
    from pytensor.compile import optdb
    rw = in2out(kiln_constant_folding, ignore_newtrees=True,
                name="kiln_constant_folding")
    for db in ("canonicalize", "uncanonicalize", "stabilize", "specialize"):
        optdb[db].register("kiln_constant_folding", rw, "kiln_only",
                           final_rewriter=True)
    optdb["specialize"].register(
        "kiln_inline_ofg", in2out(kiln_inline_ofg, name="kiln_inline_ofg"),
        "kiln_only")


# The rewrites: PyTensor's fast_run (canonicalize, stabilize, specialize) as
# in its JAX mode, without fusion (kiln fuses), inplace, BLAS and C-only
# rewrites, and with the C-compiling constant folding replaced by the
# Python one above, and without uncanonicalize (it only re-expresses ops
# for PyTensor's C code: ~10% of the rewrite time on radon, no numerics).
# docs/pytensor.md says why.
KILN_INCLUDE = ("fast_run", "kiln_only")
KILN_EXCLUDE = ("cxx_only", "BlasOpt", "fusion", "inplace", "local_careduce_fusion",
                "topo_constant_folding", "uncanonicalize",
                # kiln's scan stacks every step; the circular buffers this
                # rewrite makes would not convert (issue 28)
                "scan_save_mem",
                # kiln's matmul takes any batch rank, broadcasting: this
                # rewrite's reshapes to 3-D (of run-time shapes) would not
                # convert (issue 29)
                "specialize_matmul_to_batched_dot",
                # two-operand Einsums convert whole (kiln_inline_ofg)
                "inline_optimized_einsum")


def mode(backend=None, policy=None, tiers=None, cache=None):
    """A PyTensor Mode on kiln with compile options (see ``kiln.compile``)."""
    return Mode(KilnLinker(backend=backend, policy=policy, tiers=tiers, cache=cache),
                RewriteDatabaseQuery(include=list(KILN_INCLUDE),
                                     exclude=list(KILN_EXCLUDE)))


if "kiln_constant_folding" not in str(getattr(pytensor, "_kiln_registered", "")):
    _register_rewrites()
    pytensor._kiln_registered = "kiln_constant_folding"

KILN = mode()
if "kiln" not in predefined_linkers:
    register_linker("kiln", KilnLinker())
if "KILN" not in predefined_modes:
    register_mode("KILN", KILN)
