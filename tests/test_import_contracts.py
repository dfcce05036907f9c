"""The import-linter contracts hold on this tree, and really fail on a violation.

The checked tree is a copy of the packages under their import names, placed first on
PYTHONPATH so it shadows the editable install.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.support.scripts import load

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
FOLDERS = (
    ("operator", "disagg_operator"),
    ("worker", "disagg_worker"),
    ("contract", "disagg_contract"),
    ("tools", "disagg_tools"),
)


def _copy_tree(tmp_path: Path) -> Path:
    for folder, name in FOLDERS:
        shutil.copytree(
            ROOT / folder / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__")
        )
    return tmp_path


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_contracts_kept_on_this_tree(tmp_path: Path) -> None:
    result = _lint(_copy_tree(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" in result.stdout and "0 broken" in result.stdout


PURE = "Pure packages import no I/O libraries BROKEN"
LAYERS = "Operator subsystems are layered BROKEN"
CONTRACT = "The contract imports neither side BROKEN"
TOOLS = "The product does not import the tools BROKEN"
TOOLS_LAYERS = "Tools are layered BROKEN"


@pytest.mark.parametrize(
    ("module", "violation", "broken"),
    [
        ("disagg_contract/config.py", "import zmq", PURE),
        ("disagg_operator/render/pods.py", "import asyncio", PURE),
        ("disagg_contract/ucx.py", "import disagg_worker.serve", CONTRACT),
        ("disagg_operator/api/kinds.py", "import disagg_operator.controller.client", PURE),
        (
            "disagg_operator/engines/vllm/checks.py",
            "import disagg_operator.commands.render",
            LAYERS,
        ),
        (
            "disagg_worker/transfer/rules/layout.py",
            "import disagg_operator.cli",
            "Worker does not import the operator BROKEN",
        ),
        (
            "disagg_worker/transfer/rules/plan.py",
            "import disagg_worker.serve.proxy.flow",
            "Worker subsystems are layered BROKEN",
        ),
        ("disagg_operator/controller/sync.py", "import disagg_tools.emulator.server", TOOLS),
        ("disagg_tools/emulator/store.py", "import disagg_tools.local.up", TOOLS_LAYERS),
        ("disagg_operator/api/base.py", "import disagg_operator.render.objects", LAYERS),
        ("disagg_operator/derive/transfer.py", "import disagg_operator.engines.settings", LAYERS),
        ("disagg_operator/render/canary.py", "import disagg_operator.planning.rollout", LAYERS),
        ("disagg_operator/contracts/llmd.py", "import disagg_operator.api", LAYERS),
    ],
)
def test_a_violation_breaks_its_contract(
    tmp_path: Path, module: str, violation: str, broken: str
) -> None:
    source = _copy_tree(tmp_path) / module
    source.write_text(source.read_text() + f"\n{violation}  # violation under test\n")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert broken in result.stdout
    importer = module.removesuffix(".py").replace("/", ".")
    imported = violation.split()[1]
    if broken in (LAYERS, TOOLS_LAYERS):  # a layers contract names the layers, then the import
        assert f"{importer} -> {imported}" in result.stdout, result.stdout
    else:
        assert f"{importer} -> {imported}" in result.stdout


def _pure_in_contract() -> set[str]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    pure = next(c for c in contracts["contracts"] if c["name"].startswith("Pure packages"))
    return set(pure["source_modules"])


def _modules() -> dict[str, Path]:
    modules = load("modules.py")
    return {m: modules.file_of(m) for m in modules.all_modules()}


def _says_pure(path: Path) -> bool:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return bool(re.search(r"\bPure layer\b", doc))


def test_purity_is_declared_once_per_package() -> None:
    """The pure contract names packages; each says "Pure layer" in its ``__init__`` and no
    module says it of itself (its package does)."""
    modules = _modules()
    listed = _pure_in_contract()
    packages = {n for n, p in modules.items() if p.name == "__init__.py"}
    assert listed - packages == set(), "the pure contract names packages, not modules"
    says = {n for n in packages if _says_pure(modules[n])}
    assert says - listed == set(), "say 'Pure layer' only of packages in the pure contract"
    assert listed - says == set(), "these packages' __init__ docstrings must say 'Pure layer'"
    modules_saying = {n for n, p in modules.items() if p.name != "__init__.py" and _says_pure(p)}
    assert modules_saying == set(), "purity is its package's: drop 'Pure layer' from these"


def test_no_pure_package_holds_another_pure_package() -> None:
    """Each pure package is listed once: none inside another listed one."""
    listed = sorted(_pure_in_contract())
    nested = [b for a in listed for b in listed if b.startswith(a + ".")]
    assert nested == []
