"""Import each of a list of modules in a fresh interpreter, cheaply: one parent imports
only third-party libraries (``preload``, never a module of ours), then forks a child per
module, so what each child proves is the order of our own imports, which the fork does not
give away. With ``folders``, the interpreter sees the standard library and those folders
only (``python -I -S``, each added as a site: an image's install, say); without, this
environment (PYTHONPATH honoured).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

SCRIPT = """
import importlib, json, os, site, sys
folders = json.loads(sys.argv[1])
if folders:
    sys.path[:] = [p for p in sys.path if "site-packages" not in p and "dist-packages" not in p]
    for folder in folders:
        site.addsitedir(folder)
for lib in json.loads(sys.argv[2]):  # third-party only; those not installed are skipped
    try:
        importlib.import_module(lib)
    except ImportError:
        pass
ours = [m for m in sys.modules if m.split(".")[0].startswith("disagg_")]
assert not ours, ours
results = {}
for module in json.loads(sys.argv[3]):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        code, message = 0, b""
        try:
            importlib.import_module(module)
        except BaseException as e:
            code, message = 1, f"{type(e).__name__}: {e}".encode()
        os.write(write, message)
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    results[module] = "" if os.waitstatus_to_exitcode(status) == 0 else (message or str(status))
print(json.dumps(results))
"""


def import_each(
    modules: Sequence[str], preload: Sequence[str] = (), folders: Sequence[Path] = ()
) -> dict[str, str]:
    """module → '' when it imports in a fresh interpreter, else why not."""
    flags = ["-I", "-S"] if folders else []
    argv = [sys.executable, *flags, "-c", SCRIPT, json.dumps([str(f) for f in folders]),
            json.dumps(list(preload)), json.dumps(list(modules))]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd="/")
    assert done.returncode == 0, done.stderr
    found: dict[str, str] = json.loads(done.stdout.splitlines()[-1])
    return found
