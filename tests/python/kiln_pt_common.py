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
            f = kiln.compile(g, backend=be, quiet=True)
            used = set(getattr(f, "kernel_backends", None) or [be])
            if used != {be}:
                print(f"# backend {be} falls back to {sorted(used)}: skipped")
                continue
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


def kiln_cli():
    """The kiln CLI of the build whose libkiln is $KILN_LIBRARY, or None."""
    lib = os.environ.get("KILN_LIBRARY", "")
    cli = os.path.join(os.path.dirname(os.path.dirname(lib)), "tools", "kiln") if lib else ""
    return cli if cli and os.access(cli, os.X_OK) else None


def cache_counts(cli, d):
    """(hits, misses) of the kiln disk cache D (`kiln cache stats`)."""
    import subprocess
    out = subprocess.run([cli, "cache", "stats"], env=dict(os.environ, KILN_CACHE_DIR=d),
                         capture_output=True, text=True).stdout
    get = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] in ("hits", "misses"):
            get[parts[0]] = int(parts[1])
    return get.get("hits", 0), get.get("misses", 0)


def caching_backend_or_skip(backends):
    """llvm or tcc (a backend whose kernels kiln's disk cache stores); skips
    the test (pytest) without one or without the kiln CLI."""
    import pytest
    if kiln_cli() is None:
        pytest.skip("no kiln CLI beside $KILN_LIBRARY")
    be = "llvm" if "llvm" in backends else ("tcc" if "tcc" in backends else None)
    if be is None:
        pytest.skip("no caching backend built")
    return be


def run_twice_all_hits(code, cache_dir):
    """Run CODE (python -c) in two fresh processes on the kiln disk cache
    CACHE_DIR: the second compiles nothing (misses unchanged, every kernel
    a hit) and prints what the first printed.  Returns an error text or
    None (caching_backend_or_skip first)."""
    import subprocess
    cli = kiln_cli()
    env = dict(os.environ, KILN_CACHE_DIR=str(cache_dir), KILN_CACHE_MIN_COMPILE_MS="0",
               PYTHONPATH=os.pathsep.join(sys.path))
    r1 = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if r1.returncode != 0:
        return "first process: " + r1.stderr[-2000:]
    h1, m1 = cache_counts(cli, str(cache_dir))
    if m1 == 0:
        return "the first process compiled nothing"
    r2 = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if r2.returncode != 0:
        return "second process: " + r2.stderr[-2000:]
    h2, m2 = cache_counts(cli, str(cache_dir))
    if r1.stdout != r2.stdout:
        return f"outputs differ: {r1.stdout!r} vs {r2.stdout!r}"
    if m2 != m1:
        return f"the second process compiled {m2 - m1} kernel(s)"
    if h2 - h1 < m1:
        return f"the second process had {h2 - h1} hits for {m1} kernels"
    return None
