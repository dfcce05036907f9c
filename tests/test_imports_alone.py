"""Every module of both packages imports alone: in a fresh interpreter that has imported
none of the project's modules, importing the module succeeds. An import that works only
because another module of ours was imported first is a cycle waiting to bite.

One fresh interpreter (not this test process, which has imported much of the project)
preloads only the third-party libraries the project uses (torch, kopf, pydantic, ...;
never a module of ours) and forks a child per module, so a hundred and more fresh
imports cost seconds: what each child proves is the order of our own imports, which the
fork does not give away.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"operator": "disagg_operator", "worker": "disagg_worker"}
# Third-party libraries preloaded before the forks (only to make the children fast).
PRELOAD = ("torch", "numpy", "pydantic", "kopf", "kubernetes", "aiohttp", "zmq", "msgspec")
FORKSERVER = """
import importlib, json, os, sys
for lib in json.loads(sys.argv[1]):
    importlib.import_module(lib)
ours = [m for m in sys.modules if m.split(".")[0] in ("disagg_operator", "disagg_worker")]
assert not ours, ours
results = {}
for module in json.loads(sys.argv[2]):
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


def modules() -> list[str]:
    found = []
    for folder, name in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append(".".join((name, *parts)))
    return found


def imports_alone(names: list[str], preload: tuple[str, ...] = PRELOAD) -> dict[str, str]:
    """module → '' when it imports alone, else why not."""
    argv = [sys.executable, "-c", FORKSERVER, json.dumps(preload), json.dumps(names)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd="/")
    assert done.returncode == 0, done.stderr
    found: dict[str, str] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_every_module_imports_alone() -> None:
    names = modules()
    assert len(names) > 100
    failures = {m: why for m, why in imports_alone(names).items() if why}
    assert not failures, "\n".join(f"{m}: {why}" for m, why in failures.items())


def test_the_check_catches_a_cycle_hidden_by_import_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shape the operator had (render.derive -> canary -> kvkey -> render.derive):
    ``cyc.b`` imports alone (and then ``cyc.a`` would too), ``cyc.a`` alone does not."""
    (tmp_path / "cyc").mkdir()
    (tmp_path / "cyc" / "__init__.py").write_text("")
    (tmp_path / "cyc" / "a.py").write_text("from cyc import b\nVALUE = 1\n")
    (tmp_path / "cyc" / "b.py").write_text("from cyc.a import VALUE\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    found = imports_alone(["cyc.b", "cyc.a"], preload=())
    assert found["cyc.b"] == ""
    assert "circular import" in found["cyc.a"]
