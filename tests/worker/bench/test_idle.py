"""engine_idle_cpu_cores counts a process's whole tree: an engine's CPU is in its workers."""

from __future__ import annotations

import sys
from pathlib import Path

from disagg_worker.bench.e2e import idle_cpu
from disagg_worker.serve.localrun import start_child, stop_children

SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"


def test_a_spinning_grandchild_counts_for_its_root_and_a_sleeper_for_nothing(
    tmp_path: Path,
) -> None:
    parent = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {SPIN!r}])\n"
        "time.sleep(30)\n"
    )
    busy = start_child("busy", [sys.executable, "-c", parent], {}, tmp_path)
    quiet = start_child(
        "quiet", [sys.executable, "-c", "import time; time.sleep(30)"], {}, tmp_path
    )
    try:
        got = idle_cpu([busy, quiet], seconds=1.0)
    finally:
        stop_children([busy, quiet])
    assert got["busy"] > 0.3  # one core spinning in the grandchild, on a shared 2-core host
    assert got["quiet"] < 0.1
