"""The distribution ships every package: setuptools lists them by hand (package-dir maps
the folders to import names), and an editable install finds an unlisted folder anyway, so
only a built wheel would miss one."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
IMPORT_NAMES = {"operator": "disagg_operator", "worker": "disagg_worker"}


def test_every_package_folder_is_listed_in_pyproject() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = set()
    for folder, name in IMPORT_NAMES.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *parts)))
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - found == set()
