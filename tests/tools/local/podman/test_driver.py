"""The podman runtime as the kubelet's container driver: a container is an attached
``podman run`` (a :class:`Child`), stopped and killed by name through podman, and an exec
runs in the container (``podman exec``) with podman's own env, not the container's; its
probes are the kubelet's prober's. podman itself is stood for by a recorder;
tests/containers runs it for real."""

from __future__ import annotations

import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web

from disagg_tools.local.children import Child, serve_in_thread
from disagg_tools.local.kubelet.driver import Driver
from disagg_tools.local.kubelet.rules import containers
from disagg_tools.local.podman import runtime
from disagg_tools.local.podman.runtime import EXEC_START_S, PodRuntime, kubelet_rule
from disagg_tools.local.rules.podman import Probe


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


def test_a_container_stops_through_its_client_then_dies_by_its_name_through_podman(
    tmp_path: Path, said: list[tuple[str, ...]]
) -> None:
    pods: Driver = PodRuntime(tmp_path, tmp_path, print)
    first, second = _sleeper(pods, tmp_path, "p-engine"), _sleeper(pods, tmp_path, "p-canary")
    pods.stop([first], 2.4)
    assert said == [("kill", "p-engine")]  # what outlived its client
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


class _Local(PodRuntime):
    """The podman driver with its exec run on this host: what check asks it to exec."""

    def exec_argv(
        self, run: containers.PodRun, process: containers.Process, command: Sequence[str]
    ) -> list[str]:
        self.execs.append(f"{run.name}-{process.container}")
        return list(command)

    execs: list[str] = []


def test_a_planned_probe_runs_by_the_kubelets_prober(tmp_path: Path) -> None:
    """HTTP from this host to the pod IP, [200, 400) a success, a redirect to another host
    not followed (``DoHTTPProbe``, which urllib would have followed); TCP a connect; exec
    through the driver, its exit status the verdict."""
    app = web.Application()
    app.router.add_get("/{what}", _answer)
    pods = _Local(tmp_path, tmp_path, print)
    pod = SimpleNamespace(name="demo-decode-0", namespace="ns", ip="127.0.0.1", grace_s=5.0)
    c = SimpleNamespace(name="engine", env={})
    check = lambda probe: pods.check(pod, c, probe)  # type: ignore[arg-type]  # noqa: E731
    with serve_in_thread(app) as url:
        port = int(url.rsplit(":", 1)[1])
        assert check(Probe("http", port, "/ok")) and not check(Probe("http", port, "/busy"))
        assert check(Probe("http", port, "/away"))  # another host: ends as a success
        assert check(Probe("tcp", port)) and not check(Probe("tcp", _closed_port()))
    assert check(Probe("exec", command=("true",))) and not check(Probe("exec", command=("false",)))
    assert pods.execs == ["demo-decode-0-engine"] * 2


def test_a_planned_probe_is_the_kubelets_rule() -> None:
    rule = kubelet_rule(Probe("http", 8000, "/health", timeout_s=0.5))
    assert (rule.action, rule.timeout) == ({"httpGet": {"port": 8000, "path": "/health"}}, 1)
    assert kubelet_rule(Probe("tcp", 5600, timeout_s=3)).action == {"tcpSocket": {"port": 5600}}
    exec_rule = kubelet_rule(Probe("exec", command=("cat", "/tmp/x"), timeout_s=2))
    assert exec_rule.action == {"exec": {"command": ["cat", "/tmp/x"]}}
    assert exec_rule.timeout == 2 + EXEC_START_S  # the podman client's start on top


async def _answer(request: web.Request) -> web.Response:
    what = request.match_info["what"]
    if what == "away":
        raise web.HTTPFound("http://192.0.2.1:9/ok")
    return web.Response(status={"ok": 204, "busy": 503}[what])


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
