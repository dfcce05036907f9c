"""The cases of kubernetes/apiextensions-apiserver v0.36.3
``pkg/apiserver/validation/validation_test.go`` (``TestValidateCustomResource``,
``TestItemsProperty``), restated as data.

Each case: a CRD schema (``apiextensions.JSONSchemaProps`` as its JSON), objects that pass
(with their old objects, for transition rules), and failing objects with the exact set of
messages ``ValidateCustomResource`` and the CEL validator give together.
"""

from __future__ import annotations

from typing import Any

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
MAX_FLOAT32 = 3.4028234663852886e38
MAX_FLOAT64 = 1.7976931348623157e308


NIL = '<nil>: Invalid value: "": '


def _checked(kind: str, field: str) -> str:
    """A value out of its format's range: a plain kube-openapi error, at path <nil>."""
    return f"{NIL}Checked value must be of type {kind} in {field}"


def _type(field: str, value_kind: str, expected: str) -> str:
    return (
        f'{field}: Invalid value: "{value_kind}": {field} in body must be of type {expected}: '
        f'"{value_kind}"'
    )


def _field(**schema: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"field": schema}}


def _type_errors(expected: str, values: list[Any]) -> list[dict[str, Any]]:
    """``field: Invalid value: "<kind>": field in body must be of type <expected>: "<kind>"``."""
    kinds = {"foo": "string", 42: "integer", 1.2: "number"}
    out = []
    for value in values:
        if value is True:
            kind = "boolean"
        elif value is None:
            kind = "null"
        elif isinstance(value, list):
            kind = "array"
        elif isinstance(value, dict):
            kind = "object"
        else:
            kind = kinds[value]
        message = (
            f'field: Invalid value: "{kind}": field in body must be of type {expected}: "{kind}"'
        )
        out.append({"object": {"field": value}, "errors": [message]})
    return out


def _any_of_errors(value: Any, kind: str, all_of: bool) -> dict[str, Any]:
    errors = [
        '<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)',
        f'field: Invalid value: "{kind}": field in body must be of type integer,string: "{kind}"',
        f'field: Invalid value: "{kind}": field in body must be of type integer: "{kind}"',
    ]
    if all_of:
        errors.insert(
            0,
            f'{NIL}"field" must validate all the schemas (allOf). None validated',
        )
    if kind == "number":
        errors.append(_checked("integer (default format)", "field"))
    return {"object": {"field": value}, "errors": errors}


INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]


T = "TestValidateCustomResource"

CASES: list[dict[str, Any]] = [
    {
        "test": T,
        "name": "!nullable",
        "schema": _field(type="object", nullable=False),
        "objects": [{}, {"field": {}}],
        "failing": _type_errors("object", ["foo", 42, True, 1.2, [], None]),
    },
    {
        "test": T,
        "name": "nullable",
        "schema": _field(type="object", nullable=True),
        "objects": [{}, {"field": {}}, {"field": None}],
        "failing": _type_errors("object", ["foo", 42, True, 1.2, []]),
    },
    {
        "test": T,
        "name": "nullable and no type",
        "schema": _field(nullable=True),
        "objects": [
            {},
            {"field": {}},
            {"field": None},
            {"field": "foo"},
            {"field": 42},
            {"field": True},
            {"field": 1.2},
            {"field": []},
        ],
    },
    {
        "test": T,
        "name": "x-kubernetes-int-or-string",
        "schema": _field(**{"x-kubernetes-int-or-string": True}),
        "objects": [{}, {"field": 42}, {"field": "foo"}],
        "failing": _type_errors("integer,string", [None, True, 1.2, {}, []]),
    },
    {
        "test": T,
        "name": "nullable and x-kubernetes-int-or-string",
        "schema": _field(nullable=True, **{"x-kubernetes-int-or-string": True}),
        "objects": [{}, {"field": 42}, {"field": "foo"}, {"field": None}],
        "failing": _type_errors("integer,string", [True, 1.2, {}, []]),
    },
    {
        "test": T,
        "name": "nullable, x-kubernetes-int-or-string and user-provided anyOf",
        "schema": _field(
            nullable=True, anyOf=INT_OR_STRING_ANY_OF, **{"x-kubernetes-int-or-string": True}
        ),
        "objects": [{}, {"field": None}, {"field": 42}, {"field": "foo"}],
        "failing": [
            _any_of_errors(True, "boolean", False),
            _any_of_errors(1.2, "number", False),
            _any_of_errors({}, "object", False),
            _any_of_errors([], "array", False),
        ],
    },
    {
        "test": T,
        "name": "nullable, x-kubernetes-int-or-string and user-provider allOf",
        "schema": _field(
            nullable=True,
            allOf=[{"anyOf": INT_OR_STRING_ANY_OF}],
            **{"x-kubernetes-int-or-string": True},
        ),
        "objects": [{}, {"field": None}, {"field": 42}, {"field": "foo"}],
        "failing": [
            _any_of_errors(True, "boolean", True),
            _any_of_errors(1.2, "number", True),
            _any_of_errors({}, "object", True),
            _any_of_errors([], "array", True),
        ],
    },
    {
        "test": T,
        "name": "invalid regex",
        "schema": _field(type="string", pattern="+"),
        "failing": [
            {
                "object": {"field": "foo"},
                "errors": [
                    'field: Invalid value: "foo": field in body should match \'+, but pattern is '
                    "invalid: error parsing regexp: missing argument to repetition operator: `+`'"
                ],
            }
        ],
    },
    {
        "test": T,
        "name": "required field",
        "schema": {
            "type": "object",
            "required": ["field"],
            "properties": {
                "field": {"type": "object", "required": ["nested"], "properties": {"nested": {}}}
            },
        },
        "failing": [
            {"object": {"test": "a"}, "errors": ["field: Required value"]},
            {"object": {"field": {}}, "errors": ["field.nested: Required value"]},
        ],
    },
    {
        "test": T,
        "name": "enum",
        "schema": _field(
            type="object",
            required=["nestedint", "nestedstring"],
            properties={
                "nestedint": {"type": "integer", "enum": [1, 2]},
                "nestedstring": {"type": "string", "enum": ["a", "b"]},
            },
        ),
        "failing": [
            {
                "object": {"field": {}},
                "errors": ["field.nestedint: Required value", "field.nestedstring: Required value"],
            },
            {
                "object": {"field": {"nestedint": "x", "nestedstring": True}},
                "errors": [
                    _type("field.nestedint", "string", "integer"),
                    'field.nestedint: Unsupported value: "x": supported values: "1", "2"',
                    _type("field.nestedstring", "boolean", "string"),
                    'field.nestedstring: Unsupported value: true: supported values: "a", "b"',
                ],
            },
        ],
    },
    {
        "test": T,
        "name": "immutability transition rule",
        "schema": _field(
            type="string", **{"x-kubernetes-validations": [{"rule": "self == oldSelf"}]}
        ),
        "objects": [{"field": "x"}],
        "old_objects": [{"field": "x"}],
        "failing": [
            {
                "object": {"field": "y"},
                "old": {"field": "x"},
                "errors": ['field: Invalid value: "y": failed rule: self == oldSelf'],
            }
        ],
    },
    {
        "test": T,
        "name": "correlatable transition rule",
        "schema": _field(
            type="array",
            items={
                "type": "object",
                "properties": {
                    "k1": {"type": "string"},
                    "k2": {"type": "string"},
                    "v1": {
                        "type": "number",
                        "x-kubernetes-validations": [{"rule": "self >= oldSelf"}],
                    },
                },
            },
            **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k1", "k2"]},
        ),
        "objects": [{"field": [{"k1": "a", "k2": "b", "v1": 1.2}]}],
        "old_objects": [{"field": [{"k1": "a", "k2": "b", "v1": 1.0}]}],
        "failing": [
            {
                "object": {"field": [{"k1": "a", "k2": "b", "v1": 0.9}]},
                "old": {"field": [{"k1": "a", "k2": "b", "v1": 1.0}]},
                "errors": ["field[0].v1: Invalid value: 0.9: failed rule: self >= oldSelf"],
            }
        ],
    },
    {
        "test": T,
        "name": "validation rule under non-correlatable field",
        "schema": _field(
            type="array",
            items={
                "type": "object",
                "properties": {
                    "x": {"type": "string", "x-kubernetes-validations": [{"rule": "self == 'x'"}]}
                },
            },
        ),
        "objects": [{"field": [{"x": "x"}]}],
        "failing": [
            {
                "object": {"field": [{"x": "y"}]},
                "errors": ["field[0].x: Invalid value: \"y\": failed rule: self == 'x'"],
            }
        ],
    },
    {
        "test": T,
        "name": "maxProperties",
        "schema": {
            "type": "object",
            "properties": {"fieldX": {"type": "object", "maxProperties": 2}},
        },
        "failing": [
            {
                "object": {"fieldX": {"a": True, "b": True, "c": True}},
                "errors": ["fieldX: Too many: 3: must have at most 2 items"],
            }
        ],
    },
    {
        "test": T,
        "name": "maxItems",
        "schema": {"type": "object", "properties": {"fieldX": {"type": "array", "maxItems": 2}}},
        "failing": [
            {
                "object": {"fieldX": ["a", "b", "c"]},
                "errors": ["fieldX: Too many: 3: must have at most 2 items"],
            }
        ],
    },
    {
        "test": T,
        "name": "maxLength",
        "schema": {"type": "object", "properties": {"fieldX": {"type": "string", "maxLength": 2}}},
        "failing": [
            {
                "object": {"fieldX": "abc"},
                "errors": ["fieldX: Too long: may not be more than 2 bytes"],
            }
        ],
    },
    {
        "test": T,
        "name": "k8sLongName",
        "schema": {
            "type": "object",
            "properties": {"fieldX": {"type": "string", "format": "k8s-long-name"}},
        },
        "failing": [
            {
                "object": {"fieldX": "a.-"},
                "errors": [_type("fieldX", "a.-", "k8s-long-name")],
            }
        ],
    },
    {
        "test": T,
        "name": "k8sShortName",
        "schema": {
            "type": "object",
            "properties": {"fieldX": {"type": "string", "format": "k8s-short-name"}},
        },
        "failing": [
            {
                "object": {"fieldX": "a-"},
                "errors": [_type("fieldX", "a-", "k8s-short-name")],
            }
        ],
    },
    {
        "test": T,
        "name": "numeric formats valid",
        "schema": {
            "type": "object",
            "properties": {
                "intThirtyTwo": {"type": "integer", "format": "int32"},
                "intSixtyFour": {"type": "integer", "format": "int64"},
                "floatThreeTwo": {"type": "number", "format": "float"},
                "floatSixFour": {"type": "number", "format": "double"},
            },
        },
        "objects": [
            {
                "intThirtyTwo": INT32[0],
                "intSixtyFour": INT64[0],
                "floatThreeTwo": -MAX_FLOAT32,
                "floatSixFour": -MAX_FLOAT64,
            },
            {"intThirtyTwo": 0, "intSixtyFour": 0, "floatThreeTwo": 0.0, "floatSixFour": 0.0},
            {
                "intThirtyTwo": INT32[1],
                "intSixtyFour": INT64[1],
                "floatThreeTwo": MAX_FLOAT32,
                "floatSixFour": MAX_FLOAT64,
            },
        ],
    },
    {
        "test": T,
        "name": "numeric formats invalid",
        "schema": {
            "type": "object",
            "properties": {
                "intThirtyTwo": {"type": "integer", "format": "int32"},
                "intSixtyFour": {"type": "integer", "format": "int64"},
                "floatThreeTwo": {"type": "number", "format": "float"},
                "floatSixFour": {"type": "number", "format": "double"},
            },
        },
        "failing": [
            {
                "object": {"intThirtyTwo": INT32[1] + 1},
                "errors": [_checked("integer with format int32", "intThirtyTwo")],
            },
            {
                "object": {"intThirtyTwo": INT32[0] - 1},
                "errors": [_checked("integer with format int32", "intThirtyTwo")],
            },
            *(
                {
                    "object": {"intSixtyFour": float(bound) * 1.1},
                    "errors": [
                        _type("intSixtyFour", "float64", "int64"),
                        _checked("integer with format int64", "intSixtyFour"),
                    ],
                }
                for bound in (INT64[1], INT64[0])
            ),
            *(
                {
                    "object": {"floatThreeTwo": sign * MAX_FLOAT32 * 1.1},
                    "errors": [_checked("number with format float", "floatThreeTwo")],
                }
                for sign in (1, -1)
            ),
        ],
    },
]

ITEMS_PROPERTY: list[dict[str, Any]] = [
    {
        "test": "TestItemsProperty",
        "name": "items in object",
        "schema": {"properties": {"spec": {"properties": {"replicas": {"type": "integer"}}}}},
        "object": {"spec": {"replicas": 1, "items": ["1", "2"]}},
        "want_error": False,
    },
    {
        "test": "TestItemsProperty",
        "name": "items in array",
        "schema": {"properties": {"secrets": {"type": "array", "items": {"type": "string"}}}},
        "object": {"secrets": ["1", "2"]},
        "want_error": False,
    },
]
