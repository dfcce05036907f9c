"""The product's wheel built from this tree, one build at a time across test processes.

pip builds a local project in its tree (setuptools' build/ and the egg-info), so two
builds at once (parallel test workers) race on those folders: an flock serializes them.
"""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIP_WHEEL = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]


@contextlib.contextmanager
def _one_build() -> Iterator[None]:
    with open(Path(tempfile.gettempdir()) / "disagg-wheel-build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build_wheel(dest: Path) -> Path:
    """Build the product's wheel into ``dest``; its path."""
    with _one_build():
        subprocess.run(
            [*PIP_WHEEL, "--wheel-dir", str(dest), str(ROOT)],
            check=True, timeout=300, capture_output=True, cwd=dest.parent,
        )  # fmt: skip
    (wheel,) = dest.glob("disagg-*.whl")
    return wheel
