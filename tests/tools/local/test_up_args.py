"""`disagg up` names its manifest as every command does: ``-f FILE`` or ``FILE``, one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = str(ROOT / "examples" / "quickstart-cpu.yaml")
UP = [sys.executable, "-m", "disagg_operator.cli", "up"]


def test_up_runs_the_manifest_named_with_f() -> None:
    args = [*UP, "-f", QUICKSTART, "--prompt", "Hi", "--max-tokens", "4", "--port", "0"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"rendered 2 pods from {QUICKSTART}" in done.stdout
    assert "transfer:   NIXL READ" in done.stdout
    assert "stopped 5 processes" in done.stdout  # the pods' 4 containers, the proxy


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "name a manifest: -f FILE (or FILE)"),
        (["-f", QUICKSTART, QUICKSTART], "one manifest, not 2"),
    ],
)
def test_no_manifest_or_two_is_a_usage_error(argv: list[str], says: str) -> None:
    done = subprocess.run([*UP, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and says in done.stderr and done.stdout == ""
