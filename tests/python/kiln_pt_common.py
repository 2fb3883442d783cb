"""Shared set-up of the kiln.pytensor tests (not a test module): find the
shared PyTensor/PyMC, choose backends."""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.dirname(os.path.dirname(HERE))


def shared_dir():
    """The shared folder (../shared beside the source tree, or
    $KILN_SHARED_PYTHON/..)."""
    sp = os.environ.get("KILN_SHARED_PYTHON")
    if sp:
        return os.path.dirname(os.path.abspath(sp))
    return os.path.join(os.path.dirname(SRCDIR), "shared")


def skip_all(why):
    """Skip the whole test module (pytest) or the script (TAP)."""
    if "pytest" in sys.modules:
        import pytest
        pytest.skip(why, allow_module_level=True)
    print(f"1..0 # SKIP {why}")
    sys.exit(0)


def setup_or_skip():
    """Put the shared PyTensor/PyMC and kiln on sys.path, or SKIP."""
    sp = os.environ.get("KILN_SHARED_PYTHON") or os.path.join(shared_dir(), "python")
    pkg = os.path.join(sp, "pytensor-2.27.1")
    if not os.path.isdir(pkg):
        skip_all(f"no shared PyTensor at {sp} (set KILN_SHARED_PYTHON)")
    for p in (os.path.join(sp, "site"), pkg):
        if p not in sys.path:
            sys.path.insert(0, p)
    # PyTensor's compile cache out of $HOME, and no C compiler: nothing
    # kiln runs may need PyTensor's C backend
    if "PYTENSOR_FLAGS" not in os.environ:
        d = tempfile.mkdtemp(prefix="kiln-pt-")
        os.environ["PYTENSOR_FLAGS"] = f"base_compiledir={d},cxx="
    try:
        import numpy  # noqa: F401
    except ImportError:
        skip_all("no numpy")
    try:
        import kiln  # noqa: F401
    except ImportError:
        sys.path.append(os.path.join(SRCDIR, "python"))
    try:
        import pytensor  # noqa: F401
    except Exception as e:  # noqa: BLE001
        skip_all(f"PyTensor does not import: {e}")


def backends_available():
    """Backends to test: $KILN_TEST_BACKENDS (default interp tcc llvm) that
    compile a tiny graph here."""
    import kiln
    out = []
    for be in os.environ.get("KILN_TEST_BACKENDS", "interp tcc llvm").split():
        try:
            g = kiln.Graph.parse("kiln 1\ngraph p\n  input x: f64\n  output y = exp(x)\nend\n")
            kiln.compile(g, backend=be)
            out.append(be)
        except Exception:  # noqa: BLE001
            print(f"# backend {be} not available: skipped")
    return out


def rebind(function, backend):
    """Point every kiln function inside a compiled PyTensor function (or a
    PyMC PointFunc) at BACKEND, reusing its .kg text: each backend is tested
    on exactly the graph the first compile produced, without running
    PyTensor's rewrites again.  Returns the number of kiln functions."""
    import kiln.pytensor as kp
    f = getattr(function, "f", function)
    n = 0
    for node in f.maker.fgraph.apply_nodes:
        if isinstance(node.op, kp.KilnOp):
            node.op.fn = kp._compile(node.op.kg.text, {"backend": backend})
            n += 1
    return n
