"""The distribution ships every package: setuptools finds them under operator/ and
worker/ (folders are import paths, nothing lists them), and a built wheel holds each one
the source tree has."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tests.support.wheel import build_wheel

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("operator", "worker")


def _packages_in_tree() -> set[str]:
    found = set()
    for folder in FOLDERS:
        for init in (ROOT / folder).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                found.add(".".join(init.parent.relative_to(ROOT / folder).parts))
    return found


def test_a_built_wheel_holds_every_package_of_the_tree(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "wheels")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {n.rpartition("/")[0].replace("/", ".") for n in names if n.endswith("/__init__.py")}
    assert _packages_in_tree() - shipped == set()
    assert "disagg_operator/api/corev1.json" in names  # package data too
    assert "disagg_operator/engines/vllm/idle_shim/sitecustomize.py" in names
