"""kiln: compile tensor graphs to native code, from Python.

A thin layer over libkiln's C API (ctypes and numpy only; docs/python.md):

    import kiln, numpy as np
    g = kiln.Graph.parse(open("examples/eight_schools.kg").read())
    f = kiln.compile(g)
    logp, d_mu, d_log_tau, d_theta_t = f(0.0, 1.0, np.zeros(8))

Errors from kiln are raised as KilnError (its one-line message); a failed
run-time check (the op ``check``) as CheckError.
"""

import ctypes
import json
import os
import threading

import numpy as np

from . import _lib
from ._lib import lib

__all__ = ["KilnError", "CheckError", "Graph", "Value", "Function", "Model",
           "compile", "library_path", "__version__"]

__version__ = "0.1.0"

library_path = getattr(lib, "_name", None)


class KilnError(Exception):
    """An error reported by kiln: ``str(e)`` is kiln's one-line message,
    ``e.code`` the kiln_code (kiln.h; 0 when the error was found in
    Python before calling kiln)."""

    def __init__(self, message, code=0):
        super().__init__(message)
        self.message = message
        self.code = code


class CheckError(KilnError):
    """A run-time check (the op ``check``, PyMC's CheckParameterValue or
    PyTensor's Assert) found a false condition: ``check_message`` is the
    check's own ``msg`` (empty when it had none)."""

    def __init__(self, message, code=_lib.ERR_CHECK):
        super().__init__(message, code)
        msg = message
        i = msg.find(_lib.CHECK_PREFIX)
        rest = msg[i + len(_lib.CHECK_PREFIX):] if i >= 0 else msg
        if rest.startswith(": "):
            rest = rest[2:]
            # "MSG (node 'x' (check, .kg line 7))": drop the node
            j = rest.rfind(" (node ")
            if j >= 0:
                rest = rest[:j]
            self.check_message = rest
        else:
            self.check_message = ""


def _error(e):
    """The exception for a filled kiln_err."""
    msg = e.message.decode("utf-8", "replace")
    if e.code == _lib.ERR_CHECK:
        return CheckError(msg, e.code)
    return KilnError(msg, e.code)


def _b(s):
    return None if s is None else os.fsencode(s) if not isinstance(s, bytes) \
        else s


def _s(b):
    return None if b is None else b.decode("utf-8", "replace")


# ---- dtypes ---------------------------------------------------------------

_NP = {_lib.F64: np.dtype(np.float64), _lib.F32: np.dtype(np.float32),
       _lib.I64: np.dtype(np.int64), _lib.I32: np.dtype(np.int32),
       _lib.BOOL: np.dtype(np.bool_)}
_KILN = {v: k for k, v in _NP.items()}
_NAMES = {"f64": _lib.F64, "f32": _lib.F32, "i64": _lib.I64, "i32": _lib.I32,
          "bool": _lib.BOOL}


def _dtype_code(dt):
    """A kiln_dtype from "f64", a numpy dtype or a Python type."""
    if isinstance(dt, str) and dt in _NAMES:
        return _NAMES[dt]
    try:
        d = np.dtype(dt)
    except TypeError:
        raise KilnError("unknown dtype %r (kiln has f64 f32 i64 i32 bool)"
                        % (dt,))
    if d not in _KILN:
        raise KilnError("dtype %s has no kiln dtype (kiln has f64 f32 i64 "
                        "i32 bool)" % d)
    return _KILN[d]


def _shape_str(shape):
    return "(" + ", ".join(str(d) for d in shape) + ")"


# ---- graphs ---------------------------------------------------------------

class Value:
    """A node of a Graph (an input, a constant or an op's result)."""

    __slots__ = ("graph", "id")

    def __init__(self, graph, vid):
        self.graph = graph
        self.id = vid

    def __repr__(self):
        return "<kiln.Value %d of graph %r>" % (self.id, self.graph.name)


def _index_entry(k):
    e = _lib.kiln_index()
    if isinstance(k, slice):
        e.kind = _lib.INDEX_SLICE
        for f in ("start", "stop", "step"):
            v = getattr(k, f)
            if v is not None:
                setattr(e, f, int(v))
                setattr(e, "has_" + f, 1)
    else:
        e.kind = _lib.INDEX_INT
        e.start = int(k)
    return e


class Graph:
    """A kiln graph: parsed from ``.kg`` text (Graph.parse) or built node
    by node (Graph(name), then input/const/op/output...).  Builder calls
    raise KilnError with kiln's message at the node that is wrong."""

    def __init__(self, name="main", _ptr=None):
        if _ptr is None:
            e = _lib.kiln_err()
            _ptr = lib.kiln_graph_new(_b(name), ctypes.byref(e))
            if not _ptr:
                raise _error(e)
        self._ptr = _ptr
        self._nconst = 0
        # arrays whose bytes the graph reads in place (shared(copy=False)):
        # alive while the graph or a Function compiled from it lives
        self._borrowed = []

    def __del__(self):
        p = getattr(self, "_ptr", None)
        if p and lib is not None:
            lib.kiln_graph_free(p)
            self._ptr = None

    @classmethod
    def parse(cls, text, filename="<string>", base_dir=None):
        """A graph from ``.kg`` text.  ``filename`` names it in messages
        ("file:line:col: ..."); ``base_dir`` resolves npy()/csv() data
        paths (the current directory when None)."""
        if isinstance(text, str):
            text = text.encode("utf-8")
        e = _lib.kiln_err()
        p = lib.kiln_parse_string(text, _b(filename), _b(base_dir),
                                  ctypes.byref(e))
        if not p:
            raise _error(e)
        return cls(_ptr=p)

    @classmethod
    def parse_file(cls, path):
        """A graph from a ``.kg`` file (data paths relative to it)."""
        e = _lib.kiln_err()
        p = lib.kiln_parse_file(_b(path), ctypes.byref(e))
        if not p:
            raise _error(e)
        return cls(_ptr=p)

    @property
    def name(self):
        return _s(lib.kiln_graph_name(self._ptr))

    def __len__(self):
        return lib.kiln_graph_n_nodes(self._ptr)

    def print(self):
        """The graph in canonical ``.kg`` text."""
        e = _lib.kiln_err()
        p = lib.kiln_graph_print(self._ptr, ctypes.byref(e))
        if not p:
            raise _error(e)
        try:
            return ctypes.string_at(p).decode("utf-8")
        finally:
            _lib.libc.free(p)

    __str__ = print

    def _v(self, vid, e):
        if vid < 0:
            raise _error(e)
        return Value(self, vid)

    def symbol(self, name):
        """The id of symbolic dim ``name`` (for shapes given as ids)."""
        s = lib.kiln_graph_symbol(self._ptr, _b(name))
        if s == -1:
            raise KilnError("out of memory", _lib.ERR_NOMEM)
        return s

    def _dims(self, shape):
        shape = () if shape is None else tuple(shape)
        if len(shape) > _lib.MAX_RANK:
            raise KilnError("rank %d exceeds kiln's maximum %d"
                            % (len(shape), _lib.MAX_RANK), _lib.ERR_ARG)
        dims = (ctypes.c_int64 * max(1, len(shape)))()
        for i, d in enumerate(shape):
            if d is None or d == "?":
                dims[i] = -1
            elif isinstance(d, str):
                dims[i] = self.symbol(d)
            else:
                dims[i] = int(d)
        return len(shape), dims

    def input(self, name, dtype="f64", shape=()):
        """Declare input ``name``: shape entries are ints (static), str
        (a symbolic dim: one size per name) or None (unknown, ``?``)."""
        rank, dims = self._dims(shape)
        e = _lib.kiln_err()
        return self._v(lib.kiln_graph_input(self._ptr, _b(name),
                                            _dtype_code(dtype), rank, dims,
                                            ctypes.byref(e)), e)

    def param(self, name, dtype="f64", shape=(), lower=None, upper=None,
              transform=None):
        """Declare model parameter ``name`` (``param`` in .kg), with
        optional bounds: numbers or scalar Values (a const, a shared
        value, or a value computed from earlier parameters), or one of
        Stan's transforms by name (``transform="simplex"``, "ordered",
        "positive_ordered", "unit_vector", "sum_to_zero",
        "cholesky_factor_corr", "cholesky_factor_cov", "cov_matrix",
        "corr_matrix"; docs/kg.md)."""
        rank, dims = self._dims(shape)
        if transform is not None:
            if lower is not None or upper is not None:
                raise KilnError("param %r: a %s takes no bounds"
                                % (name, transform), _lib.ERR_ARG)
            t = _b(transform)
            tr = lib.kiln_param_transform_lookup(t, len(t))
            if tr < 0:
                raise KilnError("param %r: unknown transform %r"
                                % (name, transform), _lib.ERR_ARG)
            e = _lib.kiln_err()
            return self._v(lib.kiln_graph_param_transform(
                self._ptr, _b(name), _dtype_code(dtype), rank, dims, tr,
                ctypes.byref(e)), e)

        def bound(b, inf):
            if b is None:
                return inf, -1
            if isinstance(b, Value):
                return 0.0, b.id
            return float(b), -1
        lo, lo_ref = bound(lower, -np.inf)
        hi, hi_ref = bound(upper, np.inf)
        e = _lib.kiln_err()
        return self._v(lib.kiln_graph_param(self._ptr, _b(name),
                                            _dtype_code(dtype), rank, dims,
                                            lo, lo_ref, hi, hi_ref,
                                            ctypes.byref(e)), e)

    def shared(self, name, dtype="f64", shape=(), value=None, copy=True):
        """Declare shared value ``name`` (data bound at compile time,
        rebindable with Function.bind_shared); ``value`` an array or None
        (then it must be bound before the first call).

        copy=False reads ``value``'s bytes in place (kiln_graph_shared_ref):
        no copy here, in kiln.compile or per call.  The graph and every
        Function compiled from it keep a reference to the array; changes
        made to it in place are seen by the next call (values computed
        from shared values only are computed once, at compile time).  An
        array that is not C-contiguous with the declared dtype is
        converted once first (then changes to the original are not
        seen)."""
        rank, dims = self._dims(shape)
        t = None
        keep = None
        if value is not None:
            keep = _as_input(value, _dtype_code(dtype), name)
            t = _lib.kiln_tensor()
            _fill_tensor(t, keep)
        elif not copy:
            raise KilnError("shared '%s': copy=False needs a value" % name,
                            _lib.ERR_ARG)
        e = _lib.kiln_err()
        fn = lib.kiln_graph_shared if copy else lib.kiln_graph_shared_ref
        v = self._v(fn(self._ptr, _b(name), _dtype_code(dtype), rank, dims,
                       ctypes.byref(t) if t is not None else None,
                       ctypes.byref(e)), e)
        if not copy:
            self._borrowed.append(keep)
        return v

    def bind_safetensors(self, path):
        """Bind the shared values declared without a value to the tensors
        of safetensors file ``path``, in place (a read-only mapping of the
        file; F16/BF16 converted to f32), by name: a shared value N takes
        the tensor whose name with every character outside [A-Za-z0-9_]
        made '_' equals N (kiln_graph_bind_safetensors).  Every unbound
        shared value must have its tensor; on error nothing is bound."""
        e = _lib.kiln_err()
        if lib.kiln_graph_bind_safetensors(self._ptr, _b(os.fspath(path)),
                                           ctypes.byref(e)):
            raise _error(e)

    def const(self, array, name=None, dtype=None):
        """A constant holding a copy of ``array`` (dtype from the array,
        or ``dtype``); ``name`` None picks an unused one."""
        a = np.asarray(array)
        if dtype is not None:
            code = _dtype_code(dtype)
        elif a.dtype in _KILN:
            code = _KILN[a.dtype]
        elif a.dtype.kind in "iu":
            code = _lib.I64
        elif a.dtype.kind == "f":
            code = _lib.F64
        else:
            code = _dtype_code(a.dtype)
        a = np.array(a, dtype=_NP[code], order="C")
        if name is None:
            while True:
                self._nconst += 1
                name = "_c%d" % self._nconst
                if lib.kiln_graph_lookup(self._ptr, _b(name)) < 0:
                    break
        rank, dims = self._dims(a.shape)
        e = _lib.kiln_err()
        return self._v(lib.kiln_graph_const(self._ptr, _b(name), code, rank,
                                            dims, a.ctypes.data_as(
                                                ctypes.c_void_p),
                                            ctypes.byref(e)), e)

    def literal(self, value):
        """A weakly typed scalar literal (NEP 50): bool, int or float."""
        if isinstance(value, (bool, np.bool_)):
            kind = _lib.LIT_BOOL
        elif isinstance(value, (int, np.integer)):
            kind = _lib.LIT_INT
        else:
            kind = _lib.LIT_FLOAT
        e = _lib.kiln_err()
        return self._v(lib.kiln_graph_literal(self._ptr, float(value), kind,
                                              ctypes.byref(e)), e)

    def _value(self, x):
        if isinstance(x, Value):
            if x.graph is not self:
                raise KilnError("a value of graph %r used in graph %r"
                                % (x.graph.name, self.name), _lib.ERR_ARG)
            return x.id
        if isinstance(x, (bool, int, float, np.bool_, np.integer,
                          np.floating)):
            return self.literal(x).id
        if isinstance(x, str):
            v = lib.kiln_graph_lookup(self._ptr, _b(x))
            if v < 0:
                raise KilnError("no value named '%s'" % x, _lib.ERR_NAME)
            return v
        return self.const(x).id

    def op(self, name, *inputs, **attrs):
        """Append op ``name`` (docs/ops.md) on ``inputs``: Values, Python
        numbers (literals), numpy arrays (constants) or names.  Attributes:
        int, float, bool, a list of ints (``shape=`` entries may be
        symbol names), a dtype for ``dtype=``, str (``msg=``)."""
        ins = (ctypes.c_int32 * max(1, len(inputs)))(
            *[self._value(x) for x in inputs])
        A = _lib.kiln_attr()
        arr = (A * max(1, len(attrs)))()
        keep = []
        for i, (k, v) in enumerate(attrs.items()):
            a = arr[i]
            kb = k.encode()
            keep.append(kb)
            a.key = kb
            if k == "dtype":
                a.kind = _lib.ATTR_DTYPE
                a.i = _dtype_code(v)
            elif isinstance(v, (bool, np.bool_)):
                a.kind = _lib.ATTR_BOOL
                a.i = int(v)
            elif isinstance(v, (int, np.integer)):
                a.kind = _lib.ATTR_INT
                a.i = int(v)
            elif isinstance(v, (float, np.floating)):
                a.kind = _lib.ATTR_FLOAT
                a.f = float(v)
            elif isinstance(v, str):
                if A is not _lib.kiln_attr_new:
                    raise KilnError("op %s: string attribute %s= needs a "
                                    "libkiln with string attributes (the "
                                    "check op)" % (name, k), _lib.ERR_TYPE)
                a.kind = _lib.ATTR_STRING
                vb = v.encode("utf-8")
                keep.append(vb)
                a.s = vb
            else:
                vals = [self.symbol(d) if isinstance(d, str) else int(d)
                        for d in v]
                ia = (ctypes.c_int64 * max(1, len(vals)))(*vals)
                keep.append(ia)
                a.kind = _lib.ATTR_INTS
                a.n = len(vals)
                a.ints = ia
        e = _lib.kiln_err()
        return self._v(lib.kiln_graph_op(self._ptr, _b(name), len(inputs),
                                         ins, ctypes.cast(arr,
                                                          ctypes.c_void_p),
                                         len(attrs), ctypes.byref(e)), e)

    def subtensor(self, x, index):
        """``x[index]``: basic indexing by ints and slices."""
        if not isinstance(index, tuple):
            index = (index,)
        idx = (_lib.kiln_index * max(1, len(index)))(
            *[_index_entry(k) for k in index])
        e = _lib.kiln_err()
        return self._v(lib.kiln_graph_subtensor(
            self._ptr, self._value(x), len(index), idx, ctypes.byref(e)), e)

    def set_subtensor(self, x, index, v, inc=False):
        """A copy of x with ``x[index]`` set to (inc: increased by) v."""
        if not isinstance(index, tuple):
            index = (index,)
        idx = (_lib.kiln_index * max(1, len(index)))(
            *[_index_entry(k) for k in index])
        e = _lib.kiln_err()
        return self._v(lib.kiln_graph_set_subtensor(
            self._ptr, self._value(x), len(index), idx, self._value(v),
            int(bool(inc)), ctypes.byref(e)), e)

    def advanced_set_subtensor(self, x, idx, axis, v, inc=False):
        """set/inc of x at integer index tensor ``idx`` along ``axis``."""
        e = _lib.kiln_err()
        return self._v(lib.kiln_graph_advanced_set_subtensor(
            self._ptr, self._value(x), self._value(idx), int(axis),
            self._value(v), int(bool(inc)), ctypes.byref(e)), e)

    def grad(self, cost, wrt, disconnected_zero=False):
        """Reverse-mode gradients of scalar ``cost`` with respect to each
        of ``wrt`` (inputs or shared values): a list of Values (one Value
        when ``wrt`` is a single Value)."""
        single = isinstance(wrt, (Value, str))
        ws = [wrt] if single else list(wrt)
        w = (ctypes.c_int32 * max(1, len(ws)))(*[self._value(x) for x in ws])
        out = (ctypes.c_int32 * max(1, len(ws)))()
        e = _lib.kiln_err()
        flags = _lib.GRAD_DISCONNECTED_ZERO if disconnected_zero else 0
        if lib.kiln_graph_grad(self._ptr, self._value(cost), len(ws), w,
                               flags, out, ctypes.byref(e)):
            raise _error(e)
        vals = [Value(self, out[i]) for i in range(len(ws))]
        return vals[0] if single else vals

    def set_name(self, value, name):
        e = _lib.kiln_err()
        if lib.kiln_graph_set_name(self._ptr, self._value(value), _b(name),
                                   ctypes.byref(e)):
            raise _error(e)
        return value

    def output(self, name, value, kind=None):
        """Declare output ``name`` = ``value``; ``kind`` None, "tp"
        (transformed parameter) or "gq" (generated quantity)."""
        e = _lib.kiln_err()
        if lib.kiln_graph_output(self._ptr, _b(name), self._value(value),
                                 ctypes.byref(e)):
            raise _error(e)
        if kind is not None:
            k = {"tp": _lib.OUTPUT_TP, "gq": _lib.OUTPUT_GQ,
                 "plain": _lib.OUTPUT_PLAIN}.get(kind)
            if k is None:
                raise KilnError("output '%s': kind %r is not tp, gq or plain"
                                % (name, kind), _lib.ERR_ARG)
            if lib.kiln_graph_set_output_kind(self._ptr, _b(name), k,
                                              ctypes.byref(e)):
                raise _error(e)
        return value

    def lookup(self, name):
        """The Value named ``name``, or None."""
        v = lib.kiln_graph_lookup(self._ptr, _b(name))
        return None if v < 0 else Value(self, v)

    def __getitem__(self, name):
        v = self.lookup(name)
        if v is None:
            raise KeyError(name)
        return v


def _as_graph(g):
    if isinstance(g, Graph):
        return g
    if isinstance(g, (str, bytes)):
        s = g.decode() if isinstance(g, bytes) else g
        if "\n" not in s and s.endswith(".kg") and os.path.exists(s):
            return Graph.parse_file(s)
        return Graph.parse(s)
    raise TypeError("expected a kiln.Graph or .kg text, got %s"
                    % type(g).__name__)


# ---- options --------------------------------------------------------------

_TIERS = {None: _lib.TIERS_POLICY, True: _lib.TIERS_POLICY,
          "policy": _lib.TIERS_POLICY, "on": _lib.TIERS_POLICY,
          False: _lib.TIERS_OFF, "off": _lib.TIERS_OFF,
          "baseline": _lib.TIERS_BASELINE}
_CACHE = {None: _lib.CACHE_DEFAULT, True: _lib.CACHE_ON, False: _lib.CACHE_OFF,
          "on": _lib.CACHE_ON, "off": _lib.CACHE_OFF,
          "read-only": _lib.CACHE_READ_ONLY, "readonly": _lib.CACHE_READ_ONLY,
          "recache": _lib.CACHE_RECACHE}


class _Options:
    """A kiln_options and everything its pointers point at."""

    def __init__(self, backend=None, policy=None, tiers=None, cache=None,
                 plugin_path=None, quiet=False, jobs=0, opt_level=0,
                 fast_math=False, passes=None, generic_target=False,
                 tier_threads=0, model_path=None, cache_dir=None):
        self._policy = None
        o = _lib.kiln_options()
        o.struct_size = ctypes.sizeof(o)
        self._keep = []

        def s(x):
            if x is None:
                return None
            b = _b(x)
            self._keep.append(b)
            return b
        o.backend = s(backend)
        o.plugin_path = s(os.pathsep.join(plugin_path)
                          if isinstance(plugin_path, (list, tuple))
                          else plugin_path)
        o.quiet = int(bool(quiet))
        o.jobs = int(jobs)
        o.opt_level = int(opt_level)
        o.fast_math = int(bool(fast_math))
        if isinstance(cache, (str, os.PathLike)) and \
                (isinstance(cache, os.PathLike) or cache not in _CACHE):
            o.cache_mode = _lib.CACHE_ON
            o.cache_dir = s(os.path.abspath(os.fspath(cache)))
        else:
            if cache not in _CACHE:
                raise KilnError("cache=%r: expected True, False, None, a "
                                "directory or one of on/off/read-only/recache"
                                % (cache,), _lib.ERR_ARG)
            o.cache_mode = _CACHE[cache]
        if cache_dir is not None:
            o.cache_dir = s(os.path.abspath(os.fspath(cache_dir)))
        if policy is not None:
            p = os.fspath(policy)
            if os.path.exists(p) or "\n" not in p and ":" not in p:
                o.policy_file = s(p)
            else:
                e = _lib.kiln_err()
                t = p.encode("utf-8")
                self._policy = lib.kiln_policy_load_string(
                    t, len(t), b"<policy>", ctypes.byref(e))
                if not self._policy:
                    raise _error(e)
                o.policy = self._policy
        o.model_path = s(model_path)
        o.passes = s(passes)
        o.generic_target = int(bool(generic_target))
        try:
            o.tiers = _TIERS[tiers]
        except (KeyError, TypeError):
            raise KilnError("tiers=%r: expected None, True, False, 'policy', "
                            "'off' or 'baseline'" % (tiers,), _lib.ERR_ARG)
        o.tier_threads = int(tier_threads)
        self.opt = o

    def __del__(self):
        if getattr(self, "_policy", None) and lib is not None:
            lib.kiln_policy_free(self._policy)
            self._policy = None


# ---- arrays <-> tensors ---------------------------------------------------

def _as_input(x, code, name):
    """x as a C-contiguous array of kiln dtype `code`: x itself when it
    already is one (no copy), else one conversion.  A narrowing integer
    conversion (int64 to i32, uint64 to i64) is checked value by value,
    and bool bytes other than 0 and 1 (a .view(bool) of other data) are
    made 0/1, so kiln never sees a value NumPy would not mean."""
    want = _NP[code]
    a = x if isinstance(x, np.ndarray) else np.asarray(x)
    if a.dtype == want and a.flags.c_contiguous:
        return _canonical_bool(a) if want == np.bool_ else a
    if a.dtype != want and not np.can_cast(a.dtype, want, "same_kind"):
        raise KilnError("input '%s': cannot convert %s to %s"
                        % (name, a.dtype, _lib.lib.kiln_dtype_name(code)
                           .decode()), _lib.ERR_TYPE)
    if a.dtype.kind in "iu" and want.kind in "iu" and a.size \
            and not np.can_cast(a.dtype, want, "safe"):
        lim = np.iinfo(want)
        lo, hi = int(a.min()), int(a.max())   # Python ints: exact
        if lo < lim.min or hi > lim.max:
            raise KilnError("input '%s': value %d does not fit in %s"
                            % (name, lo if lo < lim.min else hi,
                               _lib.lib.kiln_dtype_name(code).decode()),
                            _lib.ERR_TYPE)
    # (not ascontiguousarray: it makes a 0-d array 1-d)
    a = np.array(a, dtype=want, order="C")
    return _canonical_bool(a) if want == np.bool_ else a


def _canonical_bool(a):
    """a (C-contiguous bool) with every byte 0 or 1."""
    if a.size and a.view(np.uint8).max() > 1:
        return a.view(np.uint8) != 0
    return a


def _fill_tensor(t, a):
    if a.ndim > _lib.MAX_RANK:
        raise KilnError("rank %d exceeds kiln's maximum %d"
                        % (a.ndim, _lib.MAX_RANK), _lib.ERR_SHAPE)
    t.dtype = _KILN[a.dtype]
    t.rank = a.ndim
    for i, d in enumerate(a.shape):
        t.shape[i] = d
    t.data = a.ctypes.data


def _view(t):
    """A numpy view of kiln-owned output tensor t (valid until the next
    call on its context)."""
    shape = tuple(t.shape[:t.rank])
    dt = _NP[t.dtype]
    n = dt.itemsize
    for d in shape:
        n *= d
    if n == 0:
        return np.empty(shape, dtype=dt)
    buf = (ctypes.c_char * n).from_address(t.data)
    return np.frombuffer(buf, dtype=dt).reshape(shape)


_c_char = ctypes.c_char


def _addr(a):
    """The address of a C-contiguous array's data (the fast way for a
    writable, non-empty array)."""
    try:
        return ctypes.addressof(_c_char.from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


class _Handle:
    """Owns a kiln_function; freed when the last Function or context
    holding it is gone (contexts are freed before their function)."""

    def __init__(self, ptr):
        self.ptr = ptr
        # arrays the function reads in place: from its graph
        # (Graph.shared(copy=False)) and bind_shared(copy=False) by name;
        # dropped only after the function is freed
        self.graph_borrowed = []
        self.borrowed = {}

    def __del__(self):
        if self.ptr and lib is not None:
            lib.kiln_function_free(self.ptr)
            self.ptr = None


class _Context:
    """One thread's kiln_context of a function, with its tensor arrays."""

    def __init__(self, handle, n_in, n_out):
        e = _lib.kiln_err()
        self.handle = handle
        self.ptr = lib.kiln_context_new(handle.ptr, ctypes.byref(e))
        if not self.ptr:
            raise _error(e)
        self.ins = (_lib.kiln_tensor * max(1, n_in))()
        self.outs = (_lib.kiln_tensor * max(1, n_out))()
        self.err = _lib.kiln_err()
        self.err_ref = ctypes.byref(self.err)
        self.in_shapes = [None] * n_in   # the shape each ins[i] holds
        # the outputs as the last call left them (bytes of self.outs) and
        # numpy views of them: reused while kiln's buffers stay put
        self.out_key = None
        self.out_views = None

    def __del__(self):
        if self.ptr and lib is not None:
            lib.kiln_context_free(self.ptr)
            self.ptr = None


class Function:
    """A compiled graph (kiln.compile).  ``f(*arrays)`` returns a tuple of
    new numpy arrays, one per output in declaration order; ``f.call(d)``
    takes and returns dicts by name.  Each thread calls through its own
    kiln_context; the call releases the GIL."""

    def __init__(self, ptr, graph=None):
        self._h = _Handle(ptr)
        self._local = threading.local()
        f = ptr
        self.input_names = tuple(
            _s(lib.kiln_function_input_name(f, i))
            for i in range(lib.kiln_function_n_inputs(f)))
        self.output_names = tuple(
            _s(lib.kiln_function_output_name(f, i))
            for i in range(lib.kiln_function_n_outputs(f)))
        self.shared_names = tuple(
            _s(lib.kiln_function_shared_name(f, i))
            for i in range(lib.kiln_function_n_shared(f)))
        types = []
        for i in range(len(self.input_names)):
            dt, rank = ctypes.c_int(), ctypes.c_int()
            dims = (ctypes.c_int64 * _lib.MAX_RANK)()
            syms = (ctypes.c_char_p * _lib.MAX_RANK)()
            lib.kiln_function_input_type(f, i, ctypes.byref(dt),
                                         ctypes.byref(rank), dims, syms)
            shape = tuple(dims[j] if dims[j] >= 0 else
                          (_s(syms[j]) if syms[j] else None)
                          for j in range(rank.value))
            types.append((dt.value, shape))
        self._in_codes = tuple(t[0] for t in types)
        self.input_types = tuple((_NP[t[0]], t[1]) for t in types)

    @property
    def _ptr(self):
        return self._h.ptr

    def _ctx(self):
        c = getattr(self._local, "ctx", None)
        if c is None:
            c = _Context(self._h, len(self.input_names),
                         len(self.output_names))
            self._local.ctx = c
        return c

    def _run(self, args):
        return tuple(self._run_list(args))

    def _run_list(self, args):
        """The call: a list of new arrays, one per output."""
        n = len(self._in_codes)
        if len(args) != n:
            raise KilnError("%d inputs given, the function takes %d (%s)"
                            % (len(args), n, ", ".join(self.input_names)),
                            _lib.ERR_ARG)
        codes = self._in_codes
        # every input converted before this thread's context is touched: a
        # conversion may run Python (__array__) that calls this function
        keep = [_as_input(args[i], codes[i], self.input_names[i])
                for i in range(n)]  # alive until the call ends
        c = self._ctx()
        ins = c.ins
        shapes = c.in_shapes
        for i in range(n):
            a = keep[i]
            t = ins[i]
            if a.shape != shapes[i]:
                _fill_tensor(t, a)
                shapes[i] = a.shape
            t.data = _addr(a)
        if lib.kiln_context_call(c.ptr, ins, c.outs, c.err_ref):
            c.out_key = None
            raise _error(c.err)
        key = bytes(c.outs)
        if key != c.out_key:
            c.out_views = [_view(c.outs[i])
                           for i in range(len(self.output_names))]
            c.out_key = key
        return [v.copy() for v in c.out_views]

    def __call__(self, *args, **named):
        if named:
            args = list(args)
            for name in self.input_names[len(args):]:
                if name not in named:
                    raise KilnError("input '%s' not given" % name,
                                    _lib.ERR_NAME)
                args.append(named.pop(name))
            if named:
                raise KilnError("no input named '%s' (inputs: %s)"
                                % (next(iter(named)),
                                   ", ".join(self.input_names)),
                                _lib.ERR_NAME)
        return self._run(args)

    def call(self, inputs):
        """Inputs as a dict by name; outputs as a dict by name."""
        missing = [k for k in self.input_names if k not in inputs]
        if missing:
            raise KilnError("input '%s' not given" % missing[0],
                            _lib.ERR_NAME)
        extra = [k for k in inputs if k not in self.input_names]
        if extra:
            raise KilnError("no input named '%s' (inputs: %s)"
                            % (extra[0], ", ".join(self.input_names)),
                            _lib.ERR_NAME)
        outs = self._run([inputs[k] for k in self.input_names])
        return dict(zip(self.output_names, outs))

    def bind_shared(self, name, value, copy=True):
        """Replace shared value ``name`` with a copy of ``value`` (same
        dtype and shape).  Not while a call is in flight.  copy=False
        reads ``value``'s bytes in place from now on
        (kiln_function_bind_shared_ref; the Function keeps a reference to
        the array, and changes made to it in place are seen by the next
        call); an array that is not C-contiguous with the shared value's
        dtype is converted once first."""
        i = self.shared_names.index(name) if name in self.shared_names \
            else -1
        a = np.asarray(value)
        if a.dtype.kind == "c":
            raise KilnError("shared '%s': complex values (kiln has no complex "
                            "dtype)" % name, _lib.ERR_TYPE)
        if i >= 0 and a.dtype not in _KILN:
            a = a.astype(np.float64)
        if copy:
            a = np.array(a, order="C")
        elif not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        t = _lib.kiln_tensor()
        _fill_tensor(t, a)
        e = _lib.kiln_err()
        fn = lib.kiln_function_bind_shared if copy \
            else lib.kiln_function_bind_shared_ref
        if fn(self._ptr, _b(name), ctypes.byref(t), ctypes.byref(e)):
            raise _error(e)
        if copy:
            self._h.borrowed.pop(name, None)
        else:
            self._h.borrowed[name] = a

    def tier_wait(self, timeout=None):
        """Wait for tier-1 compiles in flight; True when none is left."""
        return lib.kiln_function_tier_wait(
            self._ptr, -1.0 if timeout is None else float(timeout)) == 0

    @property
    def kernel_backends(self):
        """The backend each kernel runs on now."""
        return [_s(lib.kiln_function_kernel_backend(self._ptr, i))
                for i in range(lib.kiln_function_n_kernels(self._ptr))]

    def logp_callback(self, logp_output="logp"):
        """The nutpie-ABI log-density callback of output ``logp_output``
        (kiln_function_logp_callback, docs/sampler.md): returns
        ``(fn, user_data, dim)`` with ``fn`` a ctypes function pointer
        (kiln.LOGP_FN; ``ctypes.cast(fn, c_void_p).value`` is its
        address) and ``user_data`` an int address, valid while this
        Function lives.  A sampler calls it without Python."""
        dim = ctypes.c_uint64()
        ud = ctypes.c_void_p()
        e = _lib.kiln_err()
        p = lib.kiln_function_logp_callback(self._ptr, _b(logp_output),
                                            ctypes.byref(dim),
                                            ctypes.byref(ud),
                                            ctypes.byref(e))
        if not p:
            raise _error(e)
        return _lib.LOGP_FN(p), ud.value, dim.value

    @staticmethod
    def logp_callback_message(user_data):
        """Why this thread's last call of the callback failed ("" if not)."""
        return _s(lib.kiln_logp_callback_message(user_data))


LOGP_FN = _lib.LOGP_FN


def compile(graph, backend=None, policy=None, tiers=None, cache=None,
            plugin_path=None, **options):
    """Compile ``graph`` (a Graph or .kg text) to a Function.

    backend: "interp", "tcc", "llvm", ... (None: $KILN_BACKEND, else the
    policy).  policy: a YAML file path or YAML text.  tiers: None/True
    (as the policy says), False (compile everything now), "baseline".
    cache: None ($KILN_CACHE, else on), True, False, "read-only",
    "recache", or a directory (absolute or made absolute) to cache in.
    plugin_path: extra plugin directories (str with ':' or a list).
    Other keywords: quiet, jobs, opt_level, fast_math, passes,
    generic_target, tier_threads, model_path, cache_dir (kiln_options)."""
    g = _as_graph(graph)
    o = _Options(backend=backend, policy=policy, tiers=tiers, cache=cache,
                 plugin_path=plugin_path, **options)
    e = _lib.kiln_err()
    p = lib.kiln_compile(g._ptr, ctypes.byref(o.opt), ctypes.byref(e))
    if not p:
        raise _error(e)
    f = Function(p, g)
    f._h.graph_borrowed = list(g._borrowed)   # read in place by f
    return f


# ---- models ---------------------------------------------------------------

def _data_json(data):
    if data is None:
        return None
    if isinstance(data, dict):
        def conv(v):
            a = np.asarray(v)
            if a.dtype == np.bool_:
                a = a.astype(np.int64)
            return a.tolist()
        return json.dumps({k: conv(v) for k, v in data.items()})
    return os.fspath(data)


def _dvec(x, n, what):
    if np.iscomplexobj(x):
        raise KilnError("%s: complex values (kiln's parameters are real)"
                        % what, _lib.ERR_TYPE)
    try:
        a = np.array(x, dtype=np.float64, order="C")
    except (TypeError, ValueError) as e:
        raise KilnError("%s: expected %d numbers (%s)" % (what, n, e),
                        _lib.ERR_TYPE) from None
    if a.ndim != 1 or a.shape[0] != n:
        raise KilnError("%s: expected %d values, got shape %s"
                        % (what, n, _shape_str(a.shape)), _lib.ERR_SHAPE)
    return a


def _dp(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


class _ModelScratch:
    """One thread's buffers for Model calls."""
    __slots__ = ("u", "up", "g", "gp", "lp", "lpr", "e", "er")

    def __init__(self, n):
        self.u = np.zeros(n)
        self.g = np.zeros(n)
        self.up = _dp(self.u)
        self.gp = _dp(self.g)
        self.lp = ctypes.c_double()
        self.lpr = ctypes.byref(self.lp)
        self.e = _lib.kiln_err()
        self.er = ctypes.byref(self.e)


class Model:
    """A statistical model (kiln_model, model.h): a graph with ``param``
    declarations and a scalar log density, over the unconstrained vector.

    graph_or_text: a Graph, .kg text or a .kg path.  logp_output: the log
    density's output (None: "logp", else the first plain output).  data:
    a dict of arrays, JSON text or the path of a .json file, binding
    shared values without one.  Other keywords are those of
    kiln.compile.  Methods may be called from several threads at once."""

    def __init__(self, graph_or_text, logp_output=None, data=None,
                 **options):
        g = _as_graph(graph_or_text)
        o = _Options(**options)
        e = _lib.kiln_err()
        p = lib.kiln_model_new(g._ptr, _b(logp_output),
                               _b(_data_json(data)), ctypes.byref(o.opt),
                               None, ctypes.byref(e))
        if not p:
            raise _error(e)
        self._ptr = p
        self._borrowed = list(g._borrowed)   # read in place by the model
        self.n_unc = lib.kiln_model_n_unc(p)
        self._local = threading.local()

    def __del__(self):
        p = getattr(self, "_ptr", None)
        if p and lib is not None:
            lib.kiln_model_free(p)
            self._ptr = None

    @property
    def name(self):
        return _s(lib.kiln_model_name(self._ptr))

    @property
    def info(self):
        return _s(lib.kiln_model_info(self._ptr))

    def n_params(self, include_tp=False, include_gq=False):
        return lib.kiln_model_n_params(self._ptr, int(include_tp),
                                       int(include_gq))

    def param_names(self, include_tp=False, include_gq=False):
        """Constrained names in Stan's dotted form ("theta.1")."""
        s = _s(lib.kiln_model_param_names(self._ptr, int(include_tp),
                                          int(include_gq)))
        return s.split(",") if s else []

    def param_unc_names(self):
        s = _s(lib.kiln_model_param_unc_names(self._ptr))
        return s.split(",") if s else []

    def _scratch(self):
        """This thread's call buffers (unconstrained vector, gradient, log
        density, error) with their ctypes pointers made once: a call then
        costs a copy in, the C call and a copy out."""
        s = getattr(self._local, "s", None)
        if s is None:
            s = self._local.s = _ModelScratch(self.n_unc)
        return s

    def _theta(self, s, theta, what):
        u = s.u
        if type(theta) is np.ndarray and theta.shape == u.shape \
                and theta.dtype.kind in "fiub":
            np.copyto(u, theta, casting="unsafe" if theta.dtype.kind == "f"
                      else "same_kind")
        else:
            u[...] = _dvec(theta, self.n_unc, what)

    def log_density(self, theta, jacobian=True):
        """The log density at unconstrained ``theta``."""
        s = self._scratch()
        self._theta(s, theta, "log_density")
        if lib.kiln_model_log_density(self._ptr, 1 if jacobian else 0, s.up,
                                      s.lpr, None, s.er):
            raise _error(s.e)
        return s.lp.value

    def log_density_gradient(self, theta, jacobian=True):
        """(log density, gradient) at unconstrained ``theta``: one call.
        The gradient is a new array."""
        s = self._scratch()
        self._theta(s, theta, "log_density_gradient")
        if lib.kiln_model_log_density(self._ptr, 1 if jacobian else 0, s.up,
                                      s.lpr, s.gp, s.er):
            raise _error(s.e)
        return s.lp.value, s.g.copy()

    def log_density_hessian(self, theta, jacobian=True):
        """(log density, gradient, Hessian) (finite differences of the
        gradient; model.h)."""
        n = self.n_unc
        u = _dvec(theta, n, "log_density_hessian")
        lp = ctypes.c_double()
        g = np.empty(n)
        h = np.empty((n, n))
        e = _lib.kiln_err()
        if lib.kiln_model_log_density_hessian(
                self._ptr, int(bool(jacobian)), _dp(u), ctypes.byref(lp),
                _dp(g), _dp(h), ctypes.byref(e)):
            raise _error(e)
        return lp.value, g, h

    def log_density_hvp(self, theta, v, jacobian=True):
        """(log density, Hessian-vector product H v)."""
        n = self.n_unc
        u = _dvec(theta, n, "log_density_hvp")
        vv = _dvec(v, n, "log_density_hvp")
        lp = ctypes.c_double()
        out = np.empty(n)
        e = _lib.kiln_err()
        if lib.kiln_model_log_density_hvp(
                self._ptr, int(bool(jacobian)), _dp(u), _dp(vv),
                ctypes.byref(lp), _dp(out), ctypes.byref(e)):
            raise _error(e)
        return lp.value, out

    def constrain(self, theta, include_tp=False, include_gq=False):
        """Constrained values (then tp, gq) for unconstrained ``theta``."""
        u = _dvec(theta, self.n_unc, "constrain")
        out = np.empty(self.n_params(include_tp, include_gq))
        e = _lib.kiln_err()
        if lib.kiln_model_constrain(self._ptr, int(include_tp),
                                    int(include_gq), _dp(u), _dp(out),
                                    ctypes.byref(e)):
            raise _error(e)
        return out

    def unconstrain(self, x):
        """Unconstrained values for constrained parameters ``x`` (an array
        of n_params() values, or a dict / JSON text by name)."""
        out = np.empty(self.n_unc)
        e = _lib.kiln_err()
        if isinstance(x, (dict, str)):
            text = _data_json(x) if isinstance(x, dict) else x
            rc = lib.kiln_model_unconstrain_json(self._ptr,
                                                 text.encode("utf-8"),
                                                 _dp(out), ctypes.byref(e))
        else:
            c = _dvec(x, self.n_params(), "unconstrain")
            rc = lib.kiln_model_unconstrain(self._ptr, _dp(c), _dp(out),
                                            ctypes.byref(e))
        if rc:
            raise _error(e)
        return out

    def tier_wait(self, timeout=None):
        """Wait for the density's tier-1 compiles; True when none left."""
        return lib.kiln_model_tier_wait(
            self._ptr, -1.0 if timeout is None else float(timeout)) == 0

    def tier_count(self):
        """(kernels on tier 1, kernels)."""
        t, k = ctypes.c_int(), ctypes.c_int()
        lib.kiln_model_tier_count(self._ptr, ctypes.byref(t), ctypes.byref(k))
        return t.value, k.value
