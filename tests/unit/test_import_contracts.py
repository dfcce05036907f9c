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


def test_pure_module_importing_zmq_breaks_the_contract(tmp_path: Path) -> None:
    tree = _copy_tree(tmp_path)
    config = tree / "disagg_worker" / "config.py"
    config.write_text(config.read_text() + "\nimport zmq  # violation under test\n")
    result = _lint(tree)
    assert result.returncode != 0
    assert "Pure modules import no I/O libraries BROKEN" in result.stdout
    assert "disagg_worker.config -> zmq" in result.stdout


def test_worker_importing_operator_breaks_the_contract(tmp_path: Path) -> None:
    tree = _copy_tree(tmp_path)
    layout = tree / "disagg_worker" / "layout.py"
    layout.write_text(layout.read_text() + "\nimport disagg_operator.cli  # violation\n")
    result = _lint(tree)
    assert result.returncode != 0
    assert "Worker does not import the operator BROKEN" in result.stdout
