"""The engine interface's table (engines/base.py's docstring) names every method and
class attribute an engine provides: one added without its row fails here."""

from __future__ import annotations

import re

from disagg_operator.engines import base


def test_every_engine_member_has_a_row() -> None:
    members = [n for n in vars(base.Engine) if not n.startswith("_")]
    doc = base.__doc__ or ""
    missing = [n for n in members if not re.search(rf"\b{n}\b", doc)]
    assert members and not missing, f"engines/base.py: add rows for {missing}"


def test_every_engine_member_is_in_architectures_table() -> None:
    """docs/architecture.md's "what the class answers" table too."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "architecture.md").read_text()
    table = doc[doc.index("| method | used by | answers |") :]
    table = table[: table.index("\n\n")]
    members = [n for n in vars(base.Engine) if not n.startswith("_")]
    missing = [n for n in members if f"`{n}" not in table]
    assert not missing, f"docs/architecture.md: add rows for {missing}"
