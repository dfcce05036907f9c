"""Supervision of a local run: a process that dies is started again with the same command,
env and ports after a crash-loop back-off, while the others serve on.

I/O layer of ``disagg up --runtime podman`` (its containers' attached clients, log files,
readiness probes; ``disagg up``'s process runs are the local kubelet's); when to restart is
the kubelet's crash loop (:class:`~disagg_tools.local.rules.backoff.CrashLoop`, the local
kubelet's too) with the values of Kubernetes' ``ReduceDefaultCrashLoopBackOffDecay`` gate
(:data:`LOCAL_RUN`: processes start in seconds here). It is what a kubelet does for a pod's
containers: same address, new process. :mod:`~disagg_tools.local.stack` pins each
process to the ports it announced, so the proxy's URL list and the side channel a prefill
advertises stay valid, and requests that need the dead process fail with the proxy's 502
until it is back.

Level-triggered and single-threaded: :meth:`Supervisor.tick` looks at every process and
moves each one step: serving → (it died) waiting → (delay passed) starting → (ready)
serving, or back to waiting when the start fails; a start that keeps failing is retried
for as long as the run lasts, each attempt said. Nothing runs in the background:
:meth:`~Supervisor.watch` (what ``disagg up`` does) or :meth:`~Supervisor.wait_ready`
drive it from the caller's thread, which then also starts every process (a process's
parent-death signal follows the thread that started it).
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from disagg_tools.local import serving
from disagg_tools.local.children import Child, ChildError, ready_line
from disagg_tools.local.kubelet.driver import PROCESSES, Driver
from disagg_tools.local.rules import backoff
from disagg_tools.local.rules.backoff import LOCAL_RUN, CrashLoop, Entry
from disagg_tools.local.rules.pods import UpError
from disagg_tools.local.rules.status import exit_status
from disagg_tools.local.stack import PROXY, Run

SERVING, WAITING, STARTING = "serving", "waiting", "starting"
PROXY_START_S = 60.0
TAIL_LINES = 20
TICK_S = 0.2
STOP_GRACE_S = 5.0  # a failed or restarted process's SIGTERM, then SIGKILL

Say = Callable[[str], None]
Probe = Callable[[Child], bool]  # one readiness check of a started process: True once it serves


@dataclass
class Member:
    """One supervised process (its :class:`Child` keeps command, env and log across
    restarts) and where it stands."""

    child: Child
    role: str  # prefill | decode | proxy
    url: str
    probe: Probe
    start_timeout_s: float
    state: str = SERVING
    attempt: int = 0  # restarts since the back-off last started over
    entry: Entry | None = None  # its back-off (the kubelet's, per container)
    failed_at: float = 0.0  # when it last died (or was stopped for failing)
    ready_at: float | None = None  # None: not ready since its last start
    started_at: float = 0.0
    due: float = 0.0  # when a waiting process starts
    last_failure: str = "(none)"  # the restart line and log tail last said
    liveness: Probe | None = None  # a container's liveness probe: restart once it fails
    liveness_period_s: float = 10.0
    liveness_threshold: int = 3  # failures in a row that restart it
    liveness_failures: int = 0
    liveness_due: float = 0.0
    driver: Driver = PROCESSES  # the container runtime that starts and stops it

    @property
    def label(self) -> str:
        """How lines name it: "prefill quickstart-prefill-0", or just "proxy"."""
        name = self.child.name
        return name if name == self.role else f"{self.role} {name}"


class Supervisor:
    """Keeps every process of a run serving; see the module docstring."""

    def __init__(
        self,
        members: list[Member],
        say: Say = print,
        policy: CrashLoop = LOCAL_RUN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._members = {m.child.name: m for m in members}
        self._say, self._policy, self._clock = say, policy, clock
        now = clock()
        for m in members:
            if m.state == SERVING and m.ready_at is None:
                m.ready_at = now  # serving when handed over: its healthy time counts from here
                m.liveness_due = now + m.liveness_period_s

    def tick(self) -> None:
        """Move every process one step (see the module docstring)."""
        for m in self._members.values():
            if m.state == SERVING and m.child.proc.poll() is not None:
                self._failed(m)
            elif m.state == SERVING and m.liveness is not None and self._clock() >= m.liveness_due:
                self._check_alive(m)
            elif m.state == WAITING and self._clock() >= m.due:
                m.entry = backoff.step(self._policy, m.entry, m.failed_at, self._clock())
                self._start(m)
            elif m.state == STARTING:
                self._check_start(m)

    def watch(self, stop: threading.Event) -> None:
        """Supervise until ``stop`` is set (the caller's signal handler sets it: raising from
        a handler could land inside ``Popen.poll`` while it holds its lock, and the
        cleanup's ``wait`` would then block for good)."""
        while not stop.is_set():
            self.tick()
            stop.wait(TICK_S)

    def restart(self, name: str, sig: signal.Signals = signal.SIGTERM) -> None:
        """Restart ``name`` now at its address, as deleting a pod's container does: send its
        process group ``sig`` if it runs (SIGTERM: a graceful stop, SIGKILL after 5 s;
        SIGKILL: a crash), then start the same command with the same env and ports. No
        back-off, and the failure count starts over: a restart asked for is not a crash.
        Returns once the process is started; :meth:`wait_ready` waits until it serves."""
        m = self._member(name)
        self._say(f"restarting {m.label} on request ({sig.name})")
        m.driver.stop([m.child], STOP_GRACE_S, sig)
        m.attempt, m.entry = 0, None
        self._start(m)

    def wait_ready(self, name: str, timeout_s: float) -> None:
        """Supervise (every process) until ``name`` serves; ChildError with its last failure
        if it does not within ``timeout_s`` (it goes on being retried while something
        ticks). A process killed from outside counts once its exit shows: to kill one and
        wait for it, use :meth:`restart`."""
        m = self._member(name)
        deadline = self._clock() + timeout_s
        while True:
            self.tick()
            if m.state == SERVING and m.child.proc.poll() is None:
                return
            if self._clock() >= deadline:
                raise ChildError(
                    f"{name} is not serving after {timeout_s:g} s ({m.state}, restart "
                    f"attempt {m.attempt}); its last failure:\n{m.last_failure}"
                )
            time.sleep(TICK_S)

    def _member(self, name: str) -> Member:
        if name not in self._members:
            known = ", ".join(self._members)
            raise ValueError(f"no process named {name!r} in this run; it has {known}")
        return self._members[name]

    def _start(self, m: Member) -> None:
        m.driver.start(m.child)
        m.state, m.started_at, m.ready_at = STARTING, self._clock(), None
        pid = m.child.proc.pid
        self._say(f"started again {m.label} (pid {pid}): attempt {m.attempt}")

    def _check_alive(self, m: Member) -> None:
        """One liveness probe; ``liveness_threshold`` failures in a row stop the process
        and schedule its restart, as a kubelet restarts a container that fails it."""
        m.liveness_due = self._clock() + m.liveness_period_s
        try:
            alive = m.liveness is not None and m.liveness(m.child)
        except (ChildError, UpError, OSError):
            alive = False
        m.liveness_failures = 0 if alive else m.liveness_failures + 1
        if m.liveness_failures >= m.liveness_threshold:
            m.liveness_failures = 0
            self._failed(m, cause=f"liveness probe failed {m.liveness_threshold} times")

    def _check_start(self, m: Member) -> None:
        if m.child.proc.poll() is not None:
            self._failed(m)
            return
        try:
            ready = m.probe(m.child)
        except (ChildError, UpError, OSError) as e:
            self._failed(m, cause=str(e))
            return
        now = self._clock()
        if ready:
            m.state, m.ready_at = SERVING, now
            m.liveness_due, m.liveness_failures = now + m.liveness_period_s, 0
            took = now - m.started_at
            self._say(
                f"ready again {m.label}: {m.url} (attempt {m.attempt}, started in {took:.1f} s)"
            )
        elif now - m.started_at > m.start_timeout_s:
            self._failed(m, cause=f"not ready after {m.start_timeout_s:g} s")

    def _failed(self, m: Member, cause: str = "") -> None:
        """The process died (or, with ``cause``, will be stopped): say so, schedule the
        restart."""
        now = self._clock()
        m.driver.stop([m.child], STOP_GRACE_S)  # ends a failed start; reaps what a dead leader left
        served = 0.0 if m.ready_at is None else now - m.ready_at
        over = m.entry is None or backoff.expired(self._policy, m.entry, now)
        m.attempt = 1 if over else m.attempt + 1
        m.state, m.failed_at = WAITING, now
        m.due = backoff.restart_at(self._policy, m.entry, now)
        line = (
            f"restart name={m.child.name} role={m.role} "
            f"exit={exit_status(m.child.proc.returncode)} served_s={served:.1f} "
            f"attempt={m.attempt} delay_s={m.due - now:g} log={m.child.log_path}"
        )
        if cause:
            line += f" cause={json.dumps(cause.splitlines()[0])}"
        m.last_failure = line + "\n" + _quoted(m.child.log_tail(TAIL_LINES))
        self._say(m.last_failure)


def _quoted(tail: str) -> str:
    """A log tail under the restart line, each line marked as the process's own."""
    if not tail.strip():
        return "    | (the process wrote nothing to its log)"
    return "\n".join(f"    | {line}" for line in tail.splitlines())


def supervise(run: Run, say: Say = print, policy: CrashLoop = LOCAL_RUN) -> Supervisor:
    """A :class:`Supervisor` over every process ``run`` started, each one serving now."""
    roles = {url: role for role, urls in run.workers.items() for url in urls}
    urls = {name: url for url, name in run.names.items()}
    members = []
    for child in run.children:
        if child.name == PROXY:
            members.append(Member(child, PROXY, run.proxy_url, logged_ready, PROXY_START_S))
            continue
        url, local = urls[child.name], run.local
        if local is None:
            raise UpError(f"{child.name}: the run has no engine to supervise")
        probe = _health_ready(url) if local.readiness == "health" else logged_ready
        members.append(Member(child, roles[url], url, probe, local.start_timeout_s))
    return Supervisor(members, say, policy)


def logged_ready(child: Child) -> bool:
    """Processes that announce readiness (the reference worker, the proxy) on a log line."""
    return ready_line(child) is not None


def _health_ready(url: str) -> Probe:
    """vLLM serves once /health answers 200 and one plain request went through: the same
    warm-up as at first start, for the same reason (docs/vllm.md, AMX)."""

    def probe(_: Child) -> bool:
        if not serving.healthy(url):
            return False
        serving.warm_up(url)
        return True

    return probe
