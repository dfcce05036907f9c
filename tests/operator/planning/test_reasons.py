"""Condition reasons come from one definition: each reason's name is written once in the
project (planning/reasons.py, or where it is decided), every other module uses the
constant, and docs/crd.md's table is generated from the same table."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

from disagg_operator.planning import reasons

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "crd.md"


def _literals(source: str, names: set[str]) -> list[str]:
    """The string literals in ``source`` that are reason names, docstrings and ``__all__``
    left out."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))  # a docstring or a bare string
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            skip |= {id(n) for n in ast.walk(node.value)}
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and n.value in names and id(n) not in skip
    ]


def test_each_reason_is_written_once() -> None:
    names = {r.reason for r in reasons.TABLE}
    found: collections.Counter[str] = collections.Counter()
    where: dict[str, list[str]] = collections.defaultdict(list)
    for folder in ("operator", "worker", "contract"):
        for path in (ROOT / folder).rglob("*.py"):
            for name in _literals(path.read_text(), names):
                found[name] += 1
                where[name].append(str(path.relative_to(ROOT)))
    twice = {n: where[n] for n, count in found.items() if count > 1}
    assert twice == {}, "use the constant of planning/reasons.py (or the deciding module's)"
    assert set(found) == names  # each is defined somewhere, once


def test_the_scan_finds_a_bare_reason() -> None:
    assert _literals('x = "InvalidSpec"\n"""InvalidSpec"""\n', {"InvalidSpec"}) == ["InvalidSpec"]


def test_no_condition_lists_a_reason_twice() -> None:
    """ALLOWED is made from the table, so the count is what can fail: two rows giving one
    type the same reason would collapse into one allowed reason."""
    assert set(reasons.ALLOWED) == set(reasons.TYPES)
    for row in reasons.TABLE:
        assert row.reason in reasons.ALLOWED[row.type]
    assert sum(len(v) for v in reasons.ALLOWED.values()) == len(reasons.TABLE)


def test_docs_crd_shows_the_table() -> None:
    text = DOC.read_text()
    start = text.index("\n", text.index("<!-- reasons: generated")) + 1
    block = text[start : text.index("<!-- /reasons -->")]
    assert block == reasons.markdown() + "\n", (
        "docs/crd.md's reasons table is stale; paste reasons.markdown() between its markers"
    )
