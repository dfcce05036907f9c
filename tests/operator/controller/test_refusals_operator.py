"""Writes the API server refuses, against the real kopf operator over HTTP.

The emulator plays an admission webhook or a quota on request (``Emulator.refuse``): pod
creates get a 422 with a Status body. The operator must say so in the status and in one
Warning event, keep the writes that were accepted, retry with a growing back-off (not
once per child event), and converge once the refusal is lifted. The back-off is shortened
(0.5 s doubling to 2 s) so the test takes seconds; its default (5 s to 5 min) is unit
tested in tests/operator/controller/test_refusals.py.
"""

from __future__ import annotations

import asyncio
import copy

from disagg_operator.controller.config import OperatorConfig
from disagg_operator.controller.rules.refusals import Backoff
from disagg_operator.controller.run import running
from tests.operator.conftest import DD_PATH, NS, api, condition, pods, quickstart, until
from tests.support.emulator import Emulator

WEBHOOK = (
    'Pod "{name}" is invalid: spec.containers[0].resources.limits[cpu]: Invalid value: "64": '
    "must be less than or equal to the namespace limit of 8"
)


def pod_creates(emu: Emulator) -> int:
    return sum(1 for c in emu.calls if (c.verb, c.resource) == ("create", "pods"))


def warnings(emu: Emulator) -> list[dict]:
    return [e for e in emu.objects_of("v1/events", NS) if e["type"] == "Warning"]


async def test_refused_pod_create_degrades_backs_off_and_recovers(emulator: Emulator) -> None:
    rule = emulator.refuse("v1/pods", code=422, reason="Invalid", message=WEBHOOK)
    host = str(emulator.url).rstrip("/")
    async with running(OperatorConfig(host=host, backoff=Backoff(first=0.5, cap=2.0))):
        await api(emulator, "POST", DD_PATH, quickstart())
        degraded = await until(
            "Degraded/ApiRefused",
            lambda: (
                condition(emulator, "demo", "Degraded").get("reason") == "ApiRefused"
                and condition(emulator, "demo", "Degraded")
            ),
        )
        loop = asyncio.get_running_loop()
        started, first = loop.time(), pod_creates(emulator)
        assert degraded["status"] == "True"
        assert (
            'create Pod/demo-decode-0 refused: HTTP 422 Invalid: Pod "demo-decode-0" is '
            in (degraded["message"])
        )
        assert "must be less than or equal to the namespace limit of 8" in degraded["message"]
        assert condition(emulator, "demo")["reason"] == "ApiRefused"
        assert condition(emulator, "demo")["status"] == "False"
        # What was accepted stays: Services, the NetworkPolicy, the handshake Secret.
        services = {s["metadata"]["name"] for s in emulator.objects_of("v1/services", NS)}
        assert {"demo-prefill", "demo-decode"} <= services
        assert emulator.find("v1/secrets", NS, "demo-handshake") is not None
        assert pods(emulator) == {}

        # Child events during the back-off (someone keeps editing a Service) are served,
        # but do not retry the refused creates.
        for port in range(10):
            svc = copy.deepcopy(emulator.find("v1/services", NS, "demo-decode"))
            svc["spec"]["ports"][0]["port"] = 9000 + port
            emulator.put_object("v1/services", svc)
            await asyncio.sleep(0.1)
        await asyncio.sleep(max(0.0, 4.0 - (loop.time() - started)))
        attempts = (pod_creates(emulator) - first) / 2  # two pods per attempt
        # Back-off 0.5, 1, 2, 2 s: about 3 more attempts in 4 s; a hot loop makes hundreds.
        assert 1 <= attempts <= 5, attempts
        assert emulator.find("v1/services", NS, "demo-decode")["spec"]["ports"][0]["port"] == 8000
        refused = [e for e in warnings(emulator) if e["reason"] == "ApiRefused"]
        # One per distinct answer (the API server names each pod in its message), not one
        # per retry.
        assert sorted(e["message"].split(" refused:")[0] for e in refused) == [
            "create Pod/demo-decode-0",
            "create Pod/demo-prefill-0",
        ]
        assert all("HTTP 422 Invalid" in e["message"] for e in refused)

        emulator.allow(rule)  # the webhook lets pods through now
        got = await until("both pods", lambda: len(pods(emulator)) == 2 and pods(emulator))
        for name in got:
            emulator.set_pod_ready(NS, name)
        await until("Ready", lambda: condition(emulator, "demo").get("status") == "True")
        assert condition(emulator, "demo", "Degraded")["reason"] == "AsExpected"
    # Least privilege: the handshake Secret was created, never read.
    assert {c.verb for c in emulator.calls if c.resource == "secrets"} == {"create"}
