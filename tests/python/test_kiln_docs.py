"""docs/python.md's example runs and prints what its comments say."""

import contextlib
import io
import os
import re

from kiln_testutil import SRC


def test_docs_python_example():
    with open(os.path.join(SRC, "docs", "python.md")) as f:
        text = f.read()
    code = re.search(r"## Example.*?```python\n(.*?)```", text, re.S).group(1)
    old = os.getcwd()
    buf = io.StringIO()
    try:
        os.chdir(SRC)
        with contextlib.redirect_stdout(buf):
            exec(compile(code, "docs/python.md", "exec"), {})
    finally:
        os.chdir(old)
    printed = buf.getvalue().splitlines()
    # every "print(...)  # expected" line's comment is what it printed
    expected = [m.group(1).strip() for line in code.splitlines()
                for m in [re.match(r"\s*print\(.*\)\s+#\s(.*)$", line)] if m]
    assert printed == expected
