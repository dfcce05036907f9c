"""A pod's container as a local process, kept as the kubelet's runtime manager keeps one
(``kuberuntime_manager.go``, Kubernetes 1.36): started, seen to exit, killed for a failed
liveness or startup probe (its preStop, SIGTERM, SIGKILL at the end of the grace), started
again when its restart policy says so after the crash-loop back-off
(:class:`~disagg_tools.local.rules.backoff.CrashLoop`), and its ``containerStatuses``
entry: the newest instance's state, the one before it as ``lastState``,
``CrashLoopBackOff`` while it waits.

I/O layer (through a :class:`~.driver.Driver`: processes or podman containers); the
decisions are :mod:`.rules`' and the back-off's. The back-off
looks at the newest *exited* instance when a start is decided: after a crash that is the
crash; after a kill for a failed probe (killed and started again in one pod sync) it is
the instance before, so a first kill restarts at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from disagg_tools.local.children import Child
from disagg_tools.local.kubelet.driver import PROCESSES, Driver
from disagg_tools.local.kubelet.rules import containers, lifecycle
from disagg_tools.local.kubelet.rules.probes import Probes, Seen
from disagg_tools.local.rules import backoff

MIN_GRACE_S = 2.0  # the kubelet's minimumGracePeriodInSeconds for a stop after a preStop


def rfc3339(wall: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))


@dataclass
class Box:
    """One container of a pod this kubelet runs."""

    process: containers.Process
    child: Child
    probes: Probes
    pod: str  # the pod's uid, for container IDs
    driver: Driver = PROCESSES  # the container runtime that starts and stops it
    instance: int = 1  # instances started so far (the newest's number)
    running: bool = True
    started_at: float = field(default_factory=time.monotonic)
    started_rfc: str = field(default_factory=rfc3339)
    exits: list[dict[str, Any]] = field(default_factory=list)  # state.terminated, oldest first
    finished_at: float | None = None  # when the newest exited instance exited
    again: bool = False  # the exited container is to start again
    entry: backoff.Entry | None = None  # its back-off
    waiting: str = ""  # the CrashLoopBackOff message while it waits
    killing: bool | None = None  # a kill for a probe under way: whether it restarts
    inflight: set[str] = field(default_factory=set)  # probes being run

    @property
    def name(self) -> str:
        return self.process.container

    @property
    def container_id(self) -> str:
        return f"local://{self.pod[:8]}-{self.name}-{self.instance}"

    def seen(self, deleting: bool, pod_done: bool) -> Seen:
        """What a probe worker reads of this container in the pod's status."""
        seen = Seen(
            self.container_id, self.running, self.started_at, exited=not self.running,
            restarts=self.again, pod_done=pod_done, deleting=deleting,
        )  # fmt: skip
        return replace(seen, started=self.probes.started(seen))

    def status(self, deleting: bool, pod_done: bool) -> dict[str, Any]:
        """This container's ``containerStatuses`` entry."""
        seen = self.seen(deleting, pod_done)
        state: dict[str, Any]
        last = self.exits[-1] if self.exits else None
        if self.running:
            state = {"running": {"startedAt": self.started_rfc}}
        elif self.waiting:
            state = {"waiting": {"reason": lifecycle.CRASH_LOOP, "message": self.waiting}}
        else:
            state = {"terminated": self.exits[-1]}
            last = self.exits[-2] if len(self.exits) > 1 else None
        return {
            "name": self.name,
            "state": state,
            "lastState": {"terminated": last} if last else {},
            "ready": self.probes.ready(seen),
            "started": seen.started,
            "restartCount": self.instance - 1,
            "image": self.process.spec.get("image", ""),
            "imageID": "",
            "containerID": self.container_id,
        }

    def observe(self, pod: Mapping[str, Any], policy: backoff.CrashLoop, now: float) -> bool:
        """One look at the process: an exit recorded, a start decided (``doBackOff``).
        Whether anything changed (a pod sync follows)."""
        changed = False
        if self.running:
            code = self.child.proc.poll()
            if code is None:
                return False
            self._exited(pod, lifecycle.exit_code(code), policy, now)
            changed = True
        if self.running or not self.again or pod["metadata"].get("deletionTimestamp"):
            return changed
        assert self.finished_at is not None
        at = backoff.restart_at(policy, self.entry, self.finished_at)
        if now < at:
            assert self.entry is not None
            message = lifecycle.back_off_message(self.entry.backoff_s, self.name, pod)
            changed, self.waiting = changed or self.waiting != message, message
            return changed
        self.entry = backoff.step(policy, self.entry, self.finished_at, now)
        self.start(now)
        return True

    def _exited(
        self, pod: Mapping[str, Any], code: int, policy: backoff.CrashLoop, now: float
    ) -> None:
        self.running = False
        self.exits = [*self.exits[-1:], lifecycle.terminated(code, self.started_rfc, rfc3339())]
        killed, self.killing = self.killing, None
        event, self.finished_at = self.finished_at, now
        if pod["metadata"].get("deletionTimestamp"):
            self.again = False
        elif killed is None:  # it exited by itself: its restart policy decides
            self.again = lifecycle.should_restart(self.process.spec, pod["spec"], code)
        else:  # killed for a probe and started again in the same sync, backed off by the
            self.again = killed  # exit before this one (none: no back-off, entry kept)
            if killed and (event is None or not backoff.in_back_off_since(
                policy, self.entry, event, now
            )):  # fmt: skip
                if event is not None:
                    self.entry = backoff.step(policy, self.entry, event, now)
                self.start(now)

    def start(self, now: float) -> None:
        self.driver.start(self.child)
        self.instance += 1
        self.running, self.waiting = True, ""
        self.started_at, self.started_rfc = now, rfc3339()

    async def kill(self, pod: Mapping[str, Any], grace_s: float) -> None:
        """Kill the running container for a failed probe (``killContainer``): its preStop,
        SIGTERM, SIGKILL at the end of ``grace_s``; :meth:`observe` then sees the exit."""
        self.killing = lifecycle.restart_after_kill(self.process.spec, pod["spec"])
        await self.stop(grace_s)

    async def stop(self, grace_s: float) -> None:
        """preStop (within the grace), SIGTERM, SIGKILL once the grace is over."""
        deadline = time.monotonic() + grace_s
        if self.process.pre_stop and self.child.proc.poll() is None:
            await self._pre_stop(deadline)
        left = max(MIN_GRACE_S if self.process.pre_stop else 0.1, deadline - time.monotonic())
        await asyncio.to_thread(self.driver.stop, [self.child], left)

    async def _pre_stop(self, deadline: float) -> None:
        """The preStop hook, its output in the container's log (where `kubectl logs`
        would not show it, but a test can)."""
        with open(self.child.log_path, "ab") as out:
            proc = await asyncio.create_subprocess_exec(
                *self.process.pre_stop,
                env=self.driver.exec_env(self.process.env),
                stdout=out,
                stderr=out,
            )
            try:
                await asyncio.wait_for(proc.wait(), max(0.1, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()

    def kill_now(self) -> None:
        """SIGKILL the process group at once (a pod gone from the API)."""
        with contextlib.suppress(ProcessLookupError):
            self.driver.stop([self.child], 0.5, signal.SIGKILL)
