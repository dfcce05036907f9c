"""A pod's container as a local process, restarted as the kubelet restarts one: real
short-lived processes, a fake clock for the back-off (Kubernetes 1.36's: the first restart
at once, then 10 s doubling to 300 s), the restart policies, a kill for a failed probe, and
the ``containerStatuses`` entry each step leaves."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from disagg_tools.local.kubelet import prober
from disagg_tools.local.kubelet.driver import PROCESSES
from disagg_tools.local.kubelet.rules import containers, lifecycle, probes
from disagg_tools.local.kubelet.runtime import Box
from disagg_tools.local.rules.backoff import CrashLoop

POLICY = CrashLoop()


def _box(tmp_path: Path, code: str, **spec: Any) -> Box:
    argv = [sys.executable, "-c", code]
    process = containers.Process("c", argv, {}, {"name": "c", "image": "img", **spec})
    child = PROCESSES.create("c", argv, {}, tmp_path)
    return Box(process, child, probes.Probes(), "uid-1234-5678", started_at=0.0)


def _pod(policy: str = "Always") -> dict[str, Any]:
    meta = {"name": "p", "namespace": "ns", "uid": "uid-1234-5678"}
    return {"metadata": meta, "spec": {"restartPolicy": policy, "containers": [{"name": "c"}]}}


def _exit_then_observe(box: Box, pod: dict[str, Any], now: float) -> dict[str, Any]:
    box.child.proc.wait(10)
    assert box.observe(pod, POLICY, now)
    return box.status(deleting=False, pod_done=False)


def test_a_crash_loop_restarts_at_once_then_backs_off_10_s_then_20_s(tmp_path: Path) -> None:
    box, pod = _box(tmp_path, "raise SystemExit(3)"), _pod()
    status = _exit_then_observe(box, pod, now=1.0)
    assert "running" in status["state"] and status["restartCount"] == 1  # at once
    assert status["lastState"]["terminated"]["exitCode"] == 3
    assert status["lastState"]["terminated"]["reason"] == "Error"
    status = _exit_then_observe(box, pod, now=2.0)
    waiting = status["state"]["waiting"]
    assert waiting == {
        "reason": "CrashLoopBackOff",
        "message": "back-off 10s restarting failed container=c pod=p_ns(uid-1234-5678)",
    }
    assert status["lastState"]["terminated"]["exitCode"] == 3 and status["restartCount"] == 1
    assert not box.observe(pod, POLICY, 11.9) and not box.running  # 10 s after the exit
    assert box.observe(pod, POLICY, 12.0) and box.running
    status = _exit_then_observe(box, pod, now=13.0)
    assert status["state"]["waiting"]["message"].startswith("back-off 20s ")
    assert lifecycle.phase(pod["spec"], [status], done=False) == "Running"


def test_a_container_that_ran_over_ten_minutes_restarts_at_once(tmp_path: Path) -> None:
    box, pod = _box(tmp_path, "raise SystemExit(1)"), _pod()
    _exit_then_observe(box, pod, now=1.0)
    _exit_then_observe(box, pod, now=2.0)
    box.observe(pod, POLICY, 12.0)  # restarted at 12 s after its 10 s back-off
    status = _exit_then_observe(box, pod, now=612.5)  # ran 600.5 s since that restart
    assert "running" in status["state"] and status["restartCount"] == 3


def test_never_and_on_failure_leave_the_container_terminated(tmp_path: Path) -> None:
    box, pod = _box(tmp_path, "raise SystemExit(2)"), _pod("Never")
    status = _exit_then_observe(box, pod, now=1.0)
    assert status["state"]["terminated"]["exitCode"] == 2 and status["restartCount"] == 0
    assert not box.observe(pod, POLICY, 1000.0) and not box.running
    assert lifecycle.phase(pod["spec"], [status], done=False) == "Failed"
    box, pod = _box(tmp_path, "pass"), _pod("OnFailure")
    status = _exit_then_observe(box, pod, now=1.0)
    assert status["state"]["terminated"]["reason"] == "Completed"
    assert lifecycle.phase(pod["spec"], [status], done=False) == "Succeeded"
    box, pod = _box(tmp_path, "raise SystemExit(1)"), _pod("OnFailure")
    assert "running" in _exit_then_observe(box, pod, now=1.0)["state"]


def test_a_kill_for_a_probe_restarts_in_the_same_sync_backed_off_by_the_exit_before(
    tmp_path: Path,
) -> None:
    box, pod = _box(tmp_path, "import time; time.sleep(30)"), _pod()

    def kill(now: float) -> dict[str, Any]:
        asyncio.run(box.kill(pod, grace_s=0.5))
        return _exit_then_observe(box, pod, now)

    status = kill(now=100.0)  # no earlier exit: at once, the back-off untouched
    assert "running" in status["state"] and box.entry is None
    assert status["lastState"]["terminated"]["exitCode"] == 143  # SIGTERM
    status = kill(now=200.0)  # the exit before was at 100 s: long past, at once
    assert "running" in status["state"] and box.entry is not None
    status = kill(now=205.0)  # the exit before was at 200 s: 10 s back-off from it
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert not box.observe(pod, POLICY, 214.9) and box.observe(pod, POLICY, 215.0)
    never = _pod("Never")
    asyncio.run(box.kill(never, grace_s=0.5))
    assert "terminated" in _exit_then_observe(box, never, 300.0)["state"]


async def test_an_http_probe_follows_redirects_to_its_host_only() -> None:
    """``DoHTTPProbe``: [200, 400) succeeds; a redirect to the same host is followed and
    its target judged; one to another host ends as a success; a timeout fails."""

    async def answer(request: web.Request) -> web.StreamResponse:
        where = {"/same": "/bad", "/other": "http://127.0.0.9:1/", "/loop": "/loop"}
        if request.path in where:
            raise web.HTTPFound(where[request.path])
        if request.path == "/slow":
            await asyncio.sleep(2)
        return web.Response(status=500 if request.path == "/bad" else 200)

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    run = containers.PodRun("p", "ns", "127.0.0.1", [], 30.0)
    process = containers.Process("c", [], {}, {"name": "c"})
    got = {}
    try:
        async with aiohttp.ClientSession() as http:
            for path in ("/ok", "/bad", "/same", "/other", "/loop", "/slow"):
                rule = probes.Rule.of(probes.READINESS, {"httpGet": {"path": path, "port": port}})
                got[path] = await prober.attempt(http, run, process, rule, {})
    finally:
        await runner.cleanup()
    assert got == {
        "/ok": probes.SUCCESS, "/bad": probes.FAILURE, "/same": probes.FAILURE,
        "/other": probes.SUCCESS, "/loop": probes.FAILURE, "/slow": probes.FAILURE,
    }  # fmt: skip
