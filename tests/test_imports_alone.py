"""Every module imports alone: in a fresh interpreter that has imported none of the
project's modules, importing the module succeeds. An import that works only because
another module of ours was imported first is a cycle waiting to bite.

The product's modules are imported that way within the product's own install by
tests/test_product_installs.py; the tools' here, in this environment
(:mod:`tests.support.imports`: a fork per module, so a hundred fresh imports cost seconds).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.imports import import_each
from tests.support.scripts import load

modules = load("modules.py")

# Third-party libraries preloaded before the forks (only to make the children fast).
PRELOAD = ("torch", "numpy", "pydantic", "kopf", "kubernetes", "aiohttp", "zmq", "msgspec")


def test_every_tools_module_imports_alone() -> None:
    names = modules.all_modules(tops=("disagg_tools",))
    assert len(names) > 50 and "disagg_tools.emulator.server" in names
    failures = {m: why for m, why in import_each(names, PRELOAD).items() if why}
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
    found = import_each(["cyc.b", "cyc.a"])
    assert found["cyc.b"] == ""
    assert "circular import" in found["cyc.a"]
