"""The tables of modules (docs/worker.md, docs/operator.md) and of the engine interface's
methods (docs/architecture.md) are generated from the code by scripts/tables.py: a block
that differs fails with the command that rewrites it, and a worker module or an ``Engine``
member without a row fails, whatever the script does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from disagg_operator.engines.base import Engine
from tests.support.scripts import load

ROOT = Path(__file__).resolve().parents[2]
tables = load("tables.py")
BLOCKS = tables.blocks()


def _rows(doc: str, name: str) -> list[list[str]]:
    """The cells of each row of the block ``name`` in ``doc``, below its header."""
    text = (ROOT / doc).read_text()
    block = text[text.index(f"<!-- {name}: ") : text.index(f"<!-- /{name} -->")]
    lines = [line for line in block.splitlines() if line.startswith("|")][2:]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]


def _first_cells(doc: str, name: str) -> set[str]:
    return {row[0].strip("`") for row in _rows(doc, name)}


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_the_docs_hold_the_tables_as_generated(block) -> None:
    where = ", ".join(block.docs)
    assert not tables.docblocks.stale([block]), (
        f"{where}: {block.name} differs; run: {tables.COMMAND}"
    )


def test_every_worker_module_and_package_has_a_row() -> None:
    folder = ROOT / "worker" / "disagg_worker"
    found = set()
    for path in folder.rglob("*.py"):
        relative = path.relative_to(folder)
        if path.name != "__init__.py":
            found.add(relative.with_suffix("").as_posix())
        elif relative.parent != Path("."):
            found.add(relative.parent.as_posix() + "/")
    named = _first_cells("docs/worker.md", "worker-modules")
    assert not found - named, f"docs/worker.md: no row for {sorted(found - named)}"
    assert not named - found, f"docs/worker.md: no such modules {sorted(named - found)}"


def test_every_member_of_the_engine_interface_has_a_row() -> None:
    public = {n for n in [*vars(Engine), *Engine.__annotations__] if not n.startswith("_")}
    named = {cell.split("(")[0] for cell in _first_cells(tables.ARCH, "engine-methods")}
    assert not public - named, f"{tables.ARCH}: no row for {sorted(public - named)}"
    assert not named - public, f"{tables.ARCH}: Engine has no {sorted(named - public)}"


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_every_row_says_what_it_is_for(block) -> None:
    """A module without a docstring, or an Engine member without one, has an empty cell."""
    empty = [row[0] for row in _rows(block.docs[0], block.name) if not row[-1]]
    assert not empty, f"{block.docs[0]}: give these a docstring: {empty}"


@pytest.mark.parametrize(
    ("doc", "layer"),
    [
        ("Summary.\n\nI/O layer (aiohttp). More.", "I/O"),
        ("Summary.\n\nEffectful layer, composing the planner.", "effectful"),
        ("Summary.\n\nI/O shell around the pure core.", "I/O shell"),
        ("Summary.\n\nCLI layer (writes files).", "CLI"),
        ("Summary.\n\nDev/bench tool, HTTP layer: events.", "I/O"),  # not where it begins
        ("Summary.\n\nMore.\n\nCompute layer.", "I/O"),  # not the paragraph after the summary
        ("Summary only.", "I/O"),
    ],
)
def test_the_declared_layer(doc: str, layer: str) -> None:
    assert tables.declared_layer(doc) == layer


@pytest.mark.parametrize(
    ("doc", "role"),
    [
        ("One line. Then more.\n\nBody.", "One line."),
        (
            "A sentence over\ntwo lines: e.g, this.\n\nBody.",
            "A sentence over two lines: e.g, this.",
        ),
        (
            "Uses :class:`~a.b.Thing` and :mod:`.plan`, ``x|y``.",
            "Uses `Thing` and `.plan`, `x\\|y`.",
        ),
    ],
)
def test_the_role_is_the_first_sentence(doc: str, role: str) -> None:
    assert tables.summary(doc) == role
