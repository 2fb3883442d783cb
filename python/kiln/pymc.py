"""PyMC models on kiln: a PyMC model as a kiln model, with no PyTensor VM
on the hot path (docs/pymc.md).

::

    import kiln.pymc
    km = kiln.pymc.compile_model(model)          # a kiln.Model
    lp, grad = km.log_density_gradient(x)        # x: PyMC's raveled vector
    kiln.pymc.to_bridgestan(model, "model.so")   # for any BridgeStan client

``compile_model`` converts PyMC's log density (``model.logp()``, with its
transforms and Jacobians, as ``model.logp_dlogp_function()`` computes it)
to kiln's ``.kg`` text with ``kiln.pytensor.to_kg`` and makes a
``kiln.Model`` of it: kiln builds the gradient itself, so PyTensor's
gradient graph is never built, and every call runs in libkiln.

The unconstrained vector is PyMC's: the value variables of
``model.value_vars`` in order, each flattened in C order
(``DictToArrayBijection``, ``model.initial_point()``).  How each free
variable maps:

* no transform: ``param NAME`` (no bounds);
* ``log``: ``param NAME lower=0``; an ``interval`` transform with constant
  scalar bounds (``pm.Uniform``, ``pm.Truncated``, a bounded ``Beta`` ...):
  ``param NAME lower=A upper=B`` (either may be absent); ``logodds``:
  ``lower=0 upper=1``.  These are Stan's transforms, equal to PyMC's: the
  graph is PyMC's log density on the constrained value (the transform
  removed) and kiln adds the log-Jacobian;
* any other transform (simplex, ordered, zerosum, circular, Cholesky ...)
  or an interval with non-constant bounds: ``param VALUE_NAME`` (the
  unconstrained value, e.g. ``p_simplex__``), PyMC's log density with that
  transform's Jacobian, and the backward transform as ``output tp NAME``,
  so the constrained value is still reported.

Deterministics are ``output tp`` too.  Data (observed values, ``pm.Data``
and other shared variables) are constants of the graph, taken when the
model is compiled.  Discrete free variables are refused (NUTS cannot move
them).
"""

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
import warnings

import numpy as np

import kiln as _kiln

import pytensor
import pytensor.tensor as pt
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import graph_inputs
from pytensor.graph.replace import graph_replace

import pymc as pm
from pymc.logprob.transforms import IntervalTransform, LogOddsTransform, LogTransform
from pymc.model.transform.conditioning import remove_value_transforms

__all__ = ["UnsupportedModel", "PymcModel", "compile_model", "model_to_kg",
           "to_bridgestan", "kiln_executable"]


class UnsupportedModel(_kiln.KilnError):
    """The PyMC model cannot become a kiln model (the message says why)."""


_IDENT = re.compile(r"[^A-Za-z0-9_]")
# kiln's statement keywords and the names the converter makes
_RESERVED = {"kiln", "graph", "end", "input", "param", "shared", "const",
             "output", "tp", "gq", "lower", "upper", "grad", "logp", "true",
             "false", "nan", "inf"}
_GENERATED = re.compile(r"^(v|c|in|out)\d")


def _const_scalar(v):
    """A constant scalar (a float) folded from PyTensor variable v, else
    None."""
    if v is None:
        return None
    try:
        c = pt.get_underlying_scalar_constant_value(v)
    except Exception:
        return None
    c = np.asarray(c)
    if c.size != 1:
        return None
    return float(c.reshape(()))


def _bounds(rv, transform):
    """Stan bounds (lower, upper) equal to PyMC's transform of rv, None for
    an unbounded side, or False when the transform is not one of Stan's."""
    if transform is None:
        return (None, None)
    if isinstance(transform, LogTransform):
        return (0.0, None)
    if isinstance(transform, LogOddsTransform):
        return (0.0, 1.0)
    if isinstance(transform, IntervalTransform):
        try:
            a, b = transform.args_fn(*rv.owner.inputs)
        except Exception:
            return False
        lo = hi = None
        if a is not None:
            lo = _const_scalar(a)
            if lo is None:
                return False
        if b is not None:
            hi = _const_scalar(b)
            if hi is None:
                return False
        if lo is not None and np.isneginf(lo):
            lo = None
        if hi is not None and np.isposinf(hi):
            hi = None
        if (lo is not None and not np.isfinite(lo)) or \
                (hi is not None and not np.isfinite(hi)):
            return False
        if lo is not None and hi is not None and not (lo < hi and np.isfinite(hi - lo)):
            return False
        return (lo, hi)
    return False


def _jac_offset(rv, transform, bounds, numel):
    """PyMC's log-Jacobian of an interval transform minus Stan's (kiln's),
    a constant: PyMC takes log(b - a) in the bounds' dtype, float32 for
    integer bounds (pm.Uniform("u", -2, 3): log(5) off by 3e-8), kiln in
    f64.  Added to the log density so that kiln equals PyMC."""
    lo, hi = bounds
    if not isinstance(transform, IntervalTransform) or lo is None or hi is None:
        return 0.0
    try:
        lj = transform.log_jac_det(pt.as_tensor(np.float64(0.0)), *rv.owner.inputs)
        fn = pytensor.function([], lj, mode=pytensor.compile.mode.Mode(
            linker="py", optimizer=None))
        pymc = float(np.sum(fn()))
    except Exception:
        return 0.0
    return (pymc - (np.log(hi - lo) - 2 * np.log(2.0))) * numel


def _fmt(x):
    return repr(float(x))


class _Names:
    """Unique kiln identifiers for user-visible names."""

    def __init__(self, taken_text):
        code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', taken_text)   # not in strings
        self.tokens = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
        self.used = set()

    def make(self, name, unc_too=False):
        base = _IDENT.sub("_", name) or "x"
        if base[0].isdigit():
            base = "x" + base
        n = base
        while (n in _RESERVED or _GENERATED.match(n) or n in self.used
               or n in self.tokens
               or (unc_too and (n + "_unc" in self.used or n + "_unc" in self.tokens))):
            n += "_"
        self.used.add(n)
        if unc_too:
            self.used.add(n + "_unc")
        return n


class _Layout:
    """What compile_model learnt about the model (kept on the PymcModel)."""

    def __init__(self):
        self.params = []       # dicts: name, value_name, rv_name, shape, bounds, kind
        self.tps = []          # dicts: name, source (rv name), shape, kind
        self.jac_offset = 0.0  # PyMC's Jacobian constants minus kiln's
        self.text = None

    def __repr__(self):
        rows = []
        for p in self.params:
            how = ("param %s lower=%s upper=%s" % (p.get("name"), *p["bounds"])
                   if p["kind"] == "bounded" else
                   "param %s (%s)" % (p.get("name"), "PyMC's transform in the graph"
                                      if p["transform"] is not None else
                                      "unconstrained"))
            rows.append("  %s %s: %s" % (p["value_name"], p["shape"], how))
        for t in self.tps:
            rows.append("  output tp %s (%s)" % (t.get("name"), t.get("kind")))
        return "kiln.pymc layout:\n" + "\n".join(rows)


def model_to_kg(model=None, name=None, deterministics=True):
    """The kiln model text of a PyMC model and its layout: (text, layout).

    Raises UnsupportedModel (discrete free variables, no free variables)
    and kiln.pytensor.Unsupported (an op kiln cannot take, named).

    PyMC's own graph work here (the initial point, the logp graph's
    constant folding) runs with PyTensor's C compiler off
    (``cxx=""``): it computes the same values in Python, and nothing in
    the result runs in PyTensor, so no PyTensor C module is ever built."""
    with pytensor.config.change_flags(cxx=""):
        return _model_to_kg(model, name, deterministics)


def _model_to_kg(model, name, deterministics):
    import kiln.pytensor as kpt

    model = pm.modelcontext(model)
    if not model.free_RVs:
        raise UnsupportedModel("pymc: the model has no free random variables: "
                               "nothing to sample")
    disc = [model.values_to_rvs[v].name for v in model.value_vars
            if v not in model.continuous_value_vars]
    if disc:
        raise UnsupportedModel(
            "pymc: discrete free variable%s %s: kiln models are over continuous "
            "parameters (gradient samplers cannot move discrete ones); "
            "marginalise them (pymc_extras.marginalize) or observe them"
            % ("s" if len(disc) > 1 else "", ", ".join(repr(d) for d in disc)))
    ip = model.initial_point()
    mapped, plan = [], []
    for v in model.value_vars:
        rv = model.values_to_rvs[v]
        tr = model.rvs_to_transforms.get(rv)
        b = _bounds(rv, tr)
        plan.append((v, rv, tr, b))
        if tr is not None and b is not False:
            mapped.append(rv)
    m0 = remove_value_transforms(model, mapped) if mapped else model

    layout = _Layout()
    new_inputs, replace, outputs = [], {}, []
    for v, rv, tr, b in plan:
        rv0 = m0[rv.name]
        v0 = m0.rvs_to_values[rv0]
        shape = tuple(np.shape(ip[v.name]))
        nv = pt.tensor(name=v0.name, dtype="float64", shape=shape)
        new_inputs.append(nv)
        replace[v0] = nv if v0.type.dtype == "float64" else nv.astype(v0.type.dtype)
        kind = "bounded" if b is not False else "unconstrained"
        if b is not False:
            layout.jac_offset += _jac_offset(rv, tr, b, int(np.prod(shape, dtype=np.int64)))
        layout.params.append(dict(
            rv_name=rv.name, value_name=v.name, shape=shape, kind=kind,
            bounds=b if b is not False else (None, None), transform=tr))
    logp = m0.logp(jacobian=True)
    outputs.append(logp)
    tp_src = []
    for v, rv, tr, b in plan:
        if b is False:           # constrained value of a kept transform
            tp_src.append((rv.name, "free", m0[rv.name]))
    if deterministics:
        for d in m0.deterministics:
            if d.type.dtype.startswith("float") or d.type.dtype.startswith("int"):
                tp_src.append((d.name, "deterministic", d))
    tp_outs = m0.replace_rvs_by_values([s[2] for s in tp_src]) if tp_src else []
    tp_outs = [o.astype("float64") if o.type.dtype != "float64" else o
               for o in tp_outs]
    allouts = [logp] + list(tp_outs)
    shared = [x for x in graph_inputs(allouts) if isinstance(x, SharedVariable)]
    for s in shared:
        replace[s] = pt.constant(s.get_value(borrow=True), name=s.name)
    allouts = graph_replace(allouts, replace, strict=False)
    gname = _IDENT.sub("_", name or model.name or "pymc_model") or "pymc_model"
    # as pm.compile: an invalid parameter value is a log density of -inf
    # (a sampler rejects the point), or with check_bounds=False no check
    chk = ("local_check_parameter_to_ninf_switch" if model.check_bounds
           else "local_remove_check_parameter")
    try:
        kg = kpt.to_kg(new_inputs, allouts, name=gname, include=(chk,))
    except kpt.Unsupported as e:
        first = e
        if len(allouts) == 1 or not any(s[1] == "deterministic" for s in tp_src):
            kept = [f"'{rv.name}' ({type(tr).__name__})" for v, rv, tr, b in plan
                    if tr is not None and b is False]
            hint = ("; free variables whose PyMC transform is converted with "
                    "the model: " + ", ".join(kept)) if kept else ""
            raise kpt.Unsupported(f"pymc model '{gname}': {e}{hint}") from None
        keep = [i for i, s in enumerate(tp_src) if s[1] == "free"]
        dropped = [s[0] for s in tp_src if s[1] == "deterministic"]
        warnings.warn("kiln.pymc: deterministics %s left out (%s); the log "
                      "density is unaffected" % (", ".join(dropped), first),
                      stacklevel=2)
        tp_src = [tp_src[i] for i in keep]
        allouts = [allouts[0]] + [allouts[1 + i] for i in keep]
        kg = kpt.to_kg(new_inputs, allouts, name=gname, include=(chk,))
    layout.text = _rewrite_text(kg, layout, tp_src)
    return layout.text, layout


def _rewrite_text(kg, layout, tp_src):
    """Turn the converter's inputs into params and its outputs into logp and
    tp outputs."""
    names = _Names(kg.text)
    in_map = dict(zip(kg.input_names, layout.params))
    for p in layout.params:
        if p["kind"] == "bounded":
            p["name"] = names.make(p["rv_name"], unc_too=True)
        else:
            p["name"] = names.make(p["value_name"])
    out_map = {kg.output_names[0]: ("logp", None)}
    for on, (src, kind, _) in zip(kg.output_names[1:], tp_src):
        tname = names.make(src)
        out_map[on] = (tname, "tp")
        layout.tps.append(dict(name=tname, source=src, kind=kind))
    lines = []
    in_re = re.compile(r"^(\s*)input (\S+): (\S+)\s*$")
    out_re = re.compile(r"^(\s*)output (\S+) = (.*)$")
    for line in kg.text.splitlines():
        m = in_re.match(line)
        if m and m.group(2) in in_map:
            p = in_map[m.group(2)]
            lo, hi = p["bounds"]
            bounds = ""
            if lo is not None:
                bounds += " lower=" + _fmt(lo)
            if hi is not None:
                bounds += " upper=" + _fmt(hi)
            lines.append(f"{m.group(1)}param {p['name']}: {m.group(3)}{bounds}")
            continue
        m = out_re.match(line)
        if m and m.group(2) in out_map:
            nm, kind = out_map[m.group(2)]
            if nm == "logp" and layout.jac_offset != 0.0:
                lines.append(f"{m.group(1)}output logp = add({m.group(3)}, "
                             f"{_fmt(layout.jac_offset)})")
                continue
            lines.append(f"{m.group(1)}output {kind + ' ' if kind else ''}{nm} = {m.group(3)}")
            continue
        lines.append(line)
    # the converter's input names become the parameters' names (outside
    # quoted strings; the new names are tokens the text did not have)
    ren = {i: p["name"] for i, p in in_map.items()}
    if ren:
        tok = re.compile(r"\b(" + "|".join(map(re.escape, ren)) + r")\b")
        parts = re.split(r'("(?:[^"\\]|\\.)*")', "\n".join(lines))
        for i in range(0, len(parts), 2):
            parts[i] = tok.sub(lambda mm: ren[mm.group(1)], parts[i])
        return "".join(parts) + "\n"
    return "\n".join(lines) + "\n"


class PymcModel(_kiln.Model):
    """A PyMC model compiled by kiln: a ``kiln.Model`` over PyMC's raveled
    unconstrained vector (``log_density_gradient(x)`` equals
    ``model.logp_dlogp_function()`` at x), plus:

    ``text`` (the ``.kg`` model), ``value_names`` (PyMC's value variables,
    in order), ``array(point)`` / ``point(x)`` between PyMC's dicts and the
    vector, ``logp_callback(jacobian=True)`` (kiln's C sampler callback),
    ``to_bridgestan(path)``."""

    def __init__(self, layout, **options):
        super().__init__(layout.text, logp_output="logp", **options)
        self.layout = layout
        self.text = layout.text
        self.value_names = [p["value_name"] for p in layout.params]
        self._callbacks = {}

    def array(self, point):
        """PyMC's point (a dict by value-variable name, as
        ``model.initial_point()``) as the unconstrained vector."""
        parts = []
        for p in self.layout.params:
            a = np.asarray(point[p["value_name"]], dtype=np.float64)
            if a.shape != p["shape"]:
                raise ValueError(f"kiln.pymc: {p['value_name']} has shape "
                                 f"{a.shape}, the model's is {p['shape']}")
            parts.append(a.ravel())
        return np.concatenate(parts) if parts else np.empty(0)

    def log_density(self, theta, jacobian=True):
        """As kiln.Model's; ``theta`` may also be PyMC's point (a dict)."""
        if isinstance(theta, dict):
            theta = self.array(theta)
        return super().log_density(theta, jacobian)

    def log_density_gradient(self, theta, jacobian=True):
        """As kiln.Model's; ``theta`` may also be PyMC's point (a dict by
        value-variable name, as ``model.initial_point()``)."""
        if isinstance(theta, dict):
            theta = self.array(theta)
        return super().log_density_gradient(theta, jacobian)

    def unc_point(self, x):
        """The unconstrained vector as PyMC's point (value-variable names)."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.n_unc,):
            raise ValueError(f"kiln.pymc: the unconstrained vector has "
                             f"{self.n_unc} values, got shape {x.shape}")
        out, k = {}, 0
        for p in self.layout.params:
            n = int(np.prod(p["shape"], dtype=np.int64))
            out[p["value_name"]] = x[k:k + n].reshape(p["shape"])
            k += n
        return out

    def point(self, x):
        """Constrained values at unconstrained x: every free variable by its
        name (constrained), then every deterministic kiln kept."""
        c = self.constrain(x, include_tp=True)
        out, k = {}, 0
        for p in self.layout.params:
            n = int(np.prod(p["shape"], dtype=np.int64))
            if p["kind"] == "bounded":
                out[p["rv_name"]] = c[k:k + n].reshape(p["shape"])
            k += n
        names = self.param_names(include_tp=True)[k:]
        vals = c[k:]
        j = 0
        for t in self.layout.tps:       # each output's names are contiguous
            pre = t["name"]
            cnt = 0
            while j + cnt < len(names) and (names[j + cnt] == pre
                                             or names[j + cnt].startswith(pre + ".")):
                cnt += 1
            shape = _shape_from_names(names[j:j + cnt], pre)
            out[t["source"]] = vals[j:j + cnt].reshape(shape)
            j += cnt
        return out

    def logp_callback(self, jacobian=True):
        """kiln's sampler callback for this model (kiln_model_logp_callback,
        <kiln/model.h>; nutpie's logp ABI): ``(fn, user_data, dim)`` with
        ``fn`` a ctypes function pointer of type ``LOGP_FN``,
        ``int fn(uint64_t dim, const double *x, double *grad, double *logp,
        void *user_data)``, valid as long as this object lives.  A sampler
        in C calls ``fn`` with ``ctypes.cast(fn, ctypes.c_void_p).value``
        as the address."""
        key = bool(jacobian)
        if key not in self._callbacks:
            lib = _cblib()
            dim = ctypes.c_uint64()
            ud = ctypes.c_void_p()
            e = _kiln._lib.kiln_err()
            fn = lib.kiln_model_logp_callback(self._ptr, int(key), ctypes.byref(dim),
                                              ctypes.byref(ud), ctypes.byref(e))
            if not fn:
                raise _kiln.KilnError(e.message.decode(errors="replace"))
            self._callbacks[key] = (fn, ud, dim.value)
        return self._callbacks[key]

    @staticmethod
    def callback_message(user_data):
        """Why the calling thread's last call through user_data failed."""
        return _cblib().kiln_model_logp_callback_message(user_data).decode(
            errors="replace")

    def to_bridgestan(self, path, kiln_bin=None):
        """Write a BridgeStan library of this model to path (see
        ``to_bridgestan``)."""
        return _write_bridgestan(self.text, path, kiln_bin)


def _shape_from_names(names, pre):
    if len(names) == 1 and names[0] == pre:
        return ()
    idx = [tuple(int(i) for i in n[len(pre) + 1:].split(".")) for n in names]
    return tuple(max(i[d] for i in idx) for d in range(len(idx[0])))


# int fn(uint64_t dim, const double *x, double *grad, double *logp, void *ud)
LOGP_FN = _kiln._lib.LOGP_FN
_cb_lib = None


def _cblib():
    global _cb_lib
    if _cb_lib is None:
        lib = _kiln._lib.lib
        lib.kiln_model_logp_callback.restype = LOGP_FN
        lib.kiln_model_logp_callback.argtypes = [
            ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_kiln._lib.kiln_err)]
        lib.kiln_model_logp_callback_message.restype = ctypes.c_char_p
        lib.kiln_model_logp_callback_message.argtypes = [ctypes.c_void_p]
        _cb_lib = lib
    return _cb_lib


def compile_model(model=None, backend=None, deterministics=True, name=None,
                  **options):
    """A PyMC model (the context's when None) as a ``PymcModel``, a
    ``kiln.Model`` over PyMC's raveled unconstrained vector.  ``backend``
    and the other keywords (policy, tiers, cache, plugin_path) are
    ``kiln.compile``'s.  ``deterministics=False`` leaves the deterministics
    out of the constrained values."""
    text, layout = model_to_kg(model, name=name, deterministics=deterministics)
    return PymcModel(layout, backend=backend, **options)


def kiln_executable():
    """The ``kiln`` program: ``$KILN_BIN``, else the build tree's
    ``tools/kiln`` beside the libkiln in use (``BUILD/.libs/libkiln.so``),
    else the installation's ``bindir`` (``PREFIX/lib/libkiln.so`` ->
    ``PREFIX/bin/kiln``), else ``kiln`` on ``PATH``."""
    env = os.environ.get("KILN_BIN")
    if env:
        return env
    cands = []
    libpath = getattr(_kiln._lib.lib, "_name", None)
    if libpath and os.path.isabs(libpath):
        d = os.path.dirname(os.path.realpath(libpath))
        if os.path.basename(d) == ".libs":
            cands.append(os.path.join(os.path.dirname(d), "tools", "kiln"))
        cands.append(os.path.join(os.path.dirname(d), "bin", "kiln"))
    b = os.environ.get("KILN_BUILDDIR")
    if b:
        cands.append(os.path.join(b, "tools", "kiln"))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    w = shutil.which("kiln")
    if w:
        return w
    raise _kiln.KilnError("kiln.pymc: cannot find the kiln program (looked at "
                          + ", ".join(cands + ["PATH"])
                          + "); set KILN_BIN to its path")


def _write_bridgestan(text, path, kiln_bin=None):
    exe = kiln_bin or kiln_executable()
    path = os.path.abspath(path)
    with tempfile.TemporaryDirectory(prefix="kiln_pymc_") as d:
        kg = os.path.join(d, "model.kg")
        with open(kg, "w") as f:
            f.write(text)
        r = subprocess.run([exe, "bridgestan", kg, "-o", path, "--logp", "logp"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
            raise _kiln.KilnError("kiln.pymc: kiln bridgestan failed: "
                                  + (msg[0] if msg else f"exit {r.returncode}"))
    return path


def to_bridgestan(model, path, kiln_bin=None, deterministics=True):
    """Write a BridgeStan library of a PyMC model (or a PymcModel) to path:
    the model's ``.kg`` text, its data as constants, bound into kiln's
    BridgeStan template by ``kiln bridgestan`` (found by
    ``kiln_executable()``, or ``kiln_bin``).  Any BridgeStan 2.x client
    loads it with no data: ``bridgestan.StanModel(path)``.  Returns the
    absolute path."""
    if isinstance(model, PymcModel):
        text = model.text
    else:
        text, _ = model_to_kg(model, deterministics=deterministics)
    return _write_bridgestan(text, path, kiln_bin)
