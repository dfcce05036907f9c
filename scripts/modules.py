"""The project's modules by import name and their files: the product's three packages
(operator, worker, and the contract they share) and the tools, each in a folder of its own
(folders are import paths). Read by scripts/tables.py and the tests that walk every
module.

Standard library only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "disagg_operator": "operator/disagg_operator",
    "disagg_worker": "worker/disagg_worker",
    "disagg_contract": "contract/disagg_contract",
    "disagg_tools": "tools/disagg_tools",
}
PRODUCT = ("disagg_operator", "disagg_worker", "disagg_contract")  # what the images install


def config(root: Path = ROOT) -> dict[str, Any]:
    return tomllib.loads((root / "pyproject.toml").read_text())


def file_of(module: str, root: Path = ROOT) -> Path | None:
    """The source file of one of our modules (a package's ``__init__.py``), or None."""
    top, _, rest = module.partition(".")
    if top not in FOLDERS:
        return None
    base = root / FOLDERS[top] / Path(*rest.split(".")) if rest else root / FOLDERS[top]
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def all_modules(root: Path = ROOT, tops: tuple[str, ...] = tuple(FOLDERS)) -> list[str]:
    """Every module and package of ours (of the packages ``tops``), by import name."""
    out = []
    for top in tops:
        folder = FOLDERS[top]
        for path in sorted((root / folder).rglob("*.py")):
            if not (path.parent / "__init__.py").is_file():
                continue  # a file a pod runs (a sitecustomize shim), not a module of ours
            parts = path.relative_to(root / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.append(".".join((top, *parts)))
    return out
