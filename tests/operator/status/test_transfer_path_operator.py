"""TransferPathReady through the real kopf operator against the API emulator: the test
plays the kubelet, writing each decode pod's transfer-canary container status the way a
readiness probe would, and the operator's condition follows it."""

from __future__ import annotations

import asyncio

from tests.operator.conftest import DD_PATH, NS, api, condition, pods, quickstart, until
from tests.operator.controller.test_operator import converge
from tests.support.emulator import Emulator

CANARY = "transfer-canary"


def kubelet_probe(emu: Emulator, name: str, canary_ready: bool) -> None:
    """What the kubelet writes after the canary's readiness probe: container statuses, and
    the pod's Ready condition following them."""
    emu.set_pod_ready(NS, name, containers={CANARY: canary_ready})


async def test_a_failing_canary_flips_transfer_path_ready_naming_the_pod(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    await api(emulator, "POST", DD_PATH, quickstart())
    got = await converge(emulator)
    decode = got["demo-decode-0"]
    assert [c["name"] for c in decode["spec"]["containers"]] == ["engine", CANARY]
    assert [c["name"] for c in got["demo-prefill-0"]["spec"]["containers"]] == ["engine"]

    kubelet_probe(emulator, "demo-decode-0", True)
    passing = await until(
        "TransferPathReady=True",
        lambda: (
            (c := condition(emulator, "demo", "TransferPathReady")).get("status") == "True" and c
        ),
    )
    assert passing["reason"] == "CanaryPassing"

    kubelet_probe(emulator, "demo-decode-0", False)
    failing = await until(
        "TransferPathReady=False",
        lambda: (
            (c := condition(emulator, "demo", "TransferPathReady")).get("status") == "False" and c
        ),
    )
    assert failing["reason"] == "CanaryFailing"
    assert "demo-decode-0" in failing["message"]
    assert failing["lastTransitionTime"] >= passing["lastTransitionTime"]
    # the canary's readiness is the pod's: the deployment is not Ready either
    assert condition(emulator, "demo")["status"] == "False"
    assert sorted(pods(emulator)) == ["demo-decode-0", "demo-prefill-0"]  # nothing replaced
