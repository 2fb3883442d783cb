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
model is compiled; with ``mpi_axis`` (``model_to_kg``, ``write_model``,
``to_bridgestan``) the data along the observation axis are shared values
sized by a symbol instead, split over MPI ranks.  Discrete free variables are refused (NUTS cannot move
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
from pytensor.graph.basic import Constant, graph_inputs
from pytensor.graph.replace import graph_replace

import pymc as pm
from pymc.logprob.transforms import IntervalTransform, LogOddsTransform, LogTransform
from pymc.model.transform.conditioning import remove_value_transforms

__all__ = ["UnsupportedModel", "PymcModel", "compile_model", "model_to_kg",
           "to_bridgestan", "write_model", "kiln_executable"]


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
        self.axis = None       # with mpi_axis: the axis symbol (N), its PyMC
        self.axis_dim = None   # dim (or None), its length,
        self.axis_len = None
        self.data = {}         # the split data: name -> array (NAME.npy)
        self.data_axes = {}    # name -> the dim the axis sizes

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


def model_to_kg(model=None, name=None, deterministics=True, mpi_axis=None):
    """The kiln model text of a PyMC model and its layout: (text, layout).

    ``mpi_axis`` (a PyMC dim name of ``model.coords``, or a length N >= 2)
    names the observation axis: every observed value, ``pm.Data`` and other
    data (a constant or shared value) with a dim of that length becomes
    ``shared NAME: f64[N, ...] = npy("NAME.npy")``, sized by the symbol
    ``layout.axis`` (``N``), its values in ``layout.data`` (write them with
    ``write_model``), and the graph declares ``partition N``, so that
    ``kiln run --mpi`` and ``kiln bridgestan --mpi`` split it over MPI
    ranks (docs/pymc.md, "Under MPI").  Raises UnsupportedModel when the
    model cannot be split (kiln's partition refuses it: the message names
    the PyTensor node) or when the axis's length is baked into the graph.

    Raises UnsupportedModel (discrete free variables, no free variables)
    and kiln.pytensor.Unsupported (an op kiln cannot take, named).

    PyMC's own graph work here (the initial point, the logp graph's
    constant folding) runs with PyTensor's C compiler off
    (``cxx=""``): it computes the same values in Python, and nothing in
    the result runs in PyTensor, so no PyTensor C module is ever built."""
    with pytensor.config.change_flags(cxx=""):
        return _model_to_kg(model, name, deterministics, mpi_axis)


def _model_to_kg(model, name, deterministics, mpi_axis=None):
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
    split = _axis_data(model, allouts, mpi_axis) if mpi_axis is not None else None
    shared = [x for x in graph_inputs(allouts) if isinstance(x, SharedVariable)]
    for s in shared:
        if split is None or s not in split["of"]:
            replace[s] = pt.constant(s.get_value(borrow=True), name=s.name)
    allouts = graph_replace(allouts, replace, strict=False)
    data_inputs = []
    if split is not None:
        # the data as inputs of a symbolic length, the graph rebuilt over
        # them (rebuild_strict=False: every node's static shape is
        # inferred again, so none keeps the data's length)
        allouts = pytensor.clone_replace(allouts, split["of"], rebuild_strict=False)
        data_inputs = split["inputs"]
        # a deterministic per observation cannot be a part's tp (kiln's
        # constrain is rank 0's own): left out, with a warning
        dep = set(data_inputs)
        keep = [i for i, o in enumerate(allouts[1:])
                if tp_src[i][1] == "free" or not dep & set(graph_inputs([o]))]
        dropped = [tp_src[i][0] for i in range(len(tp_src)) if i not in keep]
        if dropped:
            warnings.warn("kiln.pymc: deterministics %s left out: they depend on "
                          "the data split along mpi_axis %r" %
                          (", ".join(dropped), mpi_axis), stacklevel=3)
            tp_src = [tp_src[i] for i in keep]
            allouts = [allouts[0]] + [allouts[1 + i] for i in keep]
    gname = _IDENT.sub("_", name or model.name or "pymc_model") or "pymc_model"
    # as pm.compile: an invalid parameter value is a log density of -inf
    # (a sampler rejects the point), or with check_bounds=False no check
    chk = ("local_check_parameter_to_ninf_switch" if model.check_bounds
           else "local_remove_check_parameter")
    try:
        kg = kpt.to_kg(new_inputs + data_inputs, allouts, name=gname, include=(chk,))
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
        kg = kpt.to_kg(new_inputs + data_inputs, allouts, name=gname, include=(chk,))
    layout.text = _rewrite_text(kg, layout, tp_src, split)
    if split is not None:
        _check_split(kg, layout, split)
    return layout.text, layout


def _axis_data(model, outputs, mpi_axis):
    """The data split along the observation axis: a dict with ``n`` (the
    axis's length), ``dim`` (the PyMC dim name or None), ``of`` (each data
    variable -> its new input, of a symbolic length along the axis),
    ``inputs`` (the new inputs, in order) and ``entries`` (per new input:
    name, axis position, the values)."""
    dim = None
    if isinstance(mpi_axis, str):
        if mpi_axis not in model.coords:
            raise UnsupportedModel(
                "pymc: mpi_axis %r is not a dim of the model (its coords: %s)"
                % (mpi_axis, ", ".join(repr(c) for c in model.coords) or "none"))
        dim = mpi_axis
        n = int(model.dim_lengths[dim].eval()) if dim in model.dim_lengths \
            else len(model.coords[dim])
    elif isinstance(mpi_axis, (int, np.integer)) and not isinstance(mpi_axis, bool):
        n = int(mpi_axis)
    else:
        raise UnsupportedModel("pymc: mpi_axis must be a dim name (a str) or a "
                               "length (an int), got %r" % (mpi_axis,))
    if n < 2:
        raise UnsupportedModel(
            "pymc: mpi_axis %r has length %d: an observation axis needs at least "
            "2 rows (a length-1 dim cannot be told from a broadcast one)"
            % (mpi_axis, n))
    dims_of = {}
    for vname, dims in model.named_vars_to_dims.items():
        v = model.named_vars.get(vname)
        dims_of[vname] = dims
        if v is not None and v in model.rvs_to_values:
            val = model.rvs_to_values[v]   # an observed value: its RV's dims
            if val.name:
                dims_of.setdefault(val.name, dims)
    of, inputs, entries, seen, kept = {}, [], [], {}, set()
    for x in graph_inputs(outputs):
        if isinstance(x, SharedVariable):
            val = np.asarray(x.get_value(borrow=True))
        elif isinstance(x, Constant) and getattr(x.type, "ndim", 0) > 0:
            val = np.asarray(x.data)
        else:
            continue
        where = [d for d, s in enumerate(val.shape) if s == n]
        dims = dims_of.get(x.name) if x.name else None
        if dim is not None and dims is not None and dim in dims:
            d = list(dims).index(dim)
            if val.shape[d] != n:
                raise UnsupportedModel(
                    "pymc: data %r has %d rows along dim %r, the model's coords "
                    "say %d (after pm.set_data, set the coords too)"
                    % (x.name, val.shape[d], dim, n))
        elif dim is not None and dims is not None and any(dims):
            # data with PyMC dims that do not name the axis: another
            # coordinate that happens to have the axis's length (a "coef"
            # dim as long as "obs"): not split
            if x.name:
                kept.add(x.name)
            continue
        elif not where:
            continue
        elif len(where) > 1:
            raise UnsupportedModel(
                "pymc: data %r has shape %s: more than one dim has the axis's "
                "length %d (an N x N matrix of the data cannot be split over "
                "observations)" % (x.name or str(x), val.shape, n))
        else:
            d = where[0]
        key = (val.dtype.str, val.shape, d, val.tobytes())
        if key in seen:          # one value, several variables: one input
            of[x] = seen[key]
            continue
        shape = tuple(None if i == d else s for i, s in enumerate(val.shape))
        nv = pt.tensor(name=x.name or ("idx" if val.dtype.kind in "iub" else "data"),
                       dtype=x.type.dtype, shape=shape)
        of[x] = seen[key] = nv
        inputs.append(nv)
        entries.append(dict(var=nv, axis=d, values=val, source=x.name))
    if not inputs:
        raise UnsupportedModel(
            "pymc: no data of the model has a dim of the axis's length %d "
            "(mpi_axis %r): nothing to split" % (n, mpi_axis))
    return dict(n=n, dim=dim, of=of, inputs=inputs, entries=entries, kept=kept,
                given=mpi_axis)


def _rewrite_text(kg, layout, tp_src, split=None):
    """Turn the converter's inputs into params and its outputs into logp and
    tp outputs."""
    names = _Names(kg.text)
    in_map = dict(zip(kg.input_names, layout.params))
    for p in layout.params:
        if p["kind"] == "bounded":
            p["name"] = names.make(p["rv_name"], unc_too=True)
        else:
            p["name"] = names.make(p["value_name"])
    data_map = {}
    if split is not None:
        layout.axis = names.make("N")
        layout.axis_dim = split["dim"]
        layout.axis_len = split["n"]
        for kname, e in zip(kg.input_names[len(layout.params):], split["entries"]):
            e["name"] = names.make(e["var"].name)
            e["kdt"] = kg_dtype = _kdt_of(e["var"])
            layout.data[e["name"]] = np.ascontiguousarray(
                e["values"], dtype=_np_of_kdt(kg_dtype))
            layout.data_axes[e["name"]] = e["axis"]
            data_map[kname] = e
    out_map = {kg.output_names[0]: ("logp", None)}
    for on, (src, kind, _) in zip(kg.output_names[1:], tp_src):
        tname = names.make(src)
        out_map[on] = (tname, "tp")
        layout.tps.append(dict(name=tname, source=src, kind=kind))
    lines = []
    declared = False
    in_re = re.compile(r"^(\s*)input (\S+): (.+?)\s*$")
    out_re = re.compile(r"^(\s*)output (\S+) = (.*)$")
    for line in kg.text.splitlines():
        m = in_re.match(line)
        if m and m.group(2) in data_map:
            e = data_map[m.group(2)]
            shape = [layout.axis if i == e["axis"] else str(s)
                     for i, s in enumerate(e["values"].shape)]
            lines.append(f'{m.group(1)}shared {e["name"]}: {e["kdt"]}[{", ".join(shape)}]'
                         f' = npy("{e["name"]}.npy")')
            continue
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
        if m and split is not None and not declared:
            lines.append(f"{m.group(1)}partition {layout.axis}")
            declared = True
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
    ren.update({i: e["name"] for i, e in data_map.items()})
    if ren:
        tok = re.compile(r"\b(" + "|".join(map(re.escape, ren)) + r")\b")
        parts = re.split(r'("(?:[^"\\]|\\.)*")', "\n".join(lines))
        for i in range(0, len(parts), 2):
            parts[i] = tok.sub(lambda mm: ren[mm.group(1)], parts[i])
        return "".join(parts) + "\n"
    return "\n".join(lines) + "\n"


def _kdt_of(var):
    import kiln.pytensor as kpt
    return kpt._kdt(var.type.dtype, f"data '{var.name}'")


def _np_of_kdt(kdt):
    import kiln.pytensor as kpt
    return kpt._NP_OF_KDT[kdt]


def _pt_node(kg, kname):
    """What the kiln value KNAME of the converter's text came from, for a
    message: PyTensor's op and its inputs' names."""
    v = getattr(kg, "var_of", {}).get(kname)
    if v is None:
        return None
    if v.owner is None:
        return f"PyTensor's {v.name or v}"
    ins = ", ".join(i.name or (type(i.owner.op).__name__ if i.owner else "?")
                    for i in v.owner.inputs)
    return f"PyTensor's {v.owner.op}({ins})" + (f" -> '{v.name}'" if v.name else "")


def _short(text, n=100):
    return text if len(text) <= n else text[:n - 3] + "..."


class _kiln_partition(ctypes.Structure):
    _fields_ = [("axis", ctypes.c_char_p), ("part", ctypes.c_int),
                ("nparts", ctypes.c_int)]


def _check_split(kg, layout, split):
    """Refuse (UnsupportedModel) a split text with the axis's length baked
    into a shape, or one kiln's partition refuses, naming the node."""
    axis, n = layout.axis, split["n"]
    what = (f"dim {split['dim']!r}" if split["dim"] is not None
            else f"length {n}") + f" (symbol {axis})"
    text_lines = layout.text.splitlines()
    kname_re = re.compile(r"^\s*(?:output (?:tp |gq )?)?(\w+)\s*(?:=|:)")
    for i, line in enumerate(text_lines, 1):
        if re.match(r"^\s*(shared|param|partition)\b", line):
            continue
        lists = re.findall(r"shape=\[([^\]]*)\]", line)
        m = re.match(r"^\s*const \w+: \w+\[([^\]]*)\]", line)
        if m:
            lists.append(m.group(1))
        if any(str(n) in [t.strip() for t in lst.split(",")] for lst in lists):
            cm = re.match(r"^\s*const (\w+):", line)
            v = getattr(kg, "var_of", {}).get(cm.group(1)) if cm else None
            if v is not None and v.name in split.get("kept", ()):
                continue   # data of another dim as long as the axis: kept
            km = kname_re.match(line)
            src = _pt_node(kg, km.group(1)) if km else None
            raise UnsupportedModel(
                f"pymc: cannot split the model along {what}: the axis's length "
                f"{n} is built into the graph, line {i}: `{_short(line.strip())}`"
                + (f" (from {src})" if src else "")
                + "; a part's rows would not fit it: size it from the data "
                "(e.g. shape=X.shape[0], not a number or a constant shape)")
    # kiln's partition on the text (the data files are not read)
    g = _kiln.Graph.parse(_unsourced(layout.text), filename="<pymc>")
    lib = _kiln._lib.lib
    lib.kiln_graph_partition.restype = ctypes.c_int
    lib.kiln_graph_partition.argtypes = [ctypes.c_void_p,
                                         ctypes.POINTER(_kiln_partition),
                                         ctypes.POINTER(_kiln._lib.kiln_err)]
    e = _kiln._lib.kiln_err()
    part = _kiln_partition(axis.encode(), 0, 2)
    if lib.kiln_graph_partition(g._ptr, ctypes.byref(part), ctypes.byref(e)) != 0:
        msg = e.message.decode(errors="replace")
        nodes = re.findall(r"node '(\w+)'", msg)
        src = _pt_node(kg, nodes[-1]) if nodes else None
        if src is None and nodes:
            # a node of the text: name the PyTensor value it was computed for
            ln = re.search(r"line (\d+)", msg)
            if ln and 0 < int(ln.group(1)) <= len(text_lines):
                km = kname_re.match(text_lines[int(ln.group(1)) - 1])
                src = _pt_node(kg, km.group(1)) if km else None
        latent = [p["rv_name"] for p in layout.params if n in p["shape"]]
        raise UnsupportedModel(
            f"pymc: cannot split the model along {what}: {msg}"
            + (f"; that node is {src}" if src else "")
            + (f"; free variable{'s' if len(latent) > 1 else ''} "
               + ", ".join(repr(v) for v in latent)
               + f" ha{'ve' if len(latent) > 1 else 's'} the axis's length: "
               "a value per observation is a parameter, and parameters "
               "are not split" if latent else ""))


class PymcModel(_kiln.Model):
    """A PyMC model compiled by kiln: a ``kiln.Model`` over PyMC's raveled
    unconstrained vector (``log_density_gradient(x)`` equals
    ``model.logp_dlogp_function()`` at x), plus:

    ``text`` (the ``.kg`` model), ``value_names`` (PyMC's value variables,
    in order), ``array(point)`` / ``point(x)`` between PyMC's dicts and the
    vector, ``logp_callback(jacobian=True)`` (kiln's C sampler callback),
    ``to_bridgestan(path)``."""

    def __init__(self, layout, **options):
        if layout.data:       # the split data from layout.data, not files
            super().__init__(_unsourced(layout.text), logp_output="logp",
                             data=layout.data, **options)
        else:
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
        return _write_bridgestan(self.layout, path, kiln_bin)


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


def _unsourced(text):
    """TEXT with the `= npy("...")` sources of its shared values removed."""
    return re.sub(r'(\bshared \w+: [^=\n]*?)\s*= npy\("[^"]*"\)', r"\1", text)


def compile_model(model=None, backend=None, deterministics=True, name=None,
                  mpi_axis=None, **options):
    """A PyMC model (the context's when None) as a ``PymcModel``, a
    ``kiln.Model`` over PyMC's raveled unconstrained vector.  ``backend``
    and the other keywords (policy, tiers, cache, plugin_path) are
    ``kiln.compile``'s.  ``deterministics=False`` leaves the deterministics
    out of the constrained values.  ``mpi_axis``: as ``model_to_kg``'s (the
    serial model of the text that MPI ranks split: the same density)."""
    text, layout = model_to_kg(model, name=name, deterministics=deterministics,
                               mpi_axis=mpi_axis)
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


def _layout_of(model, deterministics, mpi_axis):
    """The layout of a PymcModel, or of a PyMC model converted now."""
    if isinstance(model, PymcModel):
        if mpi_axis is not None and model.layout.axis is None:
            raise UnsupportedModel("pymc: this PymcModel was compiled without "
                                   "mpi_axis: pass the PyMC model")
        return model.layout
    return model_to_kg(model, deterministics=deterministics, mpi_axis=mpi_axis)[1]


def _write_files(layout_or_text, directory, name="model"):
    text = getattr(layout_or_text, "text", layout_or_text)
    data = getattr(layout_or_text, "data", {}) or {}
    os.makedirs(directory, exist_ok=True)
    kg = os.path.join(directory, name + ".kg")
    for k, v in data.items():
        np.save(os.path.join(directory, k + ".npy"), v)
    with open(kg, "w") as f:
        f.write(text)
    return os.path.abspath(kg)


def write_model(model, directory, mpi_axis=None, name="model",
                deterministics=True):
    """Write a PyMC model (or a PymcModel) as ``DIRECTORY/NAME.kg`` and, with
    ``mpi_axis`` (``model_to_kg``'s), its split data as ``DIRECTORY/X.npy``
    (one file per data value, read by the ``.kg``'s ``npy("X.npy")``):
    what ``kiln run DIRECTORY/NAME.kg --mpi`` and ``kiln bridgestan
    DIRECTORY/NAME.kg --mpi`` take (docs/pymc.md, "Under MPI").  Returns
    the ``.kg`` file's absolute path."""
    layout = _layout_of(model, deterministics, mpi_axis)
    return _write_files(layout, directory, name)


def _write_bridgestan(layout_or_text, path, kiln_bin=None):
    exe = kiln_bin or kiln_executable()
    path = os.path.abspath(path)
    axis = getattr(layout_or_text, "axis", None)
    with tempfile.TemporaryDirectory(prefix="kiln_pymc_") as d:
        kg = _write_files(layout_or_text, d)
        cmd = [exe, "bridgestan", kg, "-o", path, "--logp", "logp"]
        if axis is not None:
            cmd += ["--mpi-axis", axis]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
            raise _kiln.KilnError("kiln.pymc: kiln bridgestan failed: "
                                  + (msg[0] if msg else f"exit {r.returncode}"))
    return path


def to_bridgestan(model, path, kiln_bin=None, deterministics=True, mpi_axis=None):
    """Write a BridgeStan library of a PyMC model (or a PymcModel) to path:
    the model's ``.kg`` text, its data as constants, bound into kiln's
    BridgeStan template by ``kiln bridgestan`` (found by
    ``kiln_executable()``, or ``kiln_bin``).  Any BridgeStan 2.x client
    loads it with no data: ``bridgestan.StanModel(path)``.  Returns the
    absolute path.

    With ``mpi_axis`` (``model_to_kg``'s; or a PymcModel compiled with
    one) the library is kiln's MPI library (``kiln bridgestan
    --mpi-axis``; docs/bridgestan.md, "Under MPI"), its data split over
    the ranks of ``mpirun``; the data are bound into the library too."""
    layout = _layout_of(model, deterministics, mpi_axis)
    return _write_bridgestan(layout, path, kiln_bin)
