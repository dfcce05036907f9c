"""What kube-apiserver answers a create of a CustomResourceDefinition, as the emulator's port
(:mod:`disagg_tools.emulator.apiserver.crd`) computes it: our own CRD, the CRD of commit
9de3707 that every cluster refused, and small CRDs built here for each rule family.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_tools.emulator.apiserver.crd import (
    PER_CRD_COST_LIMIT,
    PER_RULE_COST_LIMIT,
    invalid_message,
    rule_costs,
    validate_crd,
)
from disagg_tools.emulator.apiserver.structural import new_structural
from disagg_tools.emulator.apiserver.structural_rules import validate_structural

ROOT = Path(__file__).resolve().parents[4]
OUR_CRDS = [
    ROOT / "crds" / "disagg.dev_disaggregateddeployments.yaml",
    ROOT / "charts" / "disagg" / "crds" / "disagg.dev_disaggregateddeployments.yaml",
]
CRD_9DE3707 = Path(__file__).with_name("crd_9de3707.yaml")
KIND = "CustomResourceDefinition.apiextensions.k8s.io"


def _load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def _texts(crd: dict[str, Any]) -> list[str]:
    return [str(e) for e in validate_crd(crd)]


# --- our CRD ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", OUR_CRDS, ids=["crds", "chart"])
def test_our_crd_is_accepted_by_kube_apiserver(path: Path) -> None:
    crd = _load(path)
    errors = validate_crd(crd)
    assert errors == [], invalid_message(crd, errors)


@pytest.mark.parametrize("path", OUR_CRDS, ids=["crds", "chart"])
def test_our_crd_schema_is_structural(path: Path) -> None:
    schema = _load(path)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert validate_structural("schema", new_structural(schema)) == []


@pytest.mark.parametrize("path", OUR_CRDS, ids=["crds", "chart"])
def test_our_rules_cost_far_under_the_apiserver_limits(path: Path) -> None:
    costs = rule_costs(_load(path))
    assert costs, "the CRD's x-kubernetes-validations were not estimated"
    for cost in sorted(costs, key=lambda c: -c.cost):
        print(f"{cost.cost:>10}  {cost.cost / PER_RULE_COST_LIMIT:7.2%}  {cost.path}")
    total = sum(c.cost for c in costs)
    print(f"{total:>10}  {total / PER_CRD_COST_LIMIT:7.2%}  total of {len(costs)} rules")
    assert max(c.cost for c in costs) * 10 <= PER_RULE_COST_LIMIT
    assert total * 10 <= PER_CRD_COST_LIMIT


# --- the CRD of commit 9de3707 -----------------------------------------------------------------


def _int_or_string_branches(node: Any, path: str) -> Iterator[str]:
    """The path of every typed anyOf branch of an int-or-string field whose anyOf is not
    exactly the apiserver's exemption (found by walking the CRD, independently of the port)."""
    if not isinstance(node, dict):
        return
    any_of = node.get("anyOf") or []
    if node.get("x-kubernetes-int-or-string") and any_of != [
        {"type": "integer"},
        {"type": "string"},
    ]:
        for i, branch in enumerate(any_of):
            if "type" in branch:
                yield f"{path}.anyOf[{i}].type"
    for name, sub in (node.get("properties") or {}).items():
        yield from _int_or_string_branches(sub, f"{path}.properties[{name}]")
    if isinstance(node.get("items"), dict):
        yield from _int_or_string_branches(node["items"], f"{path}.items")


def test_the_9de3707_crd_is_refused_as_not_structural() -> None:
    crd = _load(CRD_9DE3707)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    branches = sorted(_int_or_string_branches(schema, "spec.validation.openAPIV3Schema"))
    expected = [f"{b}: Forbidden: must be empty to be structural" for b in branches]
    got = _texts(crd)
    assert len(got) == 12
    assert got == expected
    assert (
        "spec.validation.openAPIV3Schema.properties[spec].properties[prefill]"
        ".properties[rollout].properties[maxSurge].anyOf[0].type: Forbidden: must be empty "
        "to be structural" in got
    )
    message = invalid_message(crd, validate_crd(crd))
    assert message == f'{KIND} "disaggregateddeployments.disagg.dev" is invalid: [{", ".join(got)}]'


# --- small CRDs, one rule family each ---------------------------------------------------------


def _crd(schema: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """A valid v1 CRD ``widgets.example.com``; ``spec`` keys replace the defaults."""
    version = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema or {"type": "object"}},
    }
    body: dict[str, Any] = {
        "group": "example.com",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "scope": "Namespaced",
        "versions": [version],
    }
    body.update(spec)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": body,
    }


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def _with_rules(schema: dict[str, Any], *rules: str | dict[str, Any]) -> dict[str, Any]:
    entries = [r if isinstance(r, dict) else {"rule": r} for r in rules]
    return {**schema, "x-kubernetes-validations": entries}


def test_a_valid_crd_is_accepted() -> None:
    assert _texts(_crd(_object(spec=_object(size={"type": "integer"})))) == []


def test_names_group_and_scope() -> None:
    crd = _crd(group="example", scope="Global")
    crd["metadata"]["name"] = "widgets.example"
    assert _texts(crd) == [
        'spec.group: Invalid value: "example": should be a domain with at least one dot',
        'spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"',
    ]
    crd = _crd()
    crd["metadata"]["name"] = "gadgets.example.com"
    assert _texts(crd) == [
        'metadata.name: Invalid value: "gadgets.example.com": must be '
        'spec.names.plural+"."+spec.group'
    ]
    crd = _crd(names={"plural": "widgets", "kind": "Widget", "listKind": "Widget"})
    assert _texts(crd) == [
        'spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same'
    ]


def test_versions_need_exactly_one_storage_version() -> None:
    crd = _crd()
    crd["spec"]["versions"].append({**crd["spec"]["versions"][0], "name": "v2"})
    versions, stored = _texts(crd)
    assert versions.startswith('spec.versions: Invalid value: [{"Name":"v1","Served":true')
    assert versions.endswith(": must have exactly one version marked as storage version")
    assert '"Schema":null' in versions  # equal schemas were moved to spec.validation
    # the first storage version is the one stored on create
    assert (
        stored == 'status.storedVersions: Invalid value: ["v1"]: must have the storage version v2'
    )


def test_errors_name_spec_validation_when_every_version_has_the_schema() -> None:
    bad = _object(spec={"type": "object", "anyOf": [{"type": "string"}]})
    crd = _crd(bad)
    crd["spec"]["versions"].append(
        {**copy.deepcopy(crd["spec"]["versions"][0]), "name": "v2", "storage": False}
    )
    expected = "properties[spec].anyOf[0].type: Forbidden: must be empty to be structural"
    assert _texts(crd) == [f"spec.validation.openAPIV3Schema.{expected}"]
    crd["spec"]["versions"][1]["schema"] = {"openAPIV3Schema": {"type": "object"}}
    assert _texts(crd) == [f"spec.versions[0].schema.openAPIV3Schema.{expected}"]


def test_scale_and_status_subresources() -> None:
    scale = {"specReplicasPath": ".status.replicas", "statusReplicasPath": "status.replicas"}
    crd = _crd(_object(spec=_object()))
    crd["spec"]["versions"][0]["subresources"] = {"status": {}, "scale": scale}
    assert _texts(crd) == [
        'spec.subresources.scale.specReplicasPath: Invalid value: ".status.replicas": should be a '
        "json path under .spec",
        'spec.subresources.scale.statusReplicasPath: Invalid value: "status.replicas": must be a '
        "simple json path starting with .",
    ]
    root = {"type": "object", "anyOf": [{"required": ["spec"]}], "properties": {"spec": _object()}}
    crd = _crd(root)
    crd["spec"]["versions"][0]["subresources"] = {"status": {}}
    (error,) = _texts(crd)
    assert error.startswith('spec.validation.openAPIV3Schema: Invalid value: {"ID":"","Schema":""')
    assert (
        "fields are allowed at the root of the schema if the status subresource is enabled" in error
    )


def test_printer_columns() -> None:
    crd = _crd()
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Size", "type": "float", "format": "hex", "jsonPath": "spec.size"}
    ]
    assert _texts(crd) == [
        'spec.additionalPrinterColumns[0].type: Invalid value: "float": must be one of '
        "boolean,date,integer,number,string",
        'spec.additionalPrinterColumns[0].format: Invalid value: "hex": must be one of '
        "byte,date,date-time,double,float,int32,int64,password",
        'spec.additionalPrinterColumns[0].JSONPath: Invalid value: "spec.size": must be a simple '
        "json path starting with .",
    ]


@pytest.mark.parametrize(
    ("any_of", "refused"),
    [
        ([{"type": "integer"}, {"type": "string"}], False),
        ([{"type": "integer", "minimum": 0}, {"type": "string"}], True),
        ([{"type": "string"}, {"type": "integer"}], True),
    ],
    ids=["exact-pattern", "minimum-inside", "reordered"],
)
def test_int_or_string_exemption_is_exact(any_of: list[dict[str, Any]], refused: bool) -> None:
    field = {"x-kubernetes-int-or-string": True, "anyOf": any_of}
    errors = _texts(_crd(_object(surge=field)))
    assert bool(errors) == refused
    assert all(e.endswith("type: Forbidden: must be empty to be structural") for e in errors)


def test_int_or_string_all_of_exemption() -> None:
    pattern = [{"type": "integer"}, {"type": "string"}]
    field = {"x-kubernetes-int-or-string": True, "allOf": [{"anyOf": pattern}, {"minimum": 0}]}
    assert _texts(_crd(_object(surge=field))) == []


def test_metadata_at_the_root_holds_only_name_and_generate_name() -> None:
    meta = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "labels": {"type": "object"}},
    }
    assert _texts(_crd(_object(metadata=meta))) == [
        "spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify "
        "anything other than name and generateName, but metadata is implicitly specified"
    ]


def test_schema_keywords_and_list_types() -> None:
    schema = _object(
        ref={"$ref": "#/definitions/x"},
        both={
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "additionalProperties": {"type": "string"},
        },
        keyed={"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "map"},
        keep={"type": "object", "x-kubernetes-preserve-unknown-fields": False},
    )
    at = "spec.validation.openAPIV3Schema.properties"
    assert sorted(_texts(_crd(schema))) == [
        f"{at}[both].additionalProperties: Forbidden: additionalProperties and properties are "
        "mutual exclusive",
        f"{at}[keep].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or "
        "undefined",
        f"{at}[keyed].x-kubernetes-list-map-keys: Required value: must not be empty if "
        "x-kubernetes-list-type is map",
        f"{at}[ref].$ref: Forbidden: $ref is not supported",
    ]


def test_rules_must_compile() -> None:
    spec = _with_rules(
        _object(size={"type": "integer"}),
        "self.sise > 0",
        {"rule": "self.size > 0", "messageExpression": "self.size"},
        {"rule": "self.size > 0", "reason": "FieldValueBad"},
        {"rule": "self.size > 0", "fieldPath": ".nope"},
    )
    got = _texts(_crd(_object(spec=spec)))
    at = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations"
    assert (
        f'{at}[2].reason: Unsupported value: "FieldValueBad": supported values: '
        '"FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"'
        in got
    )
    assert f'{at}[3].fieldPath: Invalid value: ".nope": must be a valid path' in got
    # schema errors at a node keep its rules from being compiled, as upstream
    assert not any("compilation failed" in e for e in got)
    got = _texts(
        _crd(_object(spec=_with_rules(_object(size={"type": "integer"}), "self.sise > 0")))
    )
    (error,) = got
    # the bad value is the internal ValidationRule as Go's json.Marshal writes it
    assert error.startswith(
        f'{at}[0].rule: Invalid value: {{"Rule":"self.sise \\u003e 0","Message":""'
    )
    assert "compilation failed: ERROR: <input>:1:5: undefined field 'sise'" in error


def test_message_expression_must_be_a_string() -> None:
    spec = _with_rules(
        _object(size={"type": "integer"}),
        {"rule": "self.size > 0", "messageExpression": "self.size"},
    )
    (error,) = _texts(_crd(_object(spec=spec)))
    assert "x-kubernetes-validations[0].messageExpression: Invalid value:" in error
    assert error.endswith("messageExpression must evaluate to a string")


def test_old_self_is_refused_where_values_cannot_be_correlated() -> None:
    items = _with_rules({"type": "string", "maxLength": 8}, "self == oldSelf")
    schema = _object(tags={"type": "array", "maxItems": 4, "items": items})
    (error,) = _texts(_crd(schema))
    assert error == (
        "spec.validation.openAPIV3Schema.properties[tags].items.x-kubernetes-validations[0].rule: "
        'Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion '
        "of the schema within spec.validation.openAPIV3Schema.properties[tags]"
    )


def test_rule_cost_limits() -> None:
    names = {"type": "array", "items": {"type": "string"}}
    spec = _with_rules(_object(names=names), "self.names.all(a, self.names.all(b, a == b))")
    at = "spec.validation.openAPIV3Schema"
    advice = (
        "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where "
        "arrays, maps, and strings are declared)"
    )
    assert _texts(_crd(_object(spec=spec))) == [
        f"{at}.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule "
        f"cost exceeds budget by factor of more than 100x {advice}",
        f"{at}.properties[spec].x-kubernetes-validations[0].rule: Forbidden: contributed to "
        "estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
        f"{at}: Forbidden: x-kubernetes-validations estimated rule cost total for entire "
        f"OpenAPIv3 schema exceeds budget by factor of more than 100x {advice}",
    ]
    bounded = {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 10}}
    spec = _with_rules(_object(names=bounded), "self.names.all(a, self.names.all(b, a == b))")
    assert _texts(_crd(_object(spec=spec))) == []
    (cost,) = rule_costs(_crd(_object(spec=spec)))
    assert 0 < cost.cost < PER_RULE_COST_LIMIT


def test_per_crd_cost_limit_names_the_costliest_rules() -> None:
    """13 rules of about 8 million each: each under 10^7, together over 10^8."""
    rule = "self.all(x, x.matches('^[a-z]+$'))"
    item = {"type": "string", "maxLength": 1000}
    field = _with_rules({"type": "array", "maxItems": 10000, "items": item}, rule)
    got = _texts(_crd(_object(**{f"f{i:02}": field for i in range(13)})))
    assert len(got) == 5
    assert all(
        e.endswith(
            "x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost "
            "total exceeding cost limit for entire OpenAPIv3 schema"
        )
        for e in got[:4]
    )
    assert got[4].startswith(
        "spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule "
        "cost total for entire OpenAPIv3 schema exceeds budget by factor of 1.047800x"
    )


def test_defaults_must_be_valid_and_pruned() -> None:
    schema = _object(
        size={"type": "integer", "default": "ten"},
        spec={
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "default": {"a": "x", "b": 1},
        },
    )
    assert _texts(_crd(schema)) == [
        # kube-openapi names the value's type, and the value has no name at a default's root
        'spec.validation.openAPIV3Schema.properties[size].default: Invalid value: "string":  '
        'in body must be of type integer: "string"',
        'spec.validation.openAPIV3Schema.properties[spec].default: Invalid value: {"a":"x","b":1}: '
        "must not have unknown fields",
    ]


def test_defaults_must_pass_their_own_rules() -> None:
    spec = _with_rules(
        {"type": "object", "properties": {"min": {"type": "integer", "default": 1}}, "default": {}},
        {"rule": "self.min > 0", "message": "min must be positive"},
    )
    (error,) = _texts(_crd(_object(spec=spec)))
    assert error == (
        'spec.validation.openAPIV3Schema.properties[spec].default: Invalid value: "object": '
        "no such key: min evaluating rule: min must be positive"
    )


def test_the_status_message_of_one_error_has_no_brackets() -> None:
    crd = _crd(scope="")
    errors = validate_crd(crd)
    assert invalid_message(crd, errors) == (
        f'{KIND} "widgets.example.com" is invalid: spec.scope: Required value'
    )
