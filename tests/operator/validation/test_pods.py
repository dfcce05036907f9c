"""spec.<role>.podTemplate and the pass-through fields: what would break a derived
setting, or what the API server would refuse at pod create, is refused by field first."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_operator.validation import spec as validation
from disagg_operator.validation.spec import Problem
from tests.operator.builders import body, role
from tests.operator.overlays import full_template


def _problems(template: dict[str, Any], engine: str = "reference") -> list[Problem]:
    return validation.parse(body(engine=engine, decode=role(podTemplate=template)))[1]


def _engine(**fields: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "engine", **fields}]}}


def test_the_full_template_is_valid_for_both_engines() -> None:
    assert _problems(full_template()) == []
    assert _problems(full_template(), engine="vllm") == []


@pytest.mark.parametrize(
    ("template", "field", "says"),
    [
        (_engine(image="x:1"), "containers[0].image", "spec.decode.image"),
        (_engine(command=["sh"]), "containers[0].command", "spec.decode.args"),
        (_engine(ports=[{"containerPort": 1}]), "containers[0].ports", "derives the ports"),
        (_engine(readinessProbe={"exec": {"command": ["true"]}}), ".readinessProbe", "readiness"),
        (_engine(lifecycle={}), "containers[0].lifecycle", "spec.decode.drainSeconds"),
        (_engine(resources={"limits": {"cpu": "1"}}), ".resources", "spec.decode.resources"),
        (_engine(env=[{"name": "A", "value": "1"}]), "containers[0].env", "spec.decode.env"),
        (_engine(stdin=True), "containers[0].stdin", "takes only"),
        (
            _engine(volumeMounts=[{"name": "nope", "mountPath": "/x"}]),
            "volumeMounts[0].name",
            "no volume named 'nope'",
        ),
        (
            {
                "spec": {
                    "volumes": [{"name": "v", "emptyDir": {}}],
                    "containers": [
                        {
                            "name": "engine",
                            "volumeMounts": [{"name": "v", "mountPath": "/etc/disagg/handshake"}],
                        }
                    ],
                }
            },
            "volumeMounts[0].mountPath",
            "the engine's own mount",
        ),
        (
            {"spec": {"volumes": [{"name": "handshake", "emptyDir": {}}]}},
            "volumes[0].name",
            "the engine's volume",
        ),
        ({"spec": {"volumes": [{"name": "v"}]}}, "spec.volumes[0]", "exactly one volume source"),
        (
            {"spec": {"volumes": [{"name": "v", "emptyDir": {}, "secret": {"secretName": "s"}}]}},
            "spec.volumes[0]",
            "got emptyDir, secret",
        ),
        ({"spec": {"volumes": [{"name": "V_1", "emptyDir": {}}]}}, "volumes[0].name", "DNS label"),
        (
            {"spec": {"volumes": [{"name": "v", "emptyDir": {"medium": 3}}]}},
            "emptyDir.medium",
            "string",
        ),
        ({"spec": {"volumes": [{"name": "v", "pvc": {}}]}}, "volumes[0].pvc", "unknown field"),
        ({"spec": {"containers": [{"name": "side"}]}}, "containers[0].image", "needs an image"),
        (
            {
                "spec": {
                    "containers": [
                        {"name": "side", "image": "x:1", "ports": [{"containerPort": 8000}]}
                    ]
                }
            },
            "ports[0].containerPort",
            "derived port",
        ),
        ({"spec": {"containers": [{"image": "x:1"}]}}, "containers[0].name", "required"),
        (
            {
                "spec": {
                    "containers": [
                        {
                            "name": "s",
                            "image": "x",
                            "env": [
                                {
                                    "name": "A",
                                    "value": "1",
                                    "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                                }
                            ],
                        }
                    ]
                }
            },
            "env[0]",
            "both value and valueFrom",
        ),
        (
            {"spec": {"initContainers": [{"name": "engine", "image": "x:1"}]}},
            "initContainers[0].name",
            "rename",
        ),
        (
            {"spec": {"terminationGracePeriodSeconds": 5}},
            "terminationGracePeriodSeconds",
            "shorter than the pod's settle and drain",
        ),
        (
            {"spec": {"securityContext": {"runAsUser": "root"}}},
            "securityContext.runAsUser",
            "integer",
        ),
        (
            {"spec": {"imagePullSecrets": [{"nam": "r"}]}},
            "imagePullSecrets[0].nam",
            "unknown field",
        ),
        (
            {"metadata": {"labels": {"disagg.dev/role": "x"}}},
            "labels[disagg.dev/role]",
            "operator's key",
        ),
        (
            {"metadata": {"annotations": {"disagg.dev/spec-hash": "x"}}},
            "annotations[disagg.dev/spec-hash]",
            "operator's key",
        ),
        (
            {"metadata": {"labels": {"llm-d.ai/role": "x"}}},
            "labels[llm-d.ai/role]",
            "operator's key",
        ),
        (
            {"spec": {"nodeSelector": {"a": "b"}}},
            "spec.decode.podTemplate.spec",
            "spec.<role>.nodeSelector",
        ),
        ({"spec": {"hostNetwork": True}}, "spec.decode.podTemplate.spec", "own network"),
        ({"spec": {"dnsPolicy": "None"}}, "spec.dnsPolicy", "unknown field"),
    ],
)
def test_what_would_break_a_derived_setting_is_refused_by_field(
    template: dict[str, Any], field: str, says: str
) -> None:
    problems = _problems(template)
    assert len(problems) == 1, problems
    assert field in problems[0].field and says in problems[0].message, problems[0]
    assert problems[0].field.startswith("spec.decode.podTemplate")


def test_the_model_sources_volume_mount_and_download_are_the_operators() -> None:
    obj = body(
        engine="vllm",
        decode=role(
            podTemplate={
                "spec": {
                    "volumes": [{"name": "model", "emptyDir": {}}, {"name": "v", "emptyDir": {}}],
                    "initContainers": [{"name": "model-download", "image": "x:1"}],
                    "containers": [
                        {
                            "name": "engine",
                            "volumeMounts": [{"name": "v", "mountPath": "/mnt/models"}],
                        }
                    ],
                }
            }
        ),
    )
    obj["spec"]["model"] = "hf://org/name"
    fields = sorted(p.field for p in validation.parse(obj)[1])
    at = "spec.decode.podTemplate.spec"
    assert fields == [
        f"{at}.containers[0].volumeMounts[0].mountPath",
        f"{at}.initContainers[0].name",
        f"{at}.volumes[0].name",
    ]


def test_a_sidecar_or_canary_container_takes_resources_and_env() -> None:
    template = {
        "spec": {
            "containers": [
                {
                    "name": "transfer-canary",
                    "resources": {"limits": {"memory": "256Mi"}},
                    "env": [{"name": "A", "value": "1"}],
                }
            ]
        }
    }
    assert _problems(template) == []


def test_an_invalid_template_is_never_rendered() -> None:
    from disagg_operator.render import objects as render

    with pytest.raises(validation.InvalidSpec) as e:
        render.render(body(decode=role(podTemplate=_engine(image="x:1"))), hmac_key="k" * 32)
    assert any("podTemplate" in p.field for p in e.value.problems)
