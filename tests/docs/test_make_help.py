"""`make help`: every Makefile target, one line each, `make up` and `make test` first."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_make_help_lists_every_target_once_up_and_test_first() -> None:
    make = shutil.which("make")
    assert make, "make is needed (the README's commands are make targets)"
    done = subprocess.run([make, "-s", "help"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    listed = re.findall(r"^  make ([\w-]+): \S", done.stdout, re.M)
    targets = re.findall(r"^([a-z][\w-]*):(?!=)", (ROOT / "Makefile").read_text(), re.M)
    assert listed[:2] == ["up", "test"]
    assert sorted(listed) == sorted(set(targets)) and len(listed) == len(set(listed))
