"""How a container runs on this host: the kubelet's container runtime, one interface and
its drivers.

I/O layer. The pod lifecycle (:mod:`.runtime`: starts, exits, back-off, kills for failed
probes; :mod:`.node`: probes and status) is one and asks a :class:`Driver` for the few
things that differ between runtimes: start an instance of a container, stop instances
(SIGTERM, then SIGKILL at the end of the grace), and the command that execs inside a
running container (exec probes, preStop hooks). :data:`PROCESSES` runs each container as a
local process group; the podman driver (:mod:`disagg_tools.local.podman.runtime`) runs it
as a container of a podman pod. Either way an instance is a
:class:`~disagg_tools.local.children.Child`: its exit is the container's, its output the
container's log.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from disagg_tools.local.children import Child, spawn, start_child, stop_children
from disagg_tools.local.kubelet.rules import containers


class Driver(Protocol):
    """A container runtime of the local kubelet (module docstring)."""

    def create(self, name: str, argv: Sequence[str], env: Mapping[str, str], logs: Path) -> Child:
        """Start the first instance of container ``name``: ``argv`` with ``env`` (the
        container's own env; the driver adds what its runtime needs), its log in ``logs``."""
        ...

    def start(self, child: Child) -> None:
        """Start ``child``'s container again (a restart: same command, env and log)."""
        ...

    def stop(
        self, children: Sequence[Child], grace_s: float, sig: signal.Signals = signal.SIGTERM
    ) -> None:
        """Send ``sig`` to every instance, SIGKILL what still runs after ``grace_s``;
        returns once all have ended."""
        ...

    def exec_argv(
        self, run: containers.PodRun, process: containers.Process, command: Sequence[str]
    ) -> list[str]:
        """The command that runs ``command`` in ``process``'s container (an exec probe)."""
        ...

    def exec_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The env of a command that execs in a container whose own env is ``env``."""
        ...


def host_env(env: Mapping[str, str]) -> dict[str, str]:
    """A container's env over this host's (its PATH, certificates), without the host's
    own disagg and UCX settings: a pod's UCX env is the one rendered for it, all of it, so
    which wire UCX takes never follows what the host (or a test) exported."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DISAGG_", "UCX_"))}
    return {**base, **env}


class Processes:
    """Each container a local process in a process group of its own (a new session), its
    env over this host's; an exec is a local process with the container's env (the caller
    adapts its command to the pod's address, as :func:`.rules.containers.probe_exec` does)."""

    def create(self, name: str, argv: Sequence[str], env: Mapping[str, str], logs: Path) -> Child:
        return start_child(name, argv, host_env(env), logs)

    def start(self, child: Child) -> None:
        spawn(child)

    def stop(
        self, children: Sequence[Child], grace_s: float, sig: signal.Signals = signal.SIGTERM
    ) -> None:
        stop_children(children, grace_s, sig)

    def exec_argv(
        self, run: containers.PodRun, process: containers.Process, command: Sequence[str]
    ) -> list[str]:
        return containers.probe_exec(run, process, command)

    def exec_env(self, env: Mapping[str, str]) -> dict[str, str]:
        return host_env(env)


PROCESSES = Processes()
