"""pytest set-up for kiln's Python tests (tests/python).

With $KILN_TAP_FD set (tests/test_python.sh), every test's result is also
written to that file descriptor as a TAP line, so `make check` reads them
with automake's TAP driver: "ok N - node id", "ok N - node id # SKIP
reason", "not ok N - node id" followed by the failure as "# " lines, and
the plan "1..N" at the end.  Run by hand (no $KILN_TAP_FD) this is plain
pytest.
"""

import os

_fd = os.environ.get("KILN_TAP_FD")
_n = [0]


def _emit(text):
    os.write(int(_fd), (text + "\n").encode("utf-8", "replace"))


def _line(ok, name, directive=None, detail=None):
    _n[0] += 1
    s = "%s %d - %s" % ("ok" if ok else "not ok", _n[0],
                        name.replace("#", "\\#"))
    if directive:
        s += " # " + directive
    _emit(s)
    if detail:
        for d in str(detail).splitlines():
            _emit("# " + d)


if _fd:
    def pytest_collectreport(report):
        if report.failed:
            _line(False, "collect " + report.nodeid, None,
                  report.longreprtext)

    def pytest_runtest_logreport(report):
        if report.when == "call" or (report.when == "setup"
                                     and not report.passed) or \
                (report.when == "teardown" and report.failed):
            name = report.nodeid
            if report.when == "teardown":
                name += " (teardown)"
            if report.skipped:
                if hasattr(report, "wasxfail"):
                    _line(False, name, "TODO xfail " + report.wasxfail)
                else:
                    reason = report.longrepr[2] if isinstance(
                        report.longrepr, tuple) else str(report.longrepr)
                    if reason.startswith("Skipped: "):
                        reason = reason[len("Skipped: "):]
                    _line(True, name, "SKIP " + reason)
            elif report.passed:
                if hasattr(report, "wasxfail"):
                    _line(True, name, "TODO xpassed")
                else:
                    _line(True, name)
            else:
                _line(False, name, None, report.longreprtext)

    def pytest_sessionfinish(session, exitstatus):
        if _n[0] == 0:
            _emit("1..0 # SKIP no tests collected")
        else:
            _emit("1..%d" % _n[0])
