"""pytest plugin: PyTensor's own numba backend tests run against kiln's KILN mode.

PyTensor's backend tests (tests/link/numba/ of its source tree) compare
every op with PyTensor's Python reference through one helper,
``compare_numba_and_py`` in ``tests/link/numba/test_basic.py``.  This plugin,
loaded with ``-p kiln_conformance`` while pytest runs those modules from the
PyTensor source root, replaces that helper (and the module's ``numba_mode``)
before any test module is collected, so every comparison compiles the graph
with ``mode="KILN"`` and compares it with ``Mode(linker="py",
optimizer=None)``.  Nothing of PyTensor's tests is copied: they are imported
from the shared copy and patched in memory.

Each test is classified (``classify``):

* ``pass``: compiled with KILN, every node ran in kiln, results equal;
* ``fail``: a KILN-compiled graph gave a different result or raised;
* ``lacks``: passed, but part of the graph ran in PyTensor's VM because kiln
  lacks an op (the ops are named, from the linker's KilnFallbackWarning);
* ``lacks-fail``: failed and part of the graph ran in PyTensor's VM;
* ``na``: never compiled anything with KILN (tests of numba internals:
  numba types, numba_funcify, the numba linker or numba's object mode);
* ``skip``/``xfail``: skipped or expected to fail by PyTensor's own marks.

With ``KILN_CONFORMANCE_JSON=path`` each test's record is written there
(one JSON object a line); ``python3 kiln_conformance.py table FILE`` prints
the per-module Markdown table (docs/pytensor-conformance.md).  With
``KILN_TAP_FD=n`` each test is also a TAP line on that descriptor:
``pass``, ``lacks``, ``na`` and skips are ``ok`` (the latter three with a
SKIP directive), ``fail`` and ``lacks-fail`` are ``not ok`` unless the test
is listed in the file named by ``KILN_CONFORMANCE_KNOWN`` (``nodeid  reason``
lines), which makes it ``not ok # TODO reason``; a reason starting
``numba-specific`` makes the test ``na`` instead (it expects numba's own
behaviour, e.g. numba's NotImplementedError).
"""

import copy
import inspect
import json
import os
import re
import sys
import warnings

import pytest

# per-test record of what the KILN linker did
_cur = {"compiles": 0, "groups": 0, "lacks": {}, "fallback": [], "cmp_ok": 0,
        "cmp_fail": 0}
_records = []
_known = {}
_tap = {"fd": None, "n": 0}
_out = {"file": None}


def _reset():
    _cur["compiles"] = 0
    _cur["groups"] = 0
    _cur["lacks"] = {}
    _cur["fallback"] = []
    _cur["cmp_ok"] = 0
    _cur["cmp_fail"] = 0


def _op_name(op):
    scalar = getattr(op, "scalar_op", None)
    if scalar is not None:
        return f"{type(op).__name__}({type(scalar).__name__})"
    core = getattr(op, "core_op", None)
    if core is not None:
        return f"{type(op).__name__}({type(core).__name__})"
    return type(op).__name__


def _instrument_linker():
    """Wrap KilnLinker._kilnify to record, per test, how many graphs were
    compiled with KILN, how many kiln functions they became and which ops
    stayed in PyTensor's VM (the linker's KilnFallbackWarning)."""
    import kiln.pytensor as kp

    orig = kp.KilnLinker._kilnify
    if getattr(orig, "_kiln_conformance", False):
        return

    def _kilnify(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", kp.KilnFallbackWarning)
            orig(self)
        _cur["compiles"] += 1
        fallback = [w for w in caught if issubclass(w.category, kp.KilnFallbackWarning)]
        for w in caught:
            if w not in fallback:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        kilnops = [n for n in self.fgraph.apply_nodes if isinstance(n.op, kp.KilnOp)]
        _cur["groups"] += len(kilnops)
        if fallback:
            _cur["fallback"].extend(str(w.message) for w in fallback)
            for n in self.fgraph.apply_nodes:
                if not isinstance(n.op, kp.KilnOp):
                    name = _op_name(n.op)
                    _cur["lacks"][name] = _cur["lacks"].get(name, 0) + 1

    _kilnify._kiln_conformance = True
    kp.KilnLinker._kilnify = _kilnify


def _patch_helper():
    """Replace compare_numba_and_py and numba_mode in PyTensor's
    tests/link/numba/test_basic.py with KILN versions."""
    import numpy as np

    import kiln.pytensor as kp
    from pytensor.compile.function import function
    from pytensor.compile.mode import Mode
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph.fg import FunctionGraph

    import tests.link.numba.test_basic as tb

    ref_mode = Mode(linker="py", optimizer=None)

    def compare_kiln_and_py(fgraph, inputs, assert_fn=None, *, numba_mode=None,
                            py_mode=None, updates=None, inplace=False,
                            eval_obj_mode=True):
        """compare_numba_and_py's contract with KILN in place of NUMBA: the
        graph compiled with mode KILN (or the mode the test passes when its
        linker is kiln's, e.g. KILN.including(...)) and with the Python
        reference mode, both called on the inputs, results compared with
        assert_fn (default: allclose rtol 1e-4, and equal shape and dtype)."""
        if assert_fn is None:
            def assert_fn(x, y):
                np.testing.assert_allclose(x, y, rtol=1e-4)
                x, y = np.asarray(x), np.asarray(y)
                assert x.shape == y.shape, f"shape {x.shape} != reference {y.shape}"
                assert x.dtype == y.dtype, f"dtype {x.dtype} != reference {y.dtype}"

        if isinstance(fgraph, FunctionGraph):
            fn_inputs, fn_outputs = fgraph.inputs, fgraph.outputs
        else:
            fn_inputs, fn_outputs = fgraph
        fn_inputs = [i for i in fn_inputs if not isinstance(i, SharedVariable)]
        mode = numba_mode
        if mode is None or not isinstance(getattr(mode, "linker", None), kp.KilnLinker):
            mode = kp.KILN

        def args():
            # fresh copies for every call: an inplace op of the reference
            # must not change the inputs (or the result) the KILN run sees
            return [copy.deepcopy(i) for i in inputs]

        py_fn = function(fn_inputs, fn_outputs, mode=ref_mode, accept_inplace=True,
                         updates=updates)
        py_res = [copy.deepcopy(r) for r in py_fn(*args())]
        try:
            kiln_fn = function(fn_inputs, fn_outputs, mode=mode, accept_inplace=True,
                               updates=updates)
            kiln_res = kiln_fn(*args())
            if len(fn_outputs) > 1:
                assert len(kiln_res) == len(py_res)
                for k, p in zip(kiln_res, py_res):
                    assert_fn(k, p)
            else:
                assert_fn(kiln_res[0], py_res[0])
        except BaseException:
            _cur["cmp_fail"] += 1
            raise
        _cur["cmp_ok"] += 1
        return kiln_fn, kiln_res

    tb.compare_numba_and_py = compare_kiln_and_py
    tb.numba_mode = kp.KILN
    tb.py_mode = ref_mode


def pytest_addoption(parser):
    parser.addoption("--kiln-conformance-json", default=os.environ.get(
        "KILN_CONFORMANCE_JSON"), help="write one JSON record a test here")


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    # after PyTensor's own conftest has set its PYTENSOR_FLAGS
    import tests.link.numba.test_basic  # noqa: F401  (numba present: else collection skips)
    _instrument_linker()
    _patch_helper()
    known = os.environ.get("KILN_CONFORMANCE_KNOWN")
    if known:
        with open(known) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    nodeid, _, why = line.partition(" ")
                    _known[nodeid] = why.strip() or "known kiln failure"
    path = session.config.getoption("--kiln-conformance-json")
    if path:
        # one record a line as each test ends: a run cut short keeps its results
        _out["file"] = open(path, "w")
    fd = os.environ.get("KILN_TAP_FD")
    if fd:
        _tap["fd"] = int(fd)


def _tap_line(text):
    if _tap["fd"] is not None:
        os.write(_tap["fd"], (text + "\n").encode("utf-8", "replace"))


# a test body naming these and not the compare helper tests numba itself
_NUMBA_ONLY = re.compile(r"numba_funcify|numba_njit|numba_basic|numba_mode|\"NUMBA\"|"
                         r"NumbaLinker|eval_python_only|numba\.|get_numba_type")


def pytest_collection_modifyitems(config, items):
    """Tests whose body uses numba's own machinery and never the compare
    helper are not run (numba compiles take minutes): class ``na``."""
    for item in items:
        fn = getattr(item, "function", None)
        try:
            src = inspect.getsource(fn) if fn is not None else ""
        except (OSError, TypeError):
            continue
        if "compare_numba_and_py" not in src and _NUMBA_ONLY.search(src):
            item.add_marker(pytest.mark.skip(
                reason="numba-specific: the test uses numba's own machinery, "
                       "not the compare helper"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _reset()
    yield


def classify(outcome, compiles, lacks, cmp_ok=0, cmp_fail=0):
    """The class of one test from pytest's outcome and what KILN did."""
    if outcome in ("skip", "xfail"):
        return outcome
    if outcome == "na":
        return "na"
    if compiles == 0:
        return "na"
    if outcome == "fail" and cmp_ok and not cmp_fail:
        return "na"  # results equal; a later check of numba's own behaviour failed
    if lacks:
        return "lacks" if outcome == "pass" else "lacks-fail"
    return outcome


def _record(rec):
    _records.append(rec)
    if _out["file"] is not None:
        _out["file"].write(json.dumps(rec) + "\n")
        _out["file"].flush()


def pytest_runtest_logreport(report):
    if not (report.when == "call" or (report.when == "setup" and not report.passed)
            or (report.when == "teardown" and report.failed)):
        return
    if report.skipped:
        outcome = "xfail" if hasattr(report, "wasxfail") else "skip"
        if outcome == "skip" and "numba-specific" in str(report.longrepr):
            outcome = "na"
    elif report.passed:
        outcome = "fail" if hasattr(report, "wasxfail") else "pass"  # xpass is strict
    else:
        outcome = "fail"
    cls = classify(outcome, _cur["compiles"], _cur["lacks"], _cur["cmp_ok"],
                   _cur["cmp_fail"])
    if cls in ("fail", "lacks-fail") and _known.get(report.nodeid, "").startswith("numba-specific"):
        cls = "na"  # expects numba's own behaviour (known-failures.txt says which)
    detail = ""
    if outcome == "fail":
        detail = report.longreprtext.strip().splitlines()[-1] if report.longreprtext else ""
        errs = [ln[2:].strip() for ln in (report.longreprtext or "").splitlines()
                if ln.startswith("E ")]
        if errs:
            detail = errs[0][:300] + " (" + detail + ")"
        if cls == "na":
            detail = "results equal the reference; the test then checks numba's own " \
                     "behaviour: " + detail
    elif outcome in ("skip", "na"):
        detail = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if detail.startswith("Skipped: "):
            detail = detail[len("Skipped: "):]
    elif outcome == "xfail":
        detail = report.wasxfail
    rec = {"nodeid": report.nodeid, "module": report.nodeid.split("::")[0].rsplit("/", 1)[-1],
           "outcome": outcome, "class": cls, "compiles": _cur["compiles"],
           "kiln_functions": _cur["groups"], "lacks": dict(_cur["lacks"]),
           "compared": _cur["cmp_ok"], "compare_failed": _cur["cmp_fail"],
           "fallback": list(dict.fromkeys(_cur["fallback"])), "detail": detail}
    _record(rec)
    name = report.nodeid.replace("#", "\\#")
    _tap["n"] += 1
    n = _tap["n"]
    if cls == "pass":
        _tap_line(f"ok {n} - {name}")
    elif cls in ("fail", "lacks-fail"):
        if report.nodeid in _known:
            _tap_line(f"not ok {n} - {name} # TODO {_known[report.nodeid]}")
        else:
            _tap_line(f"not ok {n} - {name}")
            for d in (report.longreprtext or "").splitlines()[-40:]:
                _tap_line("# " + d)
    elif cls == "lacks":
        _tap_line(f"ok {n} - {name} # SKIP kiln lacks {', '.join(sorted(rec['lacks']))}")
    elif cls == "na":
        why = _known.get(report.nodeid) or (detail if outcome in ("na", "fail") else
                                            "numba-specific (nothing compiled with KILN)")
        _tap_line(f"ok {n} - {name} # SKIP {why}")
    elif cls == "xfail":
        _tap_line(f"ok {n} - {name} # SKIP xfail in PyTensor: {detail}")
    else:
        _tap_line(f"ok {n} - {name} # SKIP {detail}")


def pytest_collectreport(report):
    if report.failed:
        _record({"nodeid": report.nodeid, "module": report.nodeid.rsplit("/", 1)[-1],
                         "outcome": "fail", "class": "fail", "compiles": 0,
                         "kiln_functions": 0, "lacks": {}, "fallback": [],
                         "detail": "collection failed: " + (report.longreprtext or "").strip()
                         .splitlines()[-1] if report.longreprtext else "collection failed"})
        _tap["n"] += 1
        _tap_line(f"not ok {_tap['n']} - collect {report.nodeid}")


def pytest_sessionfinish(session, exitstatus):
    if _out["file"] is not None:
        _out["file"].close()
        _out["file"] = None
    if _tap["fd"] is not None:
        _tap_line(f"1..{_tap['n']}" if _tap["n"] else "1..0 # SKIP no tests collected")


# --------------------------------------------------------------------------
# the table

CLASSES = [("pass", "passed"), ("fail", "failed"), ("lacks", "kiln lacks op"),
           ("lacks-fail", "failed, kiln lacks op"), ("na", "numba-specific"),
           ("skip", "skipped"), ("xfail", "xfail")]


def table(records):
    """Markdown: one row a module, a column a class, and the ops kiln lacks."""
    mods = {}
    for r in records:
        m = mods.setdefault(r["module"], {"counts": {}, "lacks": {}})
        m["counts"][r["class"]] = m["counts"].get(r["class"], 0) + 1
        if r["class"] in ("lacks", "lacks-fail"):
            for op in r["lacks"]:
                m["lacks"][op] = m["lacks"].get(op, 0) + 1
    head = "| module | tests | " + " | ".join(t for _, t in CLASSES) + " | ops run in PyTensor's VM (tests) |"
    out = [head, "|" + "---|" * (len(CLASSES) + 3)]
    tot = {}
    for mod in sorted(mods):
        m = mods[mod]
        n = sum(m["counts"].values())
        for k, v in m["counts"].items():
            tot[k] = tot.get(k, 0) + v
        ops = ", ".join(f"{op} ({c})" for op, c in sorted(m["lacks"].items(),
                                                          key=lambda x: (-x[1], x[0])))
        out.append(f"| {mod} | {n} | " + " | ".join(str(m["counts"].get(k, 0))
                                                    for k, _ in CLASSES) + f" | {ops} |")
    out.append(f"| **total** | {sum(tot.values())} | "
               + " | ".join(str(tot.get(k, 0)) for k, _ in CLASSES) + " | |")
    return "\n".join(out)


def _load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "table":
        print(table(_load(sys.argv[2])))
    elif len(sys.argv) == 3 and sys.argv[1] == "failures":
        for r in _load(sys.argv[2]):
            if r["class"] in ("fail", "lacks-fail"):
                lk = f" [kiln lacks {', '.join(sorted(r['lacks']))}]" if r["lacks"] else ""
                print(f"{r['nodeid']}{lk}: {r['detail']}")
    else:
        sys.exit("usage: kiln_conformance.py table|failures RESULTS.jsonl")
