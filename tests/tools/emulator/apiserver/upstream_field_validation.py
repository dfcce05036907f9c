"""The custom-resource cases of kubernetes/kubernetes
``test/integration/apiserver/field_validation_test.go`` (at commit 04791b4906602ffd):
``testFieldValidationPostCRD``, ``...PutCRD``, ``...PatchCRD`` and their ``Schemaless``
twins, the JSON bodies (the YAML ones are left out: duplicate YAML keys are not ported).

Each case: the request (verb, body, patch type), ``fieldValidation`` (None: absent), and
what the apiserver answers: the strict errors its message contains, or the warnings, in
order. The CRD is the test's ``setupCRD``: ``crdSchemaBase``, with
``x-kubernetes-preserve-unknown-fields`` on ``spec`` for the schemaless one.
"""

from __future__ import annotations

from typing import Any

PORT_ITEM = {
    "type": "object",
    "required": ["containerPort", "protocol"],
    "properties": {
        "containerPort": {"format": "int32", "type": "integer"},
        "hostIP": {"type": "string"},
        "hostPort": {"format": "int32", "type": "integer"},
        "name": {"type": "string"},
        "protocol": {"type": "string"},
    },
}


def crd_schema(schemaless: bool) -> dict[str, Any]:
    """``crdSchemaBase``."""
    spec: dict[str, Any] = {
        "type": "object",
        "properties": {
            "cronSpec": {"type": "string", "pattern": r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$"},
            "knownField1": {"type": "string"},
            "ports": {
                "type": "array",
                "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                "x-kubernetes-list-type": "map",
                "items": PORT_ITEM,
            },
        },
    }
    if schemaless:
        spec["x-kubernetes-preserve-unknown-fields"] = True
    return {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}


# crdInvalidBody's spec, as text (it repeats keys); the rest of the body is added per case
INVALID_SPEC = """{
    "unknown1": "val1",
    "unknownDupe": "valDupe",
    "unknownDupe": "valDupe2",
    "knownField1": "val1",
    "knownField1": "val2",
        "ports": [{
            "name": "portName",
            "containerPort": 8080,
            "protocol": "TCP",
            "hostPort": 8081,
            "hostPort": 8082,
            "unknownNested": "val"
        }]
}"""
VALID_SPEC = {
    "knownField1": "val1",
    "ports": [{"name": "portName", "containerPort": 8080, "protocol": "TCP", "hostPort": 8081}],
}
# patchYAMLBody: the object the patch cases start from (created by apply)
APPLIED_SPEC = {
    "cronSpec": "* * * * */5",
    "ports": [{"name": "x", "containerPort": 80, "protocol": "TCP"}],
}
JSON_PATCH = """[
    {"op": "add", "path": "/spec/unknown1", "value": "val1", "foo": "bar"},
    {"op": "add", "path": "/spec/unknown2", "path": "/spec/unknown3", "value": "val2"},
    {"op": "add", "path": "/spec/unknownDupe", "value": "valDupe"},
    {"op": "add", "path": "/spec/unknownDupe", "value": "valDupe2"},
    {"op": "add", "path": "/spec/knownField1", "value": "val1"},
    {"op": "add", "path": "/spec/knownField1", "value": "val2"},
    {"op": "add", "path": "/spec/ports/0/name", "value": "portName"},
    {"op": "add", "path": "/spec/ports/0/containerPort", "value": 8080},
    {"op": "add", "path": "/spec/ports/0/protocol", "value": "TCP"},
    {"op": "add", "path": "/spec/ports/0/hostPort", "value": 8081},
    {"op": "add", "path": "/spec/ports/0/hostPort", "value": 8082},
    {"op": "add", "path": "/spec/ports/0/unknownNested", "value": "val"}
]"""

DUPLICATES = [
    'duplicate field "unknownDupe"',
    'duplicate field "knownField1"',
    'duplicate field "hostPort"',
]
UNKNOWN = [
    'unknown field "spec.ports[0].unknownNested"',
    'unknown field "spec.unknown1"',
    'unknown field "spec.unknownDupe"',
]
JSON_PATCH_FOUND = [
    'json patch unknown field "foo"',
    'json patch duplicate field "path"',
    'unknown field "spec.ports[0].unknownNested"',
    'unknown field "spec.unknown1"',
    'unknown field "spec.unknown3"',
    'unknown field "spec.unknownDupe"',
]
SCHEMALESS_JSON_PATCH_FOUND = [*JSON_PATCH_FOUND[:2], 'unknown field "spec.ports[0].unknownNested"']
SCHEMALESS_FOUND = [*DUPLICATES, 'unknown field "spec.ports[0].unknownNested"']


def _cases(test: str, verb: str, body: str, found: list[str]) -> list[dict[str, Any]]:
    """Strict (errors), Warn and absent (warnings), Ignore (nothing) of one request."""
    return [
        {"test": test, "directive": "Strict", "verb": verb, "body": body, "errors": found},
        {"test": test, "directive": "Warn", "verb": verb, "body": body, "warnings": found},
        {"test": test, "directive": "Ignore", "verb": verb, "body": body, "warnings": []},
        {"test": test, "directive": None, "verb": verb, "body": body, "warnings": found},
    ]


CASES: list[dict[str, Any]] = [
    *(
        {**c, "schemaless": False}
        for c in [
            *_cases("testFieldValidationPostCRD", "post", INVALID_SPEC, [*DUPLICATES, *UNKNOWN]),
            *_cases("testFieldValidationPutCRD", "put", INVALID_SPEC, [*DUPLICATES, *UNKNOWN]),
            *_cases("testFieldValidationPatchCRD", "merge", INVALID_SPEC, [*DUPLICATES, *UNKNOWN]),
            *_cases("testFieldValidationPatchCRD", "json", JSON_PATCH, JSON_PATCH_FOUND),
        ]
    ),
    *(
        {**c, "schemaless": True}
        for c in [
            *_cases("testFieldValidationPostCRDSchemaless", "post", INVALID_SPEC, SCHEMALESS_FOUND),
            *_cases("testFieldValidationPutCRDSchemaless", "put", INVALID_SPEC, SCHEMALESS_FOUND),
            *_cases(
                "testFieldValidationPatchCRDSchemaless", "merge", INVALID_SPEC, SCHEMALESS_FOUND
            ),
            *_cases(
                "testFieldValidationPatchCRDSchemaless",
                "json",
                JSON_PATCH,
                SCHEMALESS_JSON_PATCH_FOUND,
            ),
        ]
    ),
]
