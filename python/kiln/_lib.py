"""ctypes declarations of libkiln's public C API (include/kiln/*.h).

Only what the package uses is declared.  The library is found, in order:

1. ``$KILN_LIBRARY``: the path of libkiln.so (the test harness sets it);
2. the libkiln installed beside this package (``_config.LIBDIR``, written
   when the package is installed by ``make install``);
3. a build tree: ``$KILN_BUILDDIR/.libs`` (set by ``make check``);
4. the dynamic linker's search path (``libkiln.so.0``).

Only the caller (these variables) or the installation names where code is
loaded from: nothing is looked for beside the package itself.
"""

import ctypes
import os

c_int = ctypes.c_int
c_int32 = ctypes.c_int32
c_int64 = ctypes.c_int64
c_uint64 = ctypes.c_uint64
c_size_t = ctypes.c_size_t
c_double = ctypes.c_double
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
P = ctypes.POINTER

MAX_RANK = 8

# kiln_dtype
F64, F32, I64, I32, BOOL = 0, 1, 2, 3, 4

# kiln_code
OK = 0
ERR_PARSE = 1
ERR_TYPE = 2
ERR_SHAPE = 3
ERR_NAME = 4
ERR_IO = 5
ERR_NOMEM = 6
ERR_BACKEND = 7
ERR_ARG = 8
ERR_RUNTIME = 9
ERR_POLICY = 10
# The run-time check op (issue 25, engineer "opscheck"): the code that
# follows KILN_ERR_POLICY, message "check failed: MSG (NODE)".
ERR_CHECK = 11
CHECK_PREFIX = "check failed"

# kiln_attr_kind
ATTR_INT, ATTR_FLOAT, ATTR_BOOL, ATTR_INTS, ATTR_DTYPE, ATTR_STRING = range(6)
# kiln_literal_kind
LIT_INT, LIT_FLOAT, LIT_BOOL = 0, 1, 2
# kiln_index_kind
INDEX_INT, INDEX_SLICE = 0, 1
# kiln_output_kind
OUTPUT_PLAIN, OUTPUT_TP, OUTPUT_GQ = 0, 1, 2
# kiln_tiers_mode
TIERS_POLICY, TIERS_OFF, TIERS_BASELINE = 0, 1, 2
# kiln_cache_mode
CACHE_DEFAULT, CACHE_ON, CACHE_OFF, CACHE_READ_ONLY, CACHE_RECACHE = range(5)
# grad flags
GRAD_DISCONNECTED_ZERO = 1


class kiln_err(ctypes.Structure):
    _fields_ = [("code", c_int), ("message", ctypes.c_char * 1024)]


class kiln_tensor(ctypes.Structure):
    _fields_ = [("dtype", c_int), ("rank", c_int),
                ("shape", c_int64 * MAX_RANK), ("data", c_void_p)]


class kiln_options(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t),
                ("backend", c_char_p),
                ("plugin_path", c_char_p),
                ("diag", c_void_p),
                ("quiet", c_int),
                ("jobs", c_int),
                ("opt_level", c_int),
                ("fast_math", c_int),
                ("cache_mode", c_int),
                ("cache_dir", c_char_p),
                ("policy", c_void_p),
                ("policy_file", c_char_p),
                ("model_path", c_char_p),
                ("passes", c_char_p),
                ("generic_target", c_int),
                ("tiers", c_int),
                ("tier_threads", c_int)]


class kiln_read_options(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("max_size", c_uint64),
                ("allow_special", c_int)]


class kiln_attr_old(ctypes.Structure):
    """kiln_attr before string attributes (issue 25)."""
    _fields_ = [("key", c_char_p), ("kind", c_int), ("i", c_int64),
                ("f", c_double), ("n", c_int), ("ints", P(c_int64))]


class kiln_attr_new(ctypes.Structure):
    """kiln_attr with the string field `s` (issue 25, the check op)."""
    _fields_ = kiln_attr_old._fields_ + [("s", c_char_p)]


class kiln_index(ctypes.Structure):
    _fields_ = [("kind", c_int), ("start", c_int64), ("stop", c_int64),
                ("step", c_int64), ("has_start", c_int), ("has_stop", c_int),
                ("has_step", c_int)]


LOGP_FN = ctypes.CFUNCTYPE(c_int, c_uint64, P(c_double), P(c_double),
                           P(c_double), c_void_p)


def _candidates():
    env = os.environ.get("KILN_LIBRARY")
    if env:
        return [env], True
    out = []
    try:
        from . import _config
        out.append(os.path.join(_config.LIBDIR, "libkiln.so.0"))
        out.append(os.path.join(_config.LIBDIR, "libkiln.so"))
    except ImportError:
        pass
    bd = os.environ.get("KILN_BUILDDIR")
    if bd:
        out.append(os.path.join(bd, ".libs", "libkiln.so"))
    return out, False


def _load():
    paths, explicit = _candidates()
    tried = []
    for p in paths:
        if explicit or os.path.exists(p):
            try:
                return ctypes.CDLL(p)
            except OSError as e:
                tried.append("%s (%s)" % (p, e))
                if explicit:
                    break
        else:
            tried.append(p + " (absent)")
    if not explicit:
        try:
            return ctypes.CDLL("libkiln.so.0")
        except OSError as e:
            tried.append("libkiln.so.0 (%s)" % e)
    raise ImportError("kiln: cannot load libkiln: tried " + "; ".join(tried)
                      + "; set KILN_LIBRARY to the path of libkiln.so")


lib = _load()


def _decl(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


E = P(kiln_err)
G = c_void_p    # kiln_graph *
F = c_void_p    # kiln_function *
C = c_void_p    # kiln_context *
M = c_void_p    # kiln_model *

_decl("kiln_dtype_name", c_char_p, c_int)
_decl("kiln_graph_new", G, c_char_p, E)
_decl("kiln_graph_free", None, G)
_decl("kiln_graph_name", c_char_p, G)
_decl("kiln_graph_symbol", c_int64, G, c_char_p)
_decl("kiln_graph_input", c_int32, G, c_char_p, c_int, c_int, P(c_int64), E)
_decl("kiln_graph_shared", c_int32, G, c_char_p, c_int, c_int, P(c_int64),
      P(kiln_tensor), E)
_decl("kiln_graph_shared_ref", c_int32, G, c_char_p, c_int, c_int,
      P(c_int64), P(kiln_tensor), E)
_decl("kiln_graph_bind_safetensors", c_int, G, c_char_p, E)
_decl("kiln_graph_const", c_int32, G, c_char_p, c_int, c_int, P(c_int64),
      c_void_p, E)
_decl("kiln_graph_literal", c_int32, G, c_double, c_int, E)
# kiln_graph_op's attrs argument is an array of kiln_attr_old or _new: the
# caller passes a pointer (c_void_p) to whichever the library takes.
_decl("kiln_graph_op", c_int32, G, c_char_p, c_int, P(c_int32), c_void_p,
      c_int, E)
_decl("kiln_graph_subtensor", c_int32, G, c_int32, c_int, P(kiln_index), E)
_decl("kiln_graph_set_subtensor", c_int32, G, c_int32, c_int, P(kiln_index),
      c_int32, c_int, E)
_decl("kiln_graph_advanced_set_subtensor", c_int32, G, c_int32, c_int32,
      c_int, c_int32, c_int, E)
_decl("kiln_graph_grad", c_int, G, c_int32, c_int, P(c_int32), ctypes.c_uint,
      P(c_int32), E)
_decl("kiln_graph_set_name", c_int, G, c_int32, c_char_p, E)
_decl("kiln_graph_output", c_int, G, c_char_p, c_int32, E)
_decl("kiln_graph_param", c_int32, G, c_char_p, c_int, c_int, P(c_int64),
      c_double, c_int32, c_double, c_int32, E)
_decl("kiln_graph_n_params", c_int, G)
_decl("kiln_graph_param_transform", c_int32, G, c_char_p, c_int, c_int,
      P(c_int64), c_int, E)
_decl("kiln_param_transform_lookup", c_int, c_char_p, c_size_t)
_decl("kiln_graph_param_info", c_int, G, c_int, P(c_char_p), P(c_int32),
      P(c_int32), P(c_int32))
_decl("kiln_graph_set_output_kind", c_int, G, c_char_p, c_int, E)
_decl("kiln_graph_output_kind", c_int, G, c_char_p)
_decl("kiln_graph_lookup", c_int32, G, c_char_p)
_decl("kiln_graph_n_nodes", c_int, G)
_decl("kiln_parse_string", G, c_char_p, c_char_p, c_char_p, E)
_decl("kiln_parse_file", G, c_char_p, E)
# kiln_graph_print returns malloc'd text: keep the pointer to free() it
_decl("kiln_graph_print", c_void_p, G, E)

_decl("kiln_compile", F, G, P(kiln_options), E)
_decl("kiln_function_free", None, F)
_decl("kiln_context_new", C, F, E)
_decl("kiln_context_call", c_int, C, P(kiln_tensor), P(kiln_tensor), E)
_decl("kiln_context_free", None, C)
_decl("kiln_function_call", c_int, F, P(kiln_tensor), P(kiln_tensor), E)
_decl("kiln_function_tier_wait", c_int, F, c_double)
_decl("kiln_function_n_inputs", c_int, F)
_decl("kiln_function_n_shared", c_int, F)
_decl("kiln_function_n_outputs", c_int, F)
_decl("kiln_function_input_name", c_char_p, F, c_int)
_decl("kiln_function_shared_name", c_char_p, F, c_int)
_decl("kiln_function_output_name", c_char_p, F, c_int)
_decl("kiln_function_input_type", c_int, F, c_int, P(c_int), P(c_int),
      P(c_int64), P(c_char_p))
_decl("kiln_function_bind_shared", c_int, F, c_char_p, P(kiln_tensor), E)
_decl("kiln_function_bind_shared_ref", c_int, F, c_char_p, P(kiln_tensor),
      E)
_decl("kiln_function_n_kernels", c_int, F)
_decl("kiln_function_kernel_backend", c_char_p, F, c_int)
_decl("kiln_function_logp_callback", c_void_p, F, c_char_p, P(c_uint64),
      P(c_void_p), E)
_decl("kiln_logp_callback_message", c_char_p, c_void_p)

_decl("kiln_policy_load_string", c_void_p, c_char_p, c_size_t, c_char_p, E)
_decl("kiln_policy_free", None, c_void_p)

_decl("kiln_model_new", M, G, c_char_p, c_char_p, P(kiln_options),
      P(kiln_read_options), E)
_decl("kiln_model_free", None, M)
_decl("kiln_model_name", c_char_p, M)
_decl("kiln_model_info", c_char_p, M)
_decl("kiln_model_n_unc", c_int, M)
_decl("kiln_model_n_params", c_int, M, c_int, c_int)
_decl("kiln_model_param_names", c_char_p, M, c_int, c_int)
_decl("kiln_model_param_unc_names", c_char_p, M)
_decl("kiln_model_constrain", c_int, M, c_int, c_int, P(c_double),
      P(c_double), E)
_decl("kiln_model_unconstrain", c_int, M, P(c_double), P(c_double), E)
_decl("kiln_model_unconstrain_json", c_int, M, c_char_p, P(c_double), E)
_decl("kiln_model_log_density", c_int, M, c_int, P(c_double), P(c_double),
      P(c_double), E)
_decl("kiln_model_log_density_hessian", c_int, M, c_int, P(c_double),
      P(c_double), P(c_double), P(c_double), E)
_decl("kiln_model_log_density_hvp", c_int, M, c_int, P(c_double),
      P(c_double), P(c_double), P(c_double), E)
_decl("kiln_model_tier_wait", c_int, M, c_double)
_decl("kiln_model_tier_count", None, M, P(c_int), P(c_int))

libc = ctypes.CDLL(None)
libc.free.argtypes = [c_void_p]
libc.free.restype = None

_string_attrs = None


def string_attrs():
    """Whether this libkiln's kiln_attr has the string field `s` (and the
    check op with its msg= attribute): probed once by parsing a check."""
    global _string_attrs
    if _string_attrs is None:
        e = kiln_err()
        g = lib.kiln_parse_string(
            b'kiln 1\ngraph probe\n  input x: f64\n'
            b'  output y = check(x, gt(x, 0.0), msg="probe")\nend\n',
            b"<probe>", None, ctypes.byref(e))
        _string_attrs = bool(g)
        if g:
            lib.kiln_graph_free(g)
    return _string_attrs


def kiln_attr():
    return kiln_attr_new if string_attrs() else kiln_attr_old
