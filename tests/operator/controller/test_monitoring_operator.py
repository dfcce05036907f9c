"""spec.monitoring through the real kopf operator against the API emulator, where the
chart's RBAC lacks the Prometheus Operator's kinds (monitoring.enabled false): the lookups
answer 403, the rest of the deployment still converges, and the refused writes are
reported (Degraded, ApiRefused) instead of failing every sync."""

from __future__ import annotations

import asyncio

from disagg_operator.contracts import prometheus
from tests.operator.conftest import DD_PATH, NS, api, condition, pods, quickstart, until
from tests.support.emulator import Emulator

FORBIDDEN = 'podmonitors.monitoring.coreos.com "{name}" is forbidden: User cannot get it'


async def test_without_rbac_for_monitoring_the_rest_converges_and_says_so(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    for plural in ("podmonitors", "prometheusrules"):
        for verb in ("get", "create"):
            emulator.refuse(
                f"{prometheus.API_VERSION}/{plural}",
                code=403,
                reason="Forbidden",
                message=FORBIDDEN,
                verb=verb,
            )
    await api(emulator, "POST", DD_PATH, quickstart(monitoring={"enabled": True}))
    await until("pods", lambda: sorted(pods(emulator)) == ["demo-decode-0", "demo-prefill-0"])
    degraded = await until(
        "Degraded=True",
        lambda: (c := condition(emulator, "demo", "Degraded")).get("status") == "True" and c,
    )
    assert degraded["reason"] == "ApiRefused"
    assert "PodMonitor" in degraded["message"] or "podmonitors" in degraded["message"]
    assert emulator.find("v1/services", NS, "demo-decode") is not None
