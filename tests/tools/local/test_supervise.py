"""The supervisor of a local run, over small real processes: a process that dies comes back
with its command, env and log after the back-off; a start that keeps failing is retried
and said each time; a restart asked for is immediate; nothing is left running."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from disagg_tools.local.children import Child, ready_line, start_child, stop_children, wait_ready
from disagg_tools.local.kubelet.driver import PROCESSES
from disagg_tools.local.rules.backoff import CrashLoop
from disagg_tools.local.supervise import SERVING, Member, Supervisor

# Serves (a ready line, then sleeps) unless told to fail at start or to hang before ready.
SCRIPT = """
if [ -e "$FAIL" ]; then echo "boom: told to fail by $FAIL" >&2; exit 3; fi
if [ -e "$HANG" ]; then exec sleep 60; fi
echo '{"event": "ready", "http_port": 1, "value": "'"$VALUE"'"}'
exec sleep 60
"""
FAST = CrashLoop(initial_s=0.05, cap_s=0.2)  # the kubelet's shape, scaled to a test


class Run:
    """One supervised process and what the supervisor said."""

    def __init__(self, tmp: Path, start_timeout_s: float = 5.0) -> None:
        self.fail, self.hang = tmp / "fail", tmp / "hang"
        env = {"PATH": os.environ["PATH"], "FAIL": str(self.fail), "HANG": str(self.hang)}
        self.child = start_child("worker-0", ["sh", "-c", SCRIPT], {**env, "VALUE": "v1"}, tmp)
        wait_ready(self.child, timeout_s=10)
        self.said: list[str] = []
        member = Member(self.child, "prefill", "http://w0", _ready, start_timeout_s)
        self.member = member
        self.sup = Supervisor([member], self.said.append, FAST)
        self.pids = [self.child.proc.pid]

    def until(self, done: Callable[[], bool], timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, "\n".join(self.said)
            self.sup.tick()
            time.sleep(0.01)
        self.pids.append(self.child.proc.pid)

    def restarts(self) -> list[str]:
        return [line for line in self.said if line.startswith("restart ")]


def _kill(child: Child) -> None:
    """SIGKILL the process and wait until it is gone, as a crash looks once noticed."""
    os.kill(child.proc.pid, signal.SIGKILL)
    child.proc.wait(10)


def _field(line: str, key: str) -> str:
    """The value of ``key=value`` in a restart line."""
    found = re.search(rf"\b{key}=(\S+)", line)
    assert found, line
    return found[1]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _ready(child: Child) -> bool:
    return ready_line(child) is not None


@pytest.fixture()
def run(tmp_path: Path) -> Iterator[Run]:
    r = Run(tmp_path)
    try:
        yield r
    finally:
        stop_children([r.child])
        assert not [p for p in r.pids if _alive(p)]


def _serving(r: Run) -> Callable[[], bool]:
    return lambda: r.member.state == SERVING and r.child.proc.poll() is None


def test_a_killed_process_comes_back_with_its_command_env_and_log(run: Run) -> None:
    first, argv = run.child.proc.pid, run.child.argv
    _kill(run.child)
    run.until(lambda: any(s.startswith("ready again") for s in run.said))
    assert run.child.proc.pid != first and run.child.argv == argv
    assert run.child.ready["value"] == "v1"  # the same env
    restart, tail = run.restarts()[0].split("\n", 1)
    assert re.fullmatch(
        r"restart name=worker-0 role=prefill exit=SIGKILL served_s=\d+\.\d attempt=1 "
        rf"delay_s=0 log={run.child.log_path}",  # the first restart at once, as a kubelet's
        restart,
    )
    assert tail.startswith("    | {") and '"value": "v1"' in tail  # the dead process's lines
    assert run.said[1] == f"started again prefill worker-0 (pid {run.child.proc.pid}): attempt 1"
    assert run.said[2].startswith("ready again prefill worker-0: http://w0 (attempt 1, started in")
    assert run.child.log_path.read_text().count('"event": "ready"') == 2  # appended, not lost


def test_a_start_that_keeps_failing_is_retried_with_growing_delays(run: Run) -> None:
    run.fail.touch()
    _kill(run.child)
    run.until(lambda: len(run.restarts()) >= 5)
    assert [_field(r, "delay_s") for r in run.restarts()] == ["0", "0.05", "0.1", "0.2", "0.2"]
    assert [_field(r, "attempt") for r in run.restarts()] == ["1", "2", "3", "4", "5"]
    for line in run.restarts()[1:]:
        assert "exit=3 served_s=0.0" in line
        assert line.endswith("    | boom: told to fail by " + str(run.fail))
    run.fail.unlink()  # whatever was wrong is fixed: the next attempt serves
    run.until(_serving(run))
    assert run.said[-1].startswith("ready again prefill worker-0")


def test_a_start_that_never_gets_ready_is_stopped_and_retried(tmp_path: Path) -> None:
    r = Run(tmp_path, start_timeout_s=0.3)
    try:
        r.hang.touch()
        _kill(r.child)
        r.until(lambda: len(r.restarts()) >= 2)
        hung = [*r.pids[0:1], r.child.proc.pid]
        timed_out = r.restarts()[1]
        assert "exit=SIGTERM served_s=0.0 attempt=2 delay_s=0.05" in timed_out
        assert 'cause="not ready after 0.3 s"' in timed_out
        assert "(the process wrote nothing to its log)" in timed_out
        assert r.child.proc.poll() is not None  # the hung start was stopped, not left behind
        assert not [
            p for p in hung if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
        ]
    finally:
        stop_children([r.child])


def test_a_restart_asked_for_is_immediate_and_resets_the_count(run: Run) -> None:
    run.fail.touch()
    _kill(run.child)
    run.until(lambda: len(run.restarts()) >= 3)
    run.fail.unlink()
    before = run.child.proc.pid
    run.sup.restart("worker-0")
    assert run.child.proc.pid != before and run.member.attempt == 0
    assert run.said[-1] == f"started again prefill worker-0 (pid {run.child.proc.pid}): attempt 0"
    run.sup.wait_ready("worker-0", timeout_s=10)
    run.pids.append(run.child.proc.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):  # a serving process: stopped first
        old = run.child.proc.pid
        run.sup.restart("worker-0", sig)
        assert run.child.proc.pid != old and not _alive(old)
        assert run.said[-2] == f"restarting prefill worker-0 on request ({sig.name})"
        run.sup.wait_ready("worker-0", timeout_s=10)
        run.pids.append(run.child.proc.pid)
    assert len(run.restarts()) == 3  # none counts as a crash


def test_waiting_for_a_process_that_does_not_come_back_names_it_and_its_log(run: Run) -> None:
    run.fail.touch()
    _kill(run.child)
    with pytest.raises(Exception, match=r"worker-0 is not serving after 0.5 s") as caught:
        run.sup.wait_ready("worker-0", timeout_s=0.5)
    assert "boom: told to fail" in str(caught.value)
    with pytest.raises(ValueError, match="no process named 'proxy' in this run; it has worker-0"):
        run.sup.restart("proxy")


def test_stopping_ends_even_when_an_interrupted_poll_left_popens_lock_taken(
    tmp_path: Path,
) -> None:
    """A signal handler that raises can land inside ``Popen.poll`` after it took its lock
    and before it released it; the stop that follows must not wait on that lock forever."""
    child = start_child("stubborn", ["sh", "-c", "trap '' TERM; sleep 60"], {}, tmp_path)
    child.proc._waitpid_lock.acquire()  # what the interrupted poll leaves behind
    stop = threading.Thread(target=stop_children, args=([child], 0.5), daemon=True)
    stop.start()
    stop.join(60)  # a hang guard: with the bug, the stop waits on the lock for ever
    assert not stop.is_alive(), "the stop waits on Popen's lock"
    assert not psutil.pid_exists(child.proc.pid) or psutil.Process(child.proc.pid).status() in (
        psutil.STATUS_ZOMBIE,
        psutil.STATUS_DEAD,
    )


def test_a_process_that_fails_its_liveness_probe_is_restarted(run: Run) -> None:
    """As a kubelet: ``liveness_threshold`` failures in a row, then a restart with the
    back-off; passing probes reset the count."""
    answers = iter([False, True, False, True])  # never twice in a row: no restart
    run.member.liveness = lambda _child: next(answers, False)
    run.member.liveness_period_s, run.member.liveness_threshold = 0.01, 2
    first = run.child.proc.pid
    for _ in range(4):
        run.member.liveness_due = 0.0
        run.sup.tick()
    assert run.child.proc.pid == first and run.restarts() == []
    run.until(lambda: any(s.startswith("ready again") for s in run.said))
    assert run.child.proc.pid != first
    (restart,) = run.restarts()
    assert 'cause="liveness probe failed 2 times"' in restart.splitlines()[0]
    assert _field(restart, "attempt") == "1"


def test_starts_and_stops_go_through_the_members_container_driver(run: Run) -> None:
    """The supervisor asks the member's driver (the kubelet's: processes, or a podman run's
    containers) to stop and start it, never the processes behind its back."""
    calls: list[tuple[str, float, signal.Signals]] = []

    class Recording:
        def start(self, child: Child) -> None:
            calls.append(("start", 0.0, signal.SIGTERM))
            PROCESSES.start(child)

        def stop(self, children: Any, grace_s: float, sig: signal.Signals = signal.SIGTERM) -> None:
            calls.append(("stop", grace_s, sig))
            PROCESSES.stop(children, grace_s, sig)

    run.member.driver = Recording()  # type: ignore[assignment]
    run.sup.restart("worker-0", signal.SIGKILL)
    run.sup.wait_ready("worker-0", timeout_s=10)
    run.pids.append(run.child.proc.pid)
    assert calls == [("stop", 5.0, signal.SIGKILL), ("start", 0.0, signal.SIGTERM)]
    _kill(run.child)
    run.until(lambda: sum(s.startswith("ready again") for s in run.said) == 2)
    assert calls[2:] == [("stop", 5.0, signal.SIGTERM), ("start", 0.0, signal.SIGTERM)]


def test_a_process_that_ran_600_s_since_its_last_restart_starts_the_count_over(
    run: Run,
) -> None:
    """The kubelet's reset: the back-off and the attempt count start over once the process
    ran over 600 s since it was last restarted (time moved by hand)."""
    now = [1000.0]
    run.sup = Supervisor([run.member], run.said.append, FAST, clock=lambda: now[0])
    waits = []
    for gap in (1.0, 1.0, 601.0):  # running time before each crash
        now[0] += gap
        _kill(run.child)
        run.sup.tick()  # the crash seen: the restart line says when it starts again
        restart = run.restarts()[-1]
        waits.append((_field(restart, "attempt"), _field(restart, "delay_s")))
        now[0] += float(_field(restart, "delay_s"))
        run.until(_serving(run))
    assert waits == [("1", "0"), ("2", "0.05"), ("1", "0")]
