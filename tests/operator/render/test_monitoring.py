"""spec.monitoring: the PodMonitors scrape ports the rendered pods declare, on the pods the
operator renders; the NetworkPolicy admits Prometheus to exactly those ports; the
PrometheusRule's groups pass Debian's `promtool check rules`, and `promtool test rules`
fires each alert on series labelled as the PodMonitors' targets would be (namespace, pod,
and the job ``<namespace>/<PodMonitor name>``) and not on another deployment's. Each alert
reads its engine's own series and is left out where no pod exports one; the canary's port
and alerts come only where decode pods run a canary (whether the series are the ones the
processes really export: test_alerts.py).

The Prometheus Operator objects follow prometheus-operator v0.93.0's CRDs
(:mod:`disagg_operator.contracts.prometheus` states what render relies on); no cluster or
Prometheus Operator runs here."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_operator.contracts import prometheus
from disagg_operator.engines.settings import DEFAULT, Settings
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, by_kind, role, vllm_gpu_cpu
from tests.support.toy_engine.engine import Toy

KEY = "k" * 32
ON = {"enabled": True, "labels": {"release": "kube-prometheus-stack"}}
LLMD = {"enabled": True, "routingSidecar": {"enabled": True, "image": "x:1"}}
WITH_CANARY = dataclasses.replace(DEFAULT, canary_image="example.com/disagg-worker:1")


def _objects(obj: dict[str, Any], settings: Settings = DEFAULT) -> list[dict[str, Any]]:
    return render(obj, hmac_key=KEY, settings=settings)


def _monitors(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in by_kind(objects, "PodMonitor")}


def _selected(selector: dict[str, str], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if selector.items() <= p["metadata"]["labels"].items()]


def _port_names(pod_spec: dict[str, Any]) -> set[str]:
    return {p["name"] for c in pod_spec["containers"] for p in c.get("ports", []) if "name" in p}


def test_nothing_without_monitoring() -> None:
    for obj in (body(), body(monitoring={"enabled": False})):
        kinds = {o["kind"] for o in _objects(obj)}
        assert not kinds & {"PodMonitor", "PrometheusRule"}


def test_each_role_is_scraped_on_ports_its_pods_declare() -> None:
    objects = _objects(body(decode=role(replicas=2), router={"enabled": True}, monitoring=ON))
    monitors = _monitors(objects)
    assert sorted(monitors) == ["demo-decode", "demo-prefill", "demo-router"]
    pods = by_kind(objects, "Pod")
    for role_name in ("prefill", "decode"):
        m = monitors[f"demo-{role_name}"]
        assert m["apiVersion"] == prometheus.API_VERSION
        assert m["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        selector = m["spec"]["selector"]["matchLabels"]
        chosen = _selected(selector, pods)
        assert chosen and all(
            p["metadata"]["labels"]["disagg.dev/role"] == role_name for p in chosen
        )
        for endpoint in m["spec"]["podMetricsEndpoints"]:
            assert endpoint["path"] == "/metrics"
            assert prometheus.DURATION.match(endpoint["interval"]), endpoint
            for pod in chosen:  # a port name no pod declares gives no target at all
                assert endpoint["port"] in _port_names(pod["spec"]), (endpoint, pod["metadata"])
        for label in m["spec"]["podTargetLabels"]:
            assert all(label in p["metadata"]["labels"] for p in chosen)
    scraped = {e["port"] for e in monitors["demo-decode"]["spec"]["podMetricsEndpoints"]}
    assert scraped == {"metrics", "canary"}  # the engine's /metrics-only port and the canary
    router = monitors["demo-router"]
    (deployment,) = by_kind(objects, "Deployment")
    template = deployment["spec"]["template"]
    assert router["spec"]["selector"]["matchLabels"] == template["metadata"]["labels"]
    assert [e["port"] for e in router["spec"]["podMetricsEndpoints"]] == ["http"]
    assert "http" in _port_names(template["spec"])


@pytest.mark.parametrize(("engine_type", "port"), [("vllm", "engine"), ("reference", "metrics")])
def test_behind_the_routing_sidecar_decode_is_scraped_on_the_engines_own_port(
    engine_type: str, port: str
) -> None:
    obj = body(engine=engine_type, llmd=LLMD, monitoring=ON)
    objects = _objects(obj)
    decode = _monitors(objects)["demo-decode"]
    (pod,) = _selected(decode["spec"]["selector"]["matchLabels"], by_kind(objects, "Pod"))
    engine = next(c for c in pod["spec"]["containers"] if c["name"] == "engine")
    ports = [e["port"] for e in decode["spec"]["podMetricsEndpoints"]]
    # the engine's /metrics, not the sidecar's port in front of it (no series twice)
    assert ports[0] == port and ports[0] in {p["name"] for p in engine["ports"]}


@pytest.mark.parametrize(
    ("obj", "settings", "decode_ports"),
    [
        (vllm_gpu_cpu(monitoring=ON), DEFAULT, ["http"]),  # vLLM without a canary image
        (vllm_gpu_cpu(monitoring=ON), WITH_CANARY, ["http", "canary"]),
        (body(transferCanary={"enabled": False}, monitoring=ON), DEFAULT, ["metrics"]),
    ],
    ids=["vllm-no-canary-image", "vllm-canary", "reference-canary-off"],
)
def test_the_canary_port_is_scraped_only_where_a_canary_runs(
    obj: dict[str, Any], settings: Settings, decode_ports: list[str]
) -> None:
    objects = _objects(obj, settings)
    decode = _monitors(objects)["demo-decode"]
    ports = [e["port"] for e in decode["spec"]["podMetricsEndpoints"]]
    assert ports == decode_ports
    pods = _selected(decode["spec"]["selector"]["matchLabels"], by_kind(objects, "Pod"))
    assert pods and all(set(ports) <= _port_names(p["spec"]) for p in pods)
    alerts = {r["alert"] for g in _rules_of(objects)["groups"] for r in g["rules"]}
    canary_alerts = {"DisaggTransferPathFailing", "DisaggDecodeUnproven"}
    assert canary_alerts & alerts == (canary_alerts if "canary" in ports else set())


def test_the_network_policy_admits_prometheus_to_the_scraped_ports_only() -> None:
    obj = body(monitoring={**ON, "prometheusNamespace": "observability"})
    (policy,) = by_kind(_objects(obj), "NetworkPolicy")
    admitted = [
        rule
        for rule in policy["spec"]["ingress"]
        if {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}
        in rule.get("from", [])
    ]
    (rule,) = admitted
    # the reference worker's /metrics-only port and the canary's: never the serving port
    assert sorted(p["port"] for p in rule["ports"]) == [8090, 9400]
    (plain,) = by_kind(_objects(body()), "NetworkPolicy")
    assert len(plain["spec"]["ingress"]) == len(policy["spec"]["ingress"]) - 1
    vllm = vllm_gpu_cpu(monitoring={**ON, "prometheusNamespace": "observability"})
    for settings, ports in ((WITH_CANARY, [8000, 8090]), (DEFAULT, [8000])):
        (policy,) = by_kind(_objects(vllm, settings), "NetworkPolicy")
        (rule,) = [r for r in policy["spec"]["ingress"] if _from_ns(r)]
        # vLLM: its serving port; the canary's only where decode pods run one
        assert sorted(p["port"] for p in rule["ports"]) == ports


def _from_ns(rule: dict[str, Any]) -> bool:
    where = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}
    return where in rule.get("from", [])


def test_the_reference_engine_is_scraped_on_its_metrics_only_port() -> None:
    objects = _objects(body(monitoring=ON))
    prefill = _monitors(objects)["demo-prefill"]
    assert [e["port"] for e in prefill["spec"]["podMetricsEndpoints"]] == ["metrics"]
    (pod,) = _selected(prefill["spec"]["selector"]["matchLabels"], by_kind(objects, "Pod"))
    engine = next(c for c in pod["spec"]["containers"] if c["name"] == "engine")
    assert {"name": "metrics", "containerPort": 9400, "protocol": "TCP"} in engine["ports"]
    assert {"name": "DISAGG_METRICS_PORT", "value": "9400"} in engine["env"]


@pytest.mark.parametrize(
    ("monitoring", "field"),
    [
        ({"enabled": True, "interval": "30 seconds"}, "spec.monitoring.interval"),
        (
            {"enabled": True, "prometheusNamespace": "Not_A_Namespace"},
            "spec.monitoring.prometheusNamespace",
        ),
        ({"enabled": True, "labels": {"release": 3}}, "spec.monitoring.labels"),
    ],
)
def test_bad_monitoring_fields_are_refused_by_name(monitoring: dict[str, Any], field: str) -> None:
    dd, problems = validation.parse(body(monitoring=monitoring))
    assert dd is None or problems
    assert any(p.field.startswith(field) for p in problems), problems


def _rules(obj: dict[str, Any], settings: Settings = DEFAULT) -> dict[str, Any]:
    return _rules_of(_objects(obj, settings))


def _rules_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (rule,) = by_kind(objects, "PrometheusRule")
    assert rule["apiVersion"] == prometheus.API_VERSION
    for group in rule["spec"]["groups"]:
        assert group["name"]
        for r in group["rules"]:
            assert r["expr"] and prometheus.DURATION.match(r["for"])
    return {"groups": rule["spec"]["groups"]}


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60)


def test_the_rules_pass_promtool_check_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(_rules(body(router={"enabled": True}, monitoring=ON))))
    done = _promtool("check", "rules", str(rules))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 5 rules found" in done.stdout
    # the same check refuses a broken expression: it is really judging
    broken = yaml.safe_load(rules.read_text())
    broken["groups"][0]["rules"][0]["expr"] = "min by (pod) (disagg_canary_passing{"
    rules.write_text(yaml.safe_dump(broken))
    assert _promtool("check", "rules", str(rules)).returncode != 0


def _series(namespace: str, job: str, pod: str, metric: str, values: str) -> dict[str, str]:
    return {
        "series": f'{metric}{{namespace="{namespace}", job="{job}", pod="{pod}"}}',
        "values": values,
    }


def _expected(rules: dict[str, Any], alert: str, **labels: str) -> dict[str, Any]:
    """An alert as promtool reports it: ``labels`` beside the rule's own, and the rule's
    annotations with the pod label filled in."""
    rule = next(r for g in rules["groups"] for r in g["rules"] if r.get("alert") == alert)
    pod = labels.get("pod", "")
    notes = {k: v.replace("{{ $labels.pod }}", pod) for k, v in rule["annotations"].items()}
    return {"exp_labels": {**rule["labels"], **labels}, "exp_annotations": notes}


def test_the_alerts_fire_on_this_deployments_series_only(tmp_path: Path) -> None:
    rules = _rules(body(router={"enabled": True}, monitoring=ON))
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    decode, prefill = prometheus.job("ns", "demo-decode"), prometheus.job("ns", "demo-prefill")
    other = prometheus.job("ns", "other-decode")
    series = [
        _series("ns", decode, "demo-decode-0", "disagg_canary_passing", "1 1 0x20"),
        _series("ns", decode, "demo-decode-0", "disagg_canary_ready", "1x20"),
        _series("ns", decode, "demo-decode-1", "disagg_canary_ready", "0x20"),
        _series("ns", other, "other-decode-0", "disagg_canary_passing", "0x20"),
        _series("ns", decode, "demo-decode-0", "disagg_decode_recomputed_total", "0+1x20"),
        _series("ns", prefill, "demo-prefill-0", "disagg_requests_waiting", "3x20"),
    ]
    test = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {
                        "eval_time": "9m",  # failing since minute 2: past its 5 minutes
                        "alertname": "DisaggTransferPathFailing",
                        "exp_alerts": [
                            _expected(
                                rules,
                                "DisaggTransferPathFailing",
                                namespace="ns",
                                pod="demo-decode-0",
                            )
                        ],
                    },
                    {"eval_time": "5m", "alertname": "DisaggTransferPathFailing", "exp_alerts": []},
                    {
                        "eval_time": "16m",
                        "alertname": "DisaggDecodeUnproven",
                        "exp_alerts": [
                            _expected(
                                rules, "DisaggDecodeUnproven", namespace="ns", pod="demo-decode-1"
                            )
                        ],
                    },
                    {
                        "eval_time": "16m",
                        "alertname": "DisaggDecodeRecomputing",
                        "exp_alerts": [_expected(rules, "DisaggDecodeRecomputing")],
                    },
                    {
                        "eval_time": "16m",
                        "alertname": "DisaggPrefillQueueing",
                        "exp_alerts": [_expected(rules, "DisaggPrefillQueueing")],
                    },
                ],
            }
        ],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test))
    done = _promtool("test", "rules", str(tmp_path / "test.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr


def _alerts(obj: dict[str, Any], settings: Settings = DEFAULT) -> dict[str, str]:
    return {r["alert"]: r["expr"] for g in _rules(obj, settings)["groups"] for r in g["rules"]}


def test_each_alert_reads_the_engines_own_series_and_is_left_out_where_none_feeds_it() -> None:
    canary = {"DisaggTransferPathFailing", "DisaggDecodeUnproven"}
    reference = _alerts(body(monitoring=ON))
    assert set(reference) == {*canary, "DisaggDecodeRecomputing", "DisaggKVTransferFailing",
                              "DisaggPrefillQueueing"}  # fmt: skip
    assert "disagg_requests_waiting{" in reference["DisaggPrefillQueueing"]
    assert "disagg_decode_recomputed_total{" in reference["DisaggDecodeRecomputing"]
    assert "disagg_proxy_" not in reference["DisaggDecodeRecomputing"]  # no router
    # vLLM counts no recomputed request: without the router nothing feeds that alert
    alone = _alerts(vllm_gpu_cpu(monitoring=ON))
    assert set(alone) == {"DisaggKVTransferFailing", "DisaggPrefillQueueing", *LEASE,
                          "DisaggKVDescriptorBlowup"}  # fmt: skip
    assert "vllm:nixl_num_descriptors_sum{" in alone["DisaggKVDescriptorBlowup"]
    assert "vllm:num_requests_waiting{" in alone["DisaggPrefillQueueing"]
    assert "vllm:nixl_num_failed_transfers_total{" in alone["DisaggKVTransferFailing"]
    routed = _alerts(vllm_gpu_cpu(router={"enabled": True}, monitoring=ON), WITH_CANARY)
    assert set(routed) == {*canary, *alone, "DisaggDecodeRecomputing"}
    assert routed["DisaggDecodeRecomputing"].startswith(
        'sum(rate(disagg_proxy_decode_recomputed_total{namespace="ns", job="ns/demo-router"}'
    )
    assert " or " not in routed["DisaggDecodeRecomputing"]  # the router's series alone
    # vLLM 0.11.0 has no NIXL series: no transfer-failure alert
    old = body(
        engine="vllm",
        prefill=role("cuda", resources={"limits": {"nvidia.com/gpu": 1}}),
        decode=role("cuda", resources={"limits": {"nvidia.com/gpu": 1}}),
        monitoring=ON,
    )
    old["spec"]["engine"]["version"] = "0.11.0"
    assert set(_alerts(old)) == {"DisaggPrefillQueueing"}


LEASE = {"DisaggKVNotificationsFailing", "DisaggKVLeaseExpiring", "DisaggKVReadAfterExpiry"}


@pytest.mark.parametrize(
    ("version", "lease_alerts"),
    [
        ("0.11.1", {"DisaggKVNotificationsFailing"}),
        ("0.14.1", {"DisaggKVNotificationsFailing"}),
        ("0.15.0", {"DisaggKVNotificationsFailing", "DisaggKVLeaseExpiring"}),
        ("0.31.0", {"DisaggKVNotificationsFailing", "DisaggKVLeaseExpiring"}),
        ("0.32.0", LEASE),
        ("0.40.0", LEASE),  # newer than the newest checked: read as the newest
    ],
)
def test_vllm_lease_alerts_follow_the_counters_each_version_defines(
    version: str, lease_alerts: set[str]
) -> None:
    gpu = role("cuda", resources={"limits": {"nvidia.com/gpu": 1}})
    obj = body(engine="vllm", prefill=gpu, decode=copy.deepcopy(gpu), monitoring=ON)
    obj["spec"]["engine"]["version"] = version
    alerts = _alerts(obj)
    assert set(alerts) & LEASE == lease_alerts
    jobs = ('{namespace="ns", job="ns/demo-prefill"}', '{namespace="ns", job="ns/demo-decode"}')
    series = {
        "DisaggKVNotificationsFailing": "rate(vllm:nixl_num_failed_notifications_total",
        "DisaggKVLeaseExpiring": "rate(vllm:nixl_num_kv_expired_reqs_total",
        "DisaggKVReadAfterExpiry": "increase(vllm:nixl_num_notifications_after_expiry_total",
    }
    for alert in lease_alerts:  # either pool's counter, summed
        assert all(f"{series[alert]}{job}[5m])" in alerts[alert] for job in jobs), alerts[alert]


def test_an_engine_that_declares_no_series_gets_only_the_canary_and_router_alerts() -> None:
    settings = Settings(canary_image="example.com/disagg:1").with_engines(Toy())
    toy = body(engine="toy", router={"enabled": True}, monitoring=ON)
    toy["spec"]["model"] = "toy"
    alerts = _alerts(toy, settings)
    assert set(alerts) == {"DisaggTransferPathFailing", "DisaggDecodeUnproven",
                           "DisaggDecodeRecomputing"}  # fmt: skip
    assert alerts["DisaggDecodeRecomputing"].startswith("sum(rate(disagg_proxy_")
