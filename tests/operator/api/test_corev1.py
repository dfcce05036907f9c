"""The core/v1 schemas the spec passes through: generated from Kubernetes' definitions,
embedded in the CRD, and checked by the operator the way an OpenAPI validator does."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from openapi_schema_validator import OAS30Validator

from disagg_operator.api import corev1
from disagg_operator.render import crd
from disagg_operator.validation import corev1 as check
from tests.operator.builders import ROOT
from tests.support.scripts import load


def _generator() -> Any:
    return load("corev1-schemas.py")


def test_the_committed_schemas_are_the_definitions_of_the_named_version() -> None:
    generator = _generator()
    assert (ROOT / "operator/disagg_operator/api/corev1.json").read_text() == generator.text(), (
        "operator/disagg_operator/api/corev1.json is stale: run scripts/corev1-schemas.py"
    )
    assert corev1.KUBERNETES == generator.KUBERNETES


def test_the_crd_carries_them_where_the_spec_passes_them_through() -> None:
    spec = crd.openapi_schema()["properties"]["spec"]["properties"]
    template = spec["decode"]["properties"]["podTemplate"]["properties"]["spec"]["properties"]
    assert crd._upstream_kind(template["volumes"]["items"]) == "Volume"
    assert crd._upstream_kind(template["containers"]["items"]) == "Container"
    assert crd._upstream_kind(spec["prefill"]["properties"]["affinity"]) == "Affinity"


def _strict(schema: Any) -> Any:
    """The structural schema as an OpenAPI 3.0 validator reads it, with the API server's
    strict field validation (unknown fields refused) and int-or-string spelled out."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items() if k != "x-kubernetes-int-or-string"}
    if "properties" in schema:
        out["properties"] = {k: _strict(v) for k, v in schema["properties"].items()}
        out["additionalProperties"] = False
    if schema.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    return out


GOOD: dict[str, Any] = {
    "Volume": {"name": "m", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}},
    "Container": {
        "name": "c",
        "image": "x:1",
        "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": "1", "memory": 2}},
        "livenessProbe": {"httpGet": {"path": "/", "port": "http"}},
        "volumeMounts": [{"name": "m", "mountPath": "/m"}],
    },
    "Affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "k", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    },
    "PodSecurityContext": {"fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}},
}


def _mutations(value: Any) -> list[Any]:
    """Broken copies of ``value``: each scalar replaced by a wrong type, each object given
    an unknown field and stripped of each key in turn."""
    out: list[Any] = []
    if isinstance(value, dict):
        out.append({**value, "bogusField": 1})
        for key in value:
            out.append({k: v for k, v in value.items() if k != key})
            for broken in _mutations(value[key]):
                out.append({**value, key: broken})
    elif isinstance(value, list):
        out.append({"not": "a list"})
        for n, item in enumerate(value):
            for broken in _mutations(item):
                out.append([*value[:n], broken, *value[n + 1 :]])
    else:
        out.append([value] if not isinstance(value, bool) else "yes")
    return out


@pytest.mark.parametrize("kind", GOOD)
def test_the_operators_check_agrees_with_an_openapi_validator(kind: str) -> None:
    validator = OAS30Validator(_strict(copy.deepcopy(corev1.SCHEMAS[kind])))
    cases = [GOOD[kind], *_mutations(GOOD[kind])]
    assert len(cases) > 6
    disagree = [
        case
        for case in cases
        if validator.is_valid(case) != (check.schema_problems("x", case, kind) == [])
    ]
    assert not disagree
    assert validator.is_valid(GOOD[kind])
    assert sum(not validator.is_valid(c) for c in cases) > len(cases) // 3  # the corpus bites
