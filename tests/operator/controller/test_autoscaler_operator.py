"""spec.autoscaling through the real kopf operator against the API emulator, with a real
Prometheus (Debian's) scraping the demand series the engine seam names.

The series come from a test exporter standing in for the engines (their own series are
checked on real engines: tests/worker/serve/test_disagg.py, tests/vllm/test_pd.py): each
counter grows at a rate the test sets, so the demand Prometheus computes is known. The
operator reads it, plans from the profile ConfigMap, writes
status.<role>.plannedReplicas, and the sync creates and deletes pods to match, the least
busy first."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from disagg_operator.controller.config import OperatorConfig
from disagg_operator.controller.run import running
from disagg_tools.local.prometheus import Prometheus
from tests.operator.conftest import DD, DD_PATH, NS, api, pods, quickstart, until
from tests.support.emulator import Emulator

# One pod of each pool: prefill 5000 prompt tokens/s within TTFT 1 s (the planner keeps a
# 0.9 headroom: 4500 a pod); decode 16 sequences within ITL 50 ms at 20 ms (800 tokens/s,
# 720 a pod).
PROFILE = {
    "percentile": 90,
    "prefill": {"curve": [[1000, 0.2], [4000, 0.5], [5000, 1.0], [6000, 3.0]], "start_s": 5},
    "decode": {"curve": [[1, 0.01], [16, 0.02], [32, 0.2]], "start_s": 5, "capacity": 16},
}
AUTOSCALING = {
    "targets": {"ttftMilliseconds": 1000, "itlMilliseconds": 50},
    "profile": {"configMap": "pools"},
    "prefill": {"min": 1, "max": 6},
    "decode": {"min": 1, "max": 6},
    "periodSeconds": 1,
    "scaleDownSeconds": 0,
}


class Exporter:
    """/metrics/<pod>: the reference engine's demand series for that pod, counters growing
    at the rate set (so Prometheus' rate() over them is that rate), gauges as set."""

    def __init__(self) -> None:
        self.counters: dict[tuple[str, str], tuple[float, float, float]] = {}
        self.gauges: dict[tuple[str, str], float] = {}

    def rate(self, pod: str, name: str, per_s: float) -> None:
        now = time.monotonic()
        value = self._value(pod, name, now)
        self.counters[(pod, name)] = (value, now, per_s)

    def _value(self, pod: str, name: str, now: float) -> float:
        base, since, per_s = self.counters.get((pod, name), (0.0, now, 0.0))
        return base + per_s * (now - since)

    async def page(self, request: web.Request) -> web.Response:
        pod, now = request.match_info["pod"], time.monotonic()
        lines = []
        for name in ("disagg_prompt_tokens_total", "disagg_generation_tokens_total"):
            lines += [f"# TYPE {name} counter", f"{name} {self._value(pod, name, now)}"]
        for name in ("disagg_requests_running", "disagg_requests_waiting"):
            lines += [f"# TYPE {name} gauge", f"{name} {self.gauges.get((pod, name), 0.0)}"]
        return web.Response(text="\n".join(lines) + "\n")


@pytest.fixture()
async def scraped(tmp_path: Path) -> AsyncIterator[tuple[Exporter, Prometheus]]:
    """The exporter, and Prometheus scraping it every second for pods prefill-0..5 and
    decode-0..5 of deployment demo, labelled as our PodMonitors' targets are."""
    exporter = Exporter()
    app = web.Application()
    app.router.add_get("/metrics/{pod}", exporter.page)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    prom = Prometheus(tmp_path / "prometheus", scrape_interval="1s")
    await prom.start()
    prom.write(
        [
            {
                "targets": [f"127.0.0.1:{port}"],
                "labels": {
                    "job": f"{NS}/demo-{role}",
                    "namespace": NS,
                    "pod": f"demo-{role}-{i}",
                    "__metrics_path__": f"/metrics/demo-{role}-{i}",
                },
            }
            for role in ("prefill", "decode")
            for i in range(6)
        ]
    )
    try:
        yield exporter, prom
    finally:
        prom.stop()
        await runner.cleanup()


def _status(emulator: Emulator) -> dict[str, Any]:
    return (emulator.find(DD, NS, "demo") or {}).get("status") or {}


def _planned(emulator: Emulator) -> dict[str, Any]:
    status = _status(emulator)
    return {r: (status.get(r) or {}).get("plannedReplicas") for r in ("prefill", "decode")}


def _count(emulator: Emulator, role: str) -> int:
    return sum(1 for n in pods(emulator) if n.startswith(f"demo-{role}-"))


async def test_the_planner_sizes_each_pool_from_prometheus_and_scales_down_least_busy_first(
    emulator: Emulator, scraped: tuple[Exporter, Prometheus]
) -> None:
    exporter, prom = scraped
    exporter.rate("demo-prefill-0", "disagg_prompt_tokens_total", 10_000)  # 3 pods of 4500
    exporter.rate("demo-decode-0", "disagg_generation_tokens_total", 1_000)  # 2 pods of 720
    config_map = {"metadata": {"name": "pools"}, "data": {"profile.json": json.dumps(PROFILE)}}
    await api(emulator, "POST", f"/api/v1/namespaces/{NS}/configmaps", config_map)
    async with running(OperatorConfig(host=str(emulator.url).rstrip("/"), autoscale_tick=0.2)):
        spec = quickstart(
            autoscaling={**AUTOSCALING, "prometheusUrl": prom.url},
            monitoring={"enabled": True, "interval": "1s"},
        )
        await api(emulator, "POST", DD_PATH, spec)
        await until("planned 3 + 2", lambda: _planned(emulator) == {"prefill": 3, "decode": 2}, 60)
        await until("3 prefill pods, 2 decode", lambda: (_count(emulator, "prefill"),
                    _count(emulator, "decode")) == (3, 2))  # fmt: skip
        said = _status(emulator)["autoscaling"]
        assert said["reason"] == "ScaleUp" and "prefill 3 (needs 3" in said["message"]
        assert 9_000 <= said["promptTokensPerSecond"] <= 11_000
        # the pods are written before the status that counts them
        await until("status desires 3", lambda: _status(emulator)["prefill"].get("desired") == 3)
        assert (emulator.find(DD, NS, "demo") or {})["spec"]["decode"].get("replicas", 1) == 1

        # the load drops to one prefill's worth: the two least busy prefill pods go
        for pod, busy in (
            ("demo-prefill-0", 2.0),
            ("demo-prefill-1", 0.0),
            ("demo-prefill-2", 9.0),
        ):
            exporter.gauges[(pod, "disagg_requests_running")] = busy
        exporter.rate("demo-prefill-0", "disagg_prompt_tokens_total", 2_000)
        await until("planned prefill 1", lambda: _planned(emulator)["prefill"] == 1, 60)
        await until("one prefill pod left", lambda: _count(emulator, "prefill") == 1)
        assert [n for n in pods(emulator) if "prefill" in n] == ["demo-prefill-2"]  # the busiest


async def test_a_pass_that_cannot_plan_says_why_and_changes_no_count(
    emulator: Emulator, scraped: tuple[Exporter, Prometheus]
) -> None:
    _, prom = scraped
    async with running(OperatorConfig(host=str(emulator.url).rstrip("/"), autoscale_tick=0.2)):
        spec = quickstart(
            autoscaling={**AUTOSCALING, "prometheusUrl": prom.url},
            monitoring={"enabled": True, "interval": "1s"},
        )
        await api(emulator, "POST", DD_PATH, spec)
        said = await until(
            "NoProfile", lambda: (_status(emulator).get("autoscaling") or {}).get("reason")
        )
        assert said == "NoProfile"
        message = _status(emulator)["autoscaling"]["message"]
        assert f"ConfigMap {NS}/pools key profile.json is missing" in message
        assert "disagg bench profile --out" in message
        assert _planned(emulator) == {"prefill": None, "decode": None}
        await until("pods at the spec's counts", lambda: _count(emulator, "decode") == 1)


async def test_in_recommend_mode_the_plan_is_reported_and_the_spec_counts_run(
    emulator: Emulator, scraped: tuple[Exporter, Prometheus]
) -> None:
    exporter, prom = scraped
    exporter.rate("demo-prefill-0", "disagg_prompt_tokens_total", 10_000)
    exporter.rate("demo-decode-0", "disagg_generation_tokens_total", 1_000)
    config_map = {"metadata": {"name": "pools"}, "data": {"profile.json": json.dumps(PROFILE)}}
    await api(emulator, "POST", f"/api/v1/namespaces/{NS}/configmaps", config_map)
    async with running(OperatorConfig(host=str(emulator.url).rstrip("/"), autoscale_tick=0.2)):
        auto = {**AUTOSCALING, "prometheusUrl": prom.url, "mode": "Recommend"}
        spec = quickstart(autoscaling=auto, monitoring={"enabled": True, "interval": "1s"})
        await api(emulator, "POST", DD_PATH, spec)
        await until("planned 3 + 2", lambda: _planned(emulator) == {"prefill": 3, "decode": 2}, 60)
        await until("the spec's counts", lambda: _status(emulator)["decode"].get("desired") == 1)
        assert (_count(emulator, "prefill"), _count(emulator, "decode")) == (1, 1)
        assert _status(emulator)["prefill"]["desired"] == 1
