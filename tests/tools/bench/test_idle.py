"""engine_idle_cpu_cores counts a process's whole tree: an engine's CPU is in its workers.

The figure is CPU seconds over a window. Here the window is driven by the test (an injected
clock and sleep): it lasts until a grandchild has burnt a fixed amount of CPU, however busy
the host, and counts exactly one second. The expected figure is then computed from the same
processes' CPU times read by psutil, never from how much CPU the host happened to give."""

from __future__ import annotations

import os
import signal
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from disagg_tools.bench import e2e
from disagg_tools.local.children import Child, start_child, stop_children

BURN_S = 0.3  # CPU seconds the grandchild spends inside the window
WINDOW_S = 1.0  # the window as the injected clock counts it
DEADLINE_S = 120.0  # a hang guard, never a measure
# Ready, then idle until SIGUSR1; then spin for BURN_S of its own CPU time (however long the
# host takes to give it), say so, and idle again (a minute at most, as every process here).
BURN = f"""
import signal, sys, time
signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGUSR1}})
open(sys.argv[1] + ".ready", "w").close()
signal.sigtimedwait({{signal.SIGUSR1}}, 60)
end = time.process_time() + {BURN_S}
while time.process_time() < end:
    pass
open(sys.argv[1] + ".done", "w").close()
signal.sigtimedwait({{signal.SIGUSR1}}, 60)
"""


def _cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def _until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def _asleep(*pids: int) -> bool:
    """Every process blocked (its CPU time frozen until something wakes it)."""
    return all(psutil.Process(p).status() == psutil.STATUS_SLEEPING for p in pids)


def _window(grandchild: int, flag: Path) -> types.SimpleNamespace:
    """A ``time`` for e2e: ``sleep`` opens the window (SIGUSR1), returns once the grandchild
    burnt its CPU and is idle again, and moves ``monotonic`` on by exactly that sleep."""
    now = [1000.0]

    def sleep(seconds: float) -> None:
        os.kill(grandchild, signal.SIGUSR1)
        _until("the grandchild's burn", lambda: flag.with_suffix(".done").exists())
        _until("the grandchild idle again", lambda: _asleep(grandchild))
        now[0] += seconds

    return types.SimpleNamespace(monotonic=lambda: now[0], sleep=sleep)


def test_a_spinning_grandchild_counts_for_its_root_and_a_sleeper_for_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flag = tmp_path / "burn"
    parent = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {BURN!r}, {str(flag)!r}])\n"
        "time.sleep(60)\n"
    )
    ready = str(tmp_path / "quiet.ready")
    quiet_code = f"import time; open({ready!r}, 'w').close(); time.sleep(60)"
    busy = start_child("busy", [sys.executable, "-c", parent], {}, tmp_path)
    quiet = start_child("quiet", [sys.executable, "-c", quiet_code], {}, tmp_path)
    try:
        got, spent = _measure(busy, quiet, flag, monkeypatch)
    finally:
        stop_children([busy, quiet])
    assert spent["grandchild"] >= BURN_S - 0.02  # its burn, give or take a clock tick
    assert got["busy"] == round((spent["grandchild"] + spent["busy"]) / WINDOW_S, 3)
    assert got["quiet"] == 0.0


def _measure(
    busy: Child, quiet: Child, flag: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, float], dict[str, float]]:
    """idle_cpu over the driven window, and each process's CPU seconds across it."""
    _until("the grandchild ready", lambda: flag.with_suffix(".ready").exists())
    _until("the sleeper ready", lambda: (flag.parent / "quiet.ready").exists())
    (grandchild,) = (p.pid for p in psutil.Process(busy.proc.pid).children())
    pids = {"busy": busy.proc.pid, "grandchild": grandchild, "quiet": quiet.proc.pid}
    _until("all three idle", lambda: _asleep(*pids.values()))
    before = {name: _cpu_s(pid) for name, pid in pids.items()}
    monkeypatch.setattr(e2e, "time", _window(grandchild, flag))
    got = e2e.idle_cpu([busy, quiet], seconds=WINDOW_S)
    return got, {name: _cpu_s(pid) - before[name] for name, pid in pids.items()}
