"""Custom objects (LeaderWorkerSet, PodMonitor, PrometheusRule, InferencePool) against the
shape each contract declares, as a cluster with those CRDs judges them: LWS v0.10.0,
prometheus-operator v0.93.0, gateway-api-inference-extension v1.5.0.

Each shape was held to the upstream CRD it names (type, enum, pattern, bounds, required;
the embedded pod template to Kubernetes 1.36's PodTemplateSpec) and every object rendered
from examples/ to the CRDs themselves by ``scripts/thirdparty-shapes.py``, run against
clones of the three repositories at those tags.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from disagg_operator.contracts import inference_pool, lws, prometheus
from disagg_operator.render.objects import render
from disagg_tools.emulator.rules import builtin, thirdparty
from tests.chart import chartkit
from tests.operator.builders import EXAMPLES, ROOT, body, example, spanning, vllm_gpu_cpu

KEY = "k" * 32
NONE = builtin.Findings([], [])
LLMD = {
    "enabled": True,
    "inferencePool": {"extensionRef": {"name": "epp", "failureMode": "FailOpen"}},
}


def _bodies() -> list[dict[str, Any]]:
    """The examples and the builders that render every third-party kind and option."""
    autoscaling = [ROOT / "examples" / "autoscaling" / n for n in ("deployment.yaml", "slo.yaml")]
    return [
        *(example(path) for path in [*EXAMPLES, *autoscaling]),
        spanning(),
        spanning(gangScheduling={"scheduler": "Volcano", "queue": "q1"}),
        spanning(
            gangScheduling={"scheduler": "Kueue", "queue": "q1"},
            placement={"group": {"topologyKey": "rack", "mode": "Preferred"}},
        ),
        spanning(placement={"group": {"topologyKey": "rack"}}),
        vllm_gpu_cpu(llmd={"enabled": True}),
        vllm_gpu_cpu(llmd=LLMD, monitoring={"enabled": True, "labels": {"release": "kps"}}),
        body(monitoring={"enabled": True}),
        body(monitoring={"enabled": True, "rules": False}, router={"enabled": True}),
    ]


def _rendered() -> list[dict[str, Any]]:
    objects = [o for b in _bodies() for o in render(b, hmac_key=KEY)]
    return [o for o in objects if (o["apiVersion"], o["kind"]) in thirdparty.SHAPES]


def _one(kind: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """The first ``kind`` render makes of ``spec`` (a copy the test may change)."""
    objects = render(spec or _bodies()[0], hmac_key=KEY)
    return copy.deepcopy(next(o for o in objects if o["kind"] == kind))


def _lws() -> dict[str, Any]:
    return _one(lws.KIND, spanning())


def _monitor() -> dict[str, Any]:
    return _one("PodMonitor", body(monitoring={"enabled": True}))


def _rule() -> dict[str, Any]:
    return _one("PrometheusRule", body(monitoring={"enabled": True}))


def _pool() -> dict[str, Any]:
    return _one(inference_pool.KIND, vllm_gpu_cpu(llmd=LLMD))


def test_every_third_party_object_render_makes_passes_its_shape() -> None:
    rendered = _rendered()
    chart_only = {"ServiceMonitor"}  # the chart writes it, the operator never does
    assert {o["kind"] for o in rendered} == {k for _, k in thirdparty.SHAPES} - chart_only
    for obj in rendered:
        assert thirdparty.check(obj) == NONE, (obj["kind"], obj["metadata"]["name"])


def test_the_examples_render_each_kind_they_show() -> None:
    """multinode-*: LeaderWorkerSets; llm-d: an InferencePool; autoscaling: monitoring."""
    kinds = {o["kind"] for p in EXAMPLES for o in render(example(p), hmac_key=KEY)}
    assert {lws.KIND, inference_pool.KIND} <= kinds
    doc = example(ROOT / "examples" / "autoscaling" / "deployment.yaml")
    assert {"PodMonitor", "PrometheusRule"} <= {o["kind"] for o in render(doc, hmac_key=KEY)}


@pytest.mark.parametrize(
    ("make", "where", "unknown"),
    [
        (_lws, ("spec", "leaderWorkerTemplate"), "spec.leaderWorkerTemplate.sise"),
        (_lws, ("spec",), "spec.startupPolicyy"),
        (_monitor, ("spec", "podMetricsEndpoints", 0), "spec.podMetricsEndpoints[0].intervall"),
        (_monitor, ("spec", "selector"), "spec.selector.matchLabel"),
        (_rule, ("spec", "groups", 0, "rules", 0), "spec.groups[0].rules[0].annotation"),
        (_pool, ("spec", "endpointPickerRef"), "spec.endpointPickerRef.failuremode"),
        (_pool, ("spec",), "spec.targetPort"),
        (_pool, ("metadata",), "metadata.lables"),
    ],
)
def test_a_misspelled_field_is_unknown_by_its_path(make: Any, where: tuple, unknown: str) -> None:
    obj = make()
    node = obj
    for part in where:
        node = node[part]
    node[unknown.rsplit(".", 1)[-1]] = "x"
    assert thirdparty.check(obj) == builtin.Findings([unknown], [])


def test_inside_a_pod_template_the_core_schema_judges_and_metadata_is_the_crds_cut() -> None:
    """The CRD embeds PodTemplateSpec with its ObjectMeta cut to name, namespace, labels,
    annotations and finalizers: a template's generateName is pruned, its labels kept."""
    obj = _lws()
    template = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    template["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    template["metadata"]["generateName"] = "w-"
    template["metadata"]["finalizers"] = ["example.com/keep"]
    template["spec"]["terminationGracePeriodSeconds"] = "long"
    found = thirdparty.check(obj)
    assert found.unknown == [
        "spec.leaderWorkerTemplate.workerTemplate.metadata.generateName",
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].imagePullPolicyy",
    ]
    assert len(found.invalid) == 1
    assert found.invalid[0].startswith(
        "spec.leaderWorkerTemplate.workerTemplate.spec.terminationGracePeriodSeconds: 'long'"
    )


def _set(obj: dict[str, Any], where: tuple, value: Any) -> dict[str, Any]:
    node = obj
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = value
    return obj


@pytest.mark.parametrize(
    ("make", "where", "value", "invalid"),
    [
        (_lws, ("spec", "replicas"), "1", "spec.replicas: '1' is not of type 'integer'"),
        (_lws, ("spec", "replicas"), -1, "spec.replicas: -1 is less than the minimum of 0"),
        (_lws, ("spec", "leaderWorkerTemplate", "size"), 2.5, "spec.leaderWorkerTemplate.size:"),
        (_lws, ("spec", "startupPolicy"), "LeaderStarted", "spec.startupPolicy: 'LeaderStarted'"),
        (
            _lws,
            ("spec", "leaderWorkerTemplate", "restartPolicy"),
            "Always",
            "spec.leaderWorkerTemplate.restartPolicy: 'Always' is not one of",
        ),
        (_monitor, ("spec", "podMetricsEndpoints", 0, "interval"), "30 s", "interval: '30 s'"),
        (_monitor, ("spec", "podTargetLabels"), "role", "spec.podTargetLabels: 'role'"),
        (_rule, ("spec", "groups", 0, "name"), "", "spec.groups[0].name: '' should be non-empty"),
        (_rule, ("spec", "groups", 0, "rules", 0, "expr"), ["up"], "rules[0].expr: ['up']"),
        (_rule, ("spec", "groups", 0, "rules", 0, "for"), "ten minutes", "rules[0].for:"),
        (_pool, ("spec", "targetPorts", 0, "number"), 70000, "spec.targetPorts[0].number: 70000"),
        (_pool, ("spec", "targetPorts"), [], "spec.targetPorts: [] should be non-empty"),
        (_pool, ("spec", "endpointPickerRef", "failureMode"), "Open", "failureMode: 'Open'"),
        (_pool, ("spec", "selector", "matchLabels"), {"a": "-x"}, "matchLabels.a: '-x' does not"),
        (_pool, ("metadata", "labels"), "x", "metadata.labels: 'x' is not of type"),
    ],
)
def test_a_wrong_type_value_or_bound_is_invalid_by_its_path(
    make: Any, where: tuple, value: Any, invalid: str
) -> None:
    found = thirdparty.check(_set(make(), where, value))
    assert found.unknown == []
    assert len(found.invalid) == 1 and invalid in found.invalid[0], found.invalid


@pytest.mark.parametrize(
    ("make", "where", "missing"),
    [
        (_lws, ("spec",), "leaderWorkerTemplate"),
        (_lws, ("spec", "leaderWorkerTemplate"), "workerTemplate"),
        (_monitor, ("spec",), "selector"),
        (_monitor, (), "spec"),
        (_rule, ("spec", "groups", 0, "rules", 0), "expr"),
        (_pool, ("spec",), "endpointPickerRef"),
        (_pool, ("spec", "selector"), "matchLabels"),
        (_pool, ("spec", "endpointPickerRef"), "port"),  # the CRD's CEL rule, for a Service
    ],
)
def test_a_missing_required_field_is_invalid(make: Any, where: tuple, missing: str) -> None:
    obj = make()
    node = obj
    for part in where:
        node = node[part]
    del node[missing]
    found = thirdparty.check(obj)
    assert len(found.invalid) == 1 and f"'{missing}' is a required property" in found.invalid[0]


def test_an_expr_is_int_or_string_as_the_crd_types_it() -> None:
    rule = _set(_rule(), ("spec", "groups", 0, "rules", 0, "expr"), 1)
    assert thirdparty.check(rule) == NONE


def test_kinds_no_contract_declares_are_not_judged() -> None:
    pod = _one("Pod", body())
    assert thirdparty.validator("Pod", "v1") is None and thirdparty.check(pod) == NONE
    other = {"apiVersion": "inference.networking.x-k8s.io/v1alpha2", "kind": "InferencePool"}
    assert thirdparty.check({**other, "spec": 1}) == NONE


def test_each_shape_names_its_contracts_release_and_crd_file() -> None:
    """A release bump in a contract must come with its shape read again from that tag."""
    sources = {kind: s["$comment"].split() for (_, kind), s in thirdparty.SHAPES.items()}
    assert sources == {
        lws.KIND: ["kubernetes-sigs/lws", lws.MIN_VERSION, lws.CRD],
        "PodMonitor": [
            "prometheus-operator/prometheus-operator",
            prometheus.MIN_VERSION,
            "example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml",
        ],
        "PrometheusRule": [
            "prometheus-operator/prometheus-operator",
            prometheus.MIN_VERSION,
            "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
        ],
        inference_pool.KIND: [
            "kubernetes-sigs/gateway-api-inference-extension",
            inference_pool.MIN_VERSION,
            inference_pool.CRD,
        ],
        "ServiceMonitor": [
            "prometheus-operator/prometheus-operator",
            prometheus.MIN_VERSION,
            "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
        ],
    }


def test_the_charts_service_monitor_passes_its_shape() -> None:
    values = {"metrics": {"service": {"enabled": True}, "serviceMonitor": {"enabled": True}}}
    objects = chartkit.parse(chartkit.render_files(chartkit.load(), values))
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    assert thirdparty.check(monitor) == NONE
    monitor["spec"]["endpoints"][0]["interval"] = "often"
    assert thirdparty.check(monitor).invalid


def test_every_object_a_shape_lists_the_fields_of_is_closed() -> None:
    """A field the shape does not declare is unknown at every level it declares."""

    def walk(node: Any, where: str) -> list[str]:
        if not isinstance(node, dict):
            return []
        open_ = "properties" in node and node.get("additionalProperties") is not False
        below = [walk(v, f"{where}.{k}") for k, v in node.get("properties", {}).items()]
        below += [walk(node.get(k), f"{where}[]") for k in ("items", "additionalProperties")]
        return [where] * open_ + [w for found in below for w in found]

    assert [w for s in thirdparty.SHAPES.values() for w in walk(s, "")] == []


def test_the_dev_check_script_finds_a_shape_that_is_not_the_crds() -> None:
    """scripts/thirdparty-shapes.py's comparison, on a CRD node written here."""
    from tests.support.scripts import load

    script = load("thirdparty-shapes.py")
    crd = yaml.safe_load(
        """
        type: object
        required: [size]
        properties:
          size: {type: integer, minimum: 1}
          mode: {type: string, enum: [A, B]}
        """
    )
    mine = {"type": "object", "properties": {"size": {"type": "string"}, "mod": {}}}
    assert script.compare(mine, crd, "spec") == [
        "spec: the CRD requires ['size']",
        "spec.size: type string, the CRD's integer",
        "spec.size: minimum None, the CRD's 1",
        "spec.mod: not in the CRD",
    ]
