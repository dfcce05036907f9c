"""spec.<role>.podTemplate merged over the derived pods."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate

from disagg_operator.api import corev1
from disagg_operator.render import crd
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, role
from tests.operator.overlays import MODELS_PVC, full_template

KEY = "k" * 32


def _pods(obj: dict[str, Any], role_name: str) -> list[dict[str, Any]]:
    return [
        o
        for o in render(obj, hmac_key=KEY)
        if o["kind"] == "Pod" and o["metadata"]["labels"]["disagg.dev/role"] == role_name
    ]


def _containers(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in pod["spec"]["containers"]}


def test_every_overlay_field_reaches_the_roles_pods_and_only_them() -> None:
    plain = _pods(body(), "decode")[0]
    obj = body(decode=role(replicas=2, podTemplate=full_template()))
    pods = _pods(obj, "decode")
    assert len(pods) == 2
    for pod in pods:
        spec = pod["spec"]
        assert spec["serviceAccountName"] == "model-reader"
        assert spec["imagePullSecrets"] == [{"name": "registry"}]
        assert spec["priorityClassName"] == "inference"
        assert spec["runtimeClassName"] == "nvidia"
        assert spec["terminationGracePeriodSeconds"] == 600
        # derived volumes first, then the template's
        assert spec["volumes"] == [*plain["spec"]["volumes"], MODELS_PVC, spec["volumes"][-1]]
        assert [c["name"] for c in spec["initContainers"]] == ["warm"]
        # the pod security context is merged: the derived keys stay, the user's are added
        assert spec["securityContext"] == {**plain["spec"]["securityContext"], "fsGroup": 2000}
        assert pod["metadata"]["labels"]["team"] == "ml"
        assert pod["metadata"]["annotations"]["example.com/owner"] == "ml"
        # the operator's labels are kept
        assert pod["metadata"]["labels"]["disagg.dev/role"] == "decode"
    assert "serviceAccountName" not in _pods(obj, "prefill")[0]["spec"]


def test_a_derived_container_is_merged_by_name_and_an_extra_one_appended() -> None:
    plain = _containers(_pods(body(), "decode")[0])
    merged = _containers(_pods(body(decode=role(podTemplate=full_template())), "decode")[0])
    assert list(merged) == [*plain, "log-shipper"]
    engine, before = merged["engine"], plain["engine"]
    assert engine["volumeMounts"] == [
        *before["volumeMounts"],
        {"name": "models", "mountPath": "/mnt/models", "readOnly": True},
    ]
    # merged key by key: the template's capabilities replace the derived ones, the rest stays
    assert engine["securityContext"] == {
        **before["securityContext"],
        "capabilities": {"add": ["SYS_PTRACE"], "drop": ["ALL"]},
    }
    assert engine["livenessProbe"]["httpGet"]["path"] == "/health"
    # what the operator derives is untouched
    for key in ("command", "env", "ports", "readinessProbe", "lifecycle", "image"):
        assert engine.get(key) == before.get(key), key
    assert merged["transfer-canary"] == plain["transfer-canary"]


def test_the_grace_period_is_only_raised() -> None:
    derived = _pods(body(), "decode")[0]["spec"]["terminationGracePeriodSeconds"]
    longer = {"spec": {"terminationGracePeriodSeconds": derived + 100}}
    pod = _pods(body(decode=role(podTemplate=longer)), "decode")[0]
    assert pod["spec"]["terminationGracePeriodSeconds"] == derived + 100


def test_an_overlay_change_rolls_the_pods_and_an_empty_one_does_not() -> None:
    def revision(template: dict[str, Any] | None) -> tuple[str, str]:
        extra = {} if template is None else {"podTemplate": template}
        pod = _pods(body(decode=role(**extra)), "decode")[0]
        return pod["metadata"]["labels"]["disagg.dev/revision"], pod["metadata"]["annotations"][
            "disagg.dev/spec-hash"
        ]

    base = revision(None)
    assert revision({}) == base == revision({"spec": {}, "metadata": {}})
    annotated = revision({"metadata": {"annotations": {"a": "1"}}})
    assert annotated[0] != base[0] and annotated[1] != base[1]
    assert revision({"metadata": {"annotations": {"a": "2"}}}) != annotated
    assert revision({"spec": {"serviceAccountName": "x"}})[0] != base[0]


def test_overlaid_pods_pass_the_upstream_pod_schema() -> None:
    for engine in ("reference", "vllm"):
        template = copy.deepcopy(full_template())
        obj = body(
            engine=engine, prefill=role(podTemplate=template), decode=role(podTemplate=template)
        )
        for child in render(obj, hmac_key=KEY):
            if child["kind"] == "Pod":
                kubernetes_validate.validate(child, "1.31.0", strict=True)


def test_fields_of_newer_kubernetes_releases_are_kept_and_rendered() -> None:
    """The overlay carries core/v1 of Kubernetes 1.36 (api/corev1.json): fields added in
    1.32-1.34 reach the pods, and the CRD declares them, so an API server neither refuses
    them under kubectl's strict field validation nor prunes them under Helm's."""
    shipper = {
        "name": "log-shipper",
        "image": "example.com/shipper:1",
        "lifecycle": {"stopSignal": "SIGUSR1"},  # 1.33
        "env": [
            {
                "name": "TOKEN",  # 1.34
                "valueFrom": {
                    "fileKeyRef": {"volumeName": "extra", "path": "t.env", "key": "TOKEN"}
                },
            }
        ],
    }
    waiter = {
        "name": "warm",
        "image": "busybox:1",
        "restartPolicy": "Always",
        "restartPolicyRules": [  # 1.34
            {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}
        ],
    }
    template = {
        "spec": {
            "volumes": [{"name": "extra", "emptyDir": {}}],
            "securityContext": {"seLinuxChangePolicy": "Recursive"},  # 1.32
            "initContainers": [waiter],
            "containers": [shipper],
        }
    }
    obj = body(decode=role(podTemplate=template))
    assert validation.parse(obj)[1] == []
    pod = _pods(obj, "decode")[0]
    kubernetes_validate.validate(pod, corev1.KUBERNETES, strict=True)
    assert _containers(pod)["log-shipper"]["lifecycle"] == {"stopSignal": "SIGUSR1"}
    assert _containers(pod)["log-shipper"]["env"] == shipper["env"]
    assert pod["spec"]["initContainers"][-1]["restartPolicyRules"] == waiter["restartPolicyRules"]
    assert pod["spec"]["securityContext"]["seLinuxChangePolicy"] == "Recursive"
    schema = crd.build()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    overlay = schema["properties"]["spec"]["properties"]["decode"]["properties"]["podTemplate"]
    container = overlay["properties"]["spec"]["properties"]["containers"]["items"]
    assert "stopSignal" in container["properties"]["lifecycle"]["properties"]
    assert "restartPolicyRules" in container["properties"]
