"""The podman runtime as the kubelet's container driver: a container is an attached
``podman run`` (a :class:`Child`), stopped and killed by name through podman, and an exec
runs in the container (``podman exec``) with podman's own env, not the container's. podman
itself is stood for by a recorder; tests/containers runs it for real."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from disagg_tools.local.children import Child
from disagg_tools.local.kubelet.driver import Driver
from disagg_tools.local.kubelet.rules import containers
from disagg_tools.local.podman import runtime
from disagg_tools.local.podman.runtime import PodRuntime


@pytest.fixture()
def said(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    calls: list[tuple[str, ...]] = []

    def podman(*args: str, check: bool = True, timeout: float = 0.0) -> Any:
        calls.append(args)

    monkeypatch.setattr(runtime, "podman", podman)
    return calls


def _sleeper(pods: Driver, tmp_path: Path, name: str) -> Child:
    """A stand-in for an attached ``podman run --name NAME``: it sleeps until signalled."""
    argv = [sys.executable, "-c", "import time; time.sleep(30)", "--name", name]
    return pods.create(name, argv, {"MINE": "1"}, tmp_path)


def test_a_container_stops_and_dies_by_its_name_through_podman(
    tmp_path: Path, said: list[tuple[str, ...]]
) -> None:
    pods: Driver = PodRuntime(tmp_path, tmp_path, print)
    first, second = _sleeper(pods, tmp_path, "p-engine"), _sleeper(pods, tmp_path, "p-canary")
    pods.stop([first], 2.4)
    assert said == [("stop", "--time", "3", "p-engine")]
    assert first.proc.poll() is not None and second.proc.poll() is None  # the client reaped
    pods.start(first)  # `podman run --replace` again: same command and log
    pods.stop([first, second], 0.5, signal.SIGKILL)
    assert said[-1] == ("kill", "p-engine", "p-canary")
    assert first.proc.poll() is not None and second.proc.poll() is not None


def test_an_exec_runs_in_the_container_with_podmans_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISAGG_ROLE", "host")
    monkeypatch.setenv("CONTAINERS_CONF", "/etc/conf")
    pods: Driver = PodRuntime(tmp_path, tmp_path, print)
    run = containers.PodRun("demo-decode-0", "ns", "10.88.0.10", [], 30.0)
    process = containers.Process("engine", ["podman", "run"], {"MINE": "1"}, {})
    argv = pods.exec_argv(run, process, ["cat", "/tmp/ready"])
    assert argv == ["podman", "exec", "demo-decode-0-engine", "cat", "/tmp/ready"]
    env = pods.exec_env(process.env)
    assert "MINE" not in env and "DISAGG_ROLE" not in env
    assert env["CONTAINERS_CONF"] == "/etc/conf"
