"""docs/worker.md's table of modules names every module of the worker package, and only
modules that exist: a module added or moved without its row fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "worker.md"


def _table() -> set[str]:
    text = DOC.read_text()
    section = text[text.index("## Modules and layers") :]
    section = section[: section.index("\n## ", 1)]
    named: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            named |= set(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return named


def _modules() -> set[str]:
    """Every module, and every package whose ``__init__`` defines something (by its name)."""
    folder = ROOT / "worker"
    found = set()
    for p in folder.rglob("*.py"):
        if p.name != "__init__.py":
            found.add(str(p.relative_to(folder).with_suffix("")))
        elif re.search(r"^(def|class) ", p.read_text(), re.M):
            found.add(str(p.parent.relative_to(folder)))
    return found


def test_every_worker_module_has_a_row_and_every_row_a_module() -> None:
    named, modules = _table(), _modules()
    assert not modules - named, f"docs/worker.md: add rows for {sorted(modules - named)}"
    assert not named - modules, f"docs/worker.md: no such modules {sorted(named - modules)}"
