"""The cases of kubernetes/apiextensions-apiserver v0.36.3
``pkg/apiserver/validation/ratcheting_test.go``, restated as data: (schema, new, old) and
whether ``ValidateUpdate(new, old, WithRatcheting(nil))`` is valid. A kube-openapi
``spec.Schema`` is written as the raw schema dict it stands for.
"""

from __future__ import annotations

from typing import Any

ZERO = {"type": "number", "minimum": 0, "maximum": 0}
SMALL = {"type": "number", "maximum": 50}
MEDIUM = {"type": "number", "minimum": 50, "maximum": 10000}
LARGE = {"type": "number", "minimum": 10000}
OBJECT = {
    "type": "object",
    "properties": {"zero": ZERO, "small": SMALL, "medium": MEDIUM, "large": LARGE},
}
OBJECT_OBJECT = {"type": "object", "properties": {"nested": OBJECT}}
NUMERIC_FORMAT = {
    "type": "object",
    "properties": {
        "intThirtyTwo": {"type": "integer", "format": "int32"},
        "unrelated": {"type": "string"},
    },
}
OVER_INT32 = 2**31  # math.MaxInt32 + 1


def _nested(value: dict[str, Any]) -> dict[str, Any]:
    return {"nested": value}


CASES: list[dict[str, Any]] = [
    {"test": "TestScalarRatcheting", "schema": MEDIUM, "new": 1, "old": 1, "valid": True},
    {"test": "TestScalarRatcheting", "schema": MEDIUM, "new": 1, "old": 2, "valid": False},
    {
        "test": "TestObjectScalarFieldsRatcheting",
        "schema": OBJECT,
        "new": {"small": 500},
        "old": {"small": 500},
        "valid": True,
    },
    {
        "test": "TestObjectScalarFieldsRatcheting",
        "schema": OBJECT,
        "new": {"small": 501},
        "old": {"small": 501, "medium": 500},
        "valid": True,
    },
    {
        "test": "TestObjectScalarFieldsRatcheting",
        "schema": OBJECT,
        "new": {"small": 500},
        "old": {"small": 501},
        "valid": False,
    },
    {
        "test": "TestObjectObjectFieldsRatcheting",
        "schema": OBJECT_OBJECT,
        "new": _nested({"small": 500}),
        "old": _nested({"small": 500}),
        "valid": True,
    },
    {
        "test": "TestObjectObjectFieldsRatcheting",
        "schema": OBJECT_OBJECT,
        "new": _nested({"small": 501}),
        "old": _nested({"small": 501, "medium": 500}),
        "valid": True,
    },
    {
        "test": "TestObjectObjectFieldsRatcheting",
        "schema": OBJECT_OBJECT,
        "new": _nested({"small": 500}),
        "old": _nested({"small": 501}),
        "valid": False,
    },
    {
        "test": "TestNumericFormatRatcheting",
        "schema": NUMERIC_FORMAT,
        "new": {"intThirtyTwo": OVER_INT32},
        "old": {"intThirtyTwo": OVER_INT32},
        "valid": True,
    },
    {
        "test": "TestNumericFormatRatcheting",
        "schema": NUMERIC_FORMAT,
        "new": {"intThirtyTwo": OVER_INT32, "unrelated": "changed"},
        "old": {"intThirtyTwo": OVER_INT32, "unrelated": "original"},
        "valid": True,
    },
    {
        "test": "TestNumericFormatRatcheting",
        "schema": NUMERIC_FORMAT,
        "new": {"intThirtyTwo": OVER_INT32 + 1},
        "old": {"intThirtyTwo": OVER_INT32},
        "valid": False,
    },
]
