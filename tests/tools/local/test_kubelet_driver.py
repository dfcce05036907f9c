"""The kubelet's container runtime seam: the pod lifecycle (:class:`Box`) starts, restarts,
stops and execs only through its :class:`Driver`, so a driver (processes, podman) decides
what a container is and the lifecycle stays one."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from disagg_tools.local.children import Child
from disagg_tools.local.kubelet.driver import PROCESSES, Driver, host_env
from disagg_tools.local.kubelet.rules import containers, probes
from disagg_tools.local.kubelet.runtime import Box
from disagg_tools.local.rules.backoff import CrashLoop


class Recording:
    """The process driver, each call recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def create(self, name: str, argv: Sequence[str], env: Mapping[str, str], logs: Path) -> Child:
        self.calls.append(("create", name))
        return PROCESSES.create(name, argv, env, logs)

    def start(self, child: Child) -> None:
        self.calls.append(("start", child.name))
        PROCESSES.start(child)

    def stop(
        self, children: Sequence[Child], grace_s: float, sig: signal.Signals = signal.SIGTERM
    ) -> None:
        self.calls.append(("stop", tuple(c.name for c in children), grace_s, sig))
        PROCESSES.stop(children, grace_s, sig)

    def exec_argv(
        self, run: containers.PodRun, process: containers.Process, command: Sequence[str]
    ) -> list[str]:
        self.calls.append(("exec_argv", process.container))
        return PROCESSES.exec_argv(run, process, command)

    def exec_env(self, env: Mapping[str, str]) -> dict[str, str]:
        self.calls.append(("exec_env", dict(env)))
        return PROCESSES.exec_env(env)


def _pod() -> dict[str, Any]:
    meta = {"name": "p", "namespace": "ns", "uid": "uid-1234-5678"}
    return {"metadata": meta, "spec": {"restartPolicy": "Always", "containers": [{"name": "c"}]}}


def _box(tmp_path: Path, driver: Driver, code: str, pre_stop: list[str]) -> Box:
    argv = [sys.executable, "-c", code]
    spec = {"name": "c", "image": "img"}
    process = containers.Process("c", argv, {"MINE": "1"}, spec, pre_stop)
    child = driver.create("c", argv, process.env, tmp_path)
    return Box(process, child, probes.Probes(), "uid-1234-5678", driver, started_at=0.0)


def test_a_kill_and_the_restart_after_it_go_through_the_driver(tmp_path: Path) -> None:
    driver = Recording()
    hook = [sys.executable, "-c", "print('pre-stop ran')"]
    box = _box(tmp_path, driver, "import time; time.sleep(30)", hook)
    asyncio.run(box.kill(_pod(), grace_s=3.0))
    box.child.proc.wait(10)
    assert box.observe(_pod(), CrashLoop(), now=100.0) and box.running
    names = [c[0] for c in driver.calls]
    assert names == ["create", "exec_env", "stop", "start"], driver.calls
    assert driver.calls[1][1] == {"MINE": "1"}  # the preStop's env: the container's
    stop = driver.calls[2]
    assert stop[1] == ("c",) and 0 < stop[2] <= 3.0 and stop[3] is signal.SIGTERM
    assert "pre-stop ran" in box.child.log_path.read_text()  # the instance before's log
    box.kill_now()
    assert driver.calls[-1][0] == "stop" and driver.calls[-1][3] is signal.SIGKILL
    assert box.child.proc.poll() is not None


def test_the_process_driver_keeps_the_hosts_own_disagg_and_ucx_settings_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DISAGG_ROLE", "host")
    monkeypatch.setenv("UCX_TLS", "rc")
    monkeypatch.setenv("UCX_NET_DEVICES", "lo")  # a pod's UCX settings are its own, all of them
    monkeypatch.setenv("KEPT_FROM_HOST", "yes")
    env = PROCESSES.exec_env({"DISAGG_ROLE": "decode", "UCX_TCP_TX_SEG_SIZE": "1m"})
    assert env["DISAGG_ROLE"] == "decode" and env["KEPT_FROM_HOST"] == "yes"
    assert [k for k in env if k.startswith("UCX_")] == ["UCX_TCP_TX_SEG_SIZE"]
    assert env == host_env({"DISAGG_ROLE": "decode", "UCX_TCP_TX_SEG_SIZE": "1m"})
