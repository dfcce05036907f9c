"""TransferPathReady through the real kopf operator against the API emulator, with a real
transfer canary beside real reference workers: the test plays the kubelet (it writes each
decode pod's container statuses as the readiness probes leave them, and gives the decode
pod the canary's loopback address), and the operator's condition follows what the canary
says now. Decode readiness latches, so when the prefill freezes no pod changes: the
operator's canary watch alone must see it."""

from __future__ import annotations

import asyncio
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from disagg_operator.controller.config import OperatorConfig
from disagg_operator.controller.run import running
from disagg_tools.local.children import Child, disagg_argv, start_child, wait_ready
from tests.operator.conftest import DD_PATH, NS, api, condition, pods, quickstart, until
from tests.operator.controller.test_operator import converge
from tests.support.emulator import Emulator
from tests.worker.serve.conftest import Workers

CANARY = "transfer-canary"
WATCH_S = 0.5  # the operator's --canary-seconds here


class LivePath:
    """A real prefill, decode and canary on 127.0.0.1: the canary's port and the prefill."""

    def __init__(self, group: Workers) -> None:
        self.prefill: Child = group.worker("prefill")
        decode = group.worker("decode")
        argv = disagg_argv(
            *("worker", "canary", "--prefill", self.prefill.url, "--decode", decode.url),  # type: ignore[attr-defined]
            *("--model", "tiny", "--host", "127.0.0.1", "--port", "0"),
            *("--timeout-s", "3", "--interval-s", "0.5", "--fresh-s", "30"),
        )
        child = start_child("canary", argv, group._base, group.log_dir)
        group.children.append(child)
        self.port = int(wait_ready(child, timeout_s=60)["http_port"])

    def probe(self) -> int:
        """The kubelet's readiness probe on the canary: its status."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/ready", timeout=30) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return e.code


@pytest.fixture
def path(tmp_path: Path) -> Iterator[LivePath]:
    group = Workers(tmp_path)
    try:
        yield LivePath(group)
    finally:
        group.stop()


def kubelet_probe(emu: Emulator, name: str, canary_ready: bool, ip: str = "127.0.0.1") -> None:
    """What the kubelet writes after the canary's readiness probe: container statuses, and
    the pod's Ready condition following them."""
    emu.set_pod_ready(NS, name, containers={CANARY: canary_ready}, ip=ip)


def transfer_path(emu: Emulator, status: str) -> Any:
    return (c := condition(emu, "demo", "TransferPathReady")).get("status") == status and c


async def test_the_condition_follows_a_frozen_prefill_while_every_pod_stays_ready(
    emulator: Emulator, path: LivePath
) -> None:
    assert path.probe() == 200  # the canary proved the path once: its readiness latched
    url = str(emulator.url).rstrip("/")
    async with running(OperatorConfig(host=url, canary_seconds=WATCH_S, canary_port=path.port)):
        await api(emulator, "POST", DD_PATH, quickstart())
        got = await converge(emulator)
        decode = got["demo-decode-0"]
        assert [c["name"] for c in decode["spec"]["containers"]] == ["engine", CANARY]
        prefill = got["demo-prefill-0"]["spec"]["containers"]
        assert [c["name"] for c in prefill] == ["engine", "wire-peer"]  # the canary probes it

        kubelet_probe(emulator, "demo-decode-0", True)  # at the canary's address
        passing = await until("TransferPathReady=True", lambda: transfer_path(emulator, "True"))
        assert passing["reason"] == "CanaryPassing"
        before = emulator.find("v1/pods", NS, "demo-decode-0")

        path.prefill.proc.send_signal(signal.SIGSTOP)  # its queue never answers
        try:
            busy = await until(
                "TransferPathReady=False", lambda: transfer_path(emulator, "False"), 60
            )
            assert path.probe() == 200
        finally:
            path.prefill.proc.send_signal(signal.SIGCONT)
        assert busy["reason"] == "PrefillBusy", busy
        assert "demo-decode-0" in busy["message"] and "decode pods stay Ready" in busy["message"]
        # nothing about the pod changed: the watch, not a pod event, brought the news
        assert emulator.find("v1/pods", NS, "demo-decode-0") == before
        assert condition(emulator, "demo")["status"] == "True"  # the deployment still serves

        healed = await until("TransferPathReady=True", lambda: transfer_path(emulator, "True"), 60)
        assert healed["lastTransitionTime"] >= busy["lastTransitionTime"]

        # a pod whose canary has not passed on its engine (a restarted engine) is not Ready
        kubelet_probe(emulator, "demo-decode-0", False)
        failing = await until("TransferPathReady=False", lambda: transfer_path(emulator, "False"))
        assert failing["reason"] == "CanaryFailing" and "demo-decode-0" in failing["message"]
        assert condition(emulator, "demo")["status"] == "False"
        assert sorted(pods(emulator)) == ["demo-decode-0", "demo-prefill-0"]  # nothing replaced


async def test_without_the_canary_watch_the_latches_alone_decide(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    # the fixture's operator runs no canary watch (running()'s default): nothing is
    # asked, so a latched canary counts as a pass, as before any watch pass has run
    await api(emulator, "POST", DD_PATH, quickstart())
    await converge(emulator)
    kubelet_probe(emulator, "demo-decode-0", True, ip="127.0.1.9")
    passing = await until("TransferPathReady=True", lambda: transfer_path(emulator, "True"))
    assert passing["reason"] == "CanaryPassing"
