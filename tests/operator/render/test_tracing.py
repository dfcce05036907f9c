"""``spec.tracing`` rendered: the router exports to the endpoint (its flag) with the
sampler's variables, the reference workers read all three, and without the field nothing
of it is rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_operator.render.objects import render
from disagg_worker.serve.proxy.app import _parser as proxy_parser

ROOT = Path(__file__).resolve().parents[3]


def _objects(example: str, **spec: Any) -> list[dict[str, Any]]:
    body: dict[str, Any] = yaml.safe_load((ROOT / "examples" / example).read_text())
    body["metadata"].update(namespace="default", uid="u")
    body["spec"].update(spec)
    return list(render(body, hmac_key="k"))


def _router(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (dep,) = [
        o
        for o in objects
        if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-router")
    ]
    container: dict[str, Any] = dep["spec"]["template"]["spec"]["containers"][0]
    return container


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def test_the_router_and_the_workers_export_where_spec_tracing_says() -> None:
    objects = _objects("tracing-cpu.yaml")
    router = _router(objects)
    args = proxy_parser().parse_args(router["args"])  # the proxy's own parser reads them
    assert args.otlp_traces_endpoint == "http://otel-collector.observability:4318/v1/traces"
    sampler = {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"}
    assert _env(router) == sampler
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert len(pods) == 2
    for pod in pods:
        env = _env(pod["spec"]["containers"][0])
        assert env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == args.otlp_traces_endpoint
        assert {k: env[k] for k in sampler} == sampler


@pytest.mark.parametrize("example", ["quickstart-cpu.yaml", "routing-threshold-cpu.yaml"])
def test_no_tracing_renders_nothing_of_it(example: str) -> None:
    objects = _objects(example, router={"enabled": True})
    assert "--otlp-traces-endpoint" not in _router(objects)["args"]
    for pod in (o for o in objects if o["kind"] == "Pod"):
        assert not any(k.startswith("OTEL_") for k in _env(pod["spec"]["containers"][0]))
