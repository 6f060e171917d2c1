#!/usr/bin/python3
"""The Python client's types: ``mypy --strict`` (Debian's mypy, with
clients/python/pyproject.toml's [tool.mypy] section: redis-py is untyped)
passes on the package and on every ```python block of docs/python.md
(extracted here, so the examples and the test cannot drift), and fails on
planted wrong uses:

- a token from ``lock_lease`` (``Optional[int]``: None when the lock stayed
  busy) passed to ``Store.fset`` unchecked;
- a lock's token used as a str;
- a fenced.aio call that is not awaited;
- an unknown keyword to ``Client.lock``.

No server is started: mypy only reads the code.
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from fencetest import Tap, skip  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PKG = os.path.join(ROOT, "clients", "python")
DOC = os.path.join(ROOT, "docs", "python.md")

PLANTED = {
    "optional token unchecked": ("""
import fenced
c = fenced.Client("127.0.0.1:7700")
s = fenced.Store("127.0.0.1:7710")
lease = c.lease_grant(1000)
tok = c.lock_lease("orders", lease)
s.fset("orders", tok, "k", "v")
""", "arg-type"),
    "token used as a str": ("""
import fenced
c = fenced.Client("127.0.0.1:7700")
with c.lock("orders") as lock:
    name: str = lock.token
""", "assignment"),
    "aio call not awaited": ("""
import fenced.aio
async def f() -> None:
    s = fenced.aio.Store("127.0.0.1:7710")
    s.fset("orders", 1, "k", "v")
""", "unused-coroutine"),
    "unknown keyword": ("""
import fenced
fenced.Client().lock("orders", ttl=1000)
""", "call-arg"),
}


def mypy(tmp, *targets):
    """Run mypy --strict with the package's config; (status, output)."""
    env = dict(os.environ, MYPYPATH=os.path.join(PKG, "src"))
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file",
                        os.path.join(PKG, "pyproject.toml"), "--cache-dir",
                        os.path.join(tmp, "cache"), "--no-error-summary"] + list(targets),
                       cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def main():
    r = subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True, text=True)
    if r.returncode != 0:
        skip("mypy is not installed (Debian package mypy: scripts/deps.sh test)")
    t = Tap()
    with open(DOC) as f:
        blocks = re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)
    t.check(len(blocks) >= 2, "docs/python.md has python examples (%d)" % len(blocks))
    with tempfile.TemporaryDirectory(prefix="py-types.") as tmp:
        rc, out = mypy(tmp, "-p", "fenced")
        t.check(rc == 0, "mypy --strict passes on the package (fenced, fenced.aio)", out)
        files = []
        for i, b in enumerate(blocks):
            p = os.path.join(tmp, "doc_example_%d.py" % i)
            with open(p, "w") as f:
                f.write(b)
            files.append(p)
        rc, out = mypy(tmp, *files)
        t.check(rc == 0, "mypy --strict passes on docs/python.md's %d examples" % len(files), out)
        py_typed = os.path.join(PKG, "src", "fenced", "py.typed")
        t.check(os.path.exists(py_typed), "the package ships py.typed")
        with open(os.path.join(PKG, "pyproject.toml")) as f:
            t.check('fenced = ["py.typed"]' in f.read(), "and installs it (package-data)")
        for what, (code, want) in PLANTED.items():
            p = os.path.join(tmp, "planted_%s.py" % re.sub(r"\W", "_", what))
            with open(p, "w") as f:
                f.write(code)
            rc, out = mypy(tmp, p)
            t.check(rc != 0 and ("[%s]" % want) in out,
                    "mypy --strict fails on a planted wrong use: %s [%s]" % (what, want), out)
    t.finish()


if __name__ == "__main__":
    main()
