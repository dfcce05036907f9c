"""The import-linter contracts hold on this tree, and really fail on a violation.

The checked tree is a copy of the packages under their import names, placed first on
PYTHONPATH so it shadows the editable install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _copy_tree(tmp_path: Path) -> Path:
    for folder, name in (("operator", "disagg_operator"), ("worker", "disagg_worker")):
        shutil.copytree(
            ROOT / folder, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__")
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


@pytest.mark.parametrize(
    ("module", "violation", "broken"),
    [
        ("disagg_worker/config.py", "import zmq", "Pure modules import no I/O libraries BROKEN"),
        (
            "disagg_worker/transfer/layout.py",
            "import disagg_operator.cli",
            "Worker does not import the operator BROKEN",
        ),
        (
            "disagg_worker/transfer/plan.py",
            "import disagg_worker.serve.proxy",
            "Worker subsystems are layered BROKEN",
        ),
        (
            "disagg_operator/reconcile.py",
            "import disagg_operator.emulator.server",
            "The operator's reconcile path imports no test or local tooling BROKEN",
        ),
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
    assert f"{importer} -> {violation.split()[1]}" in result.stdout
