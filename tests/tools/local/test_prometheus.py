"""The local Prometheus' targets: our rendered PodMonitors over rendered pods, labelled
as the Prometheus Operator labels a PodMonitor's targets."""

from __future__ import annotations

from disagg_operator.render.objects import render
from disagg_tools.local.prometheus import targets, version
from tests.operator.builders import body, by_kind, role


def test_each_running_pod_is_a_target_of_its_roles_podmonitor_on_its_metrics_port() -> None:
    objs = render(body(monitoring={"enabled": True}, decode=role(replicas=2)), hmac_key="k")
    monitors = [m for m in by_kind(objs, "PodMonitor") if m["metadata"]["name"] != "demo-router"]
    pods = by_kind(objs, "Pod")
    for n, pod in enumerate(pods):
        pod["status"] = {"podIP": f"127.0.1.{n + 1}"}
    pods[-1]["status"] = {}  # not scheduled yet: no address, no target
    groups = targets(monitors, pods)
    by_pod = {(g["labels"]["pod"], g["labels"]["endpoint"]): g for g in groups}
    assert sorted(by_pod) == [
        ("demo-decode-0", "canary"),
        ("demo-decode-0", "metrics"),
        ("demo-prefill-0", "metrics"),
    ]
    prefill = by_pod[("demo-prefill-0", "metrics")]
    assert prefill["targets"] == ["127.0.1.1:9400"]
    assert prefill["labels"]["job"] == "ns/demo-prefill"
    assert prefill["labels"]["disagg_dev_role"] == "prefill"
    assert prefill["labels"]["container"] == "engine"
    assert by_pod[("demo-decode-0", "canary")]["labels"]["job"] == "ns/demo-decode"


def test_the_installed_prometheus_says_its_version() -> None:
    assert version().count(".") >= 2
