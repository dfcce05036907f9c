"""kube-apiserver's own cases for checking a schema's defaults, restated as data.

Source: kubernetes/apiextensions-apiserver v0.36.3, ``pkg/apiserver/schema/defaulting/
validation_test.go``. Each case runs upstream's ``validate`` step on the schema (path
``test``, pruned defaults not required) and lists the texts its errors must contain.
"""

from __future__ import annotations

from typing import Any

SOURCE = (
    "kubernetes/apiextensions-apiserver v0.36.3 pkg/apiserver/schema/defaulting/validation_test.go"
)

CASES: list[dict[str, Any]] = [
    {
        "test": "TestDefaultValidationWithCostBudget",
        "name": "default cel validation",
        "schema": {
            "type": "object",
            "properties": {
                "embedded": {
                    "type": "object",
                    "properties": {
                        "metadata": {
                            "type": "object",
                            "x-kubernetes-embedded-resource": True,
                            "properties": {
                                "name": {
                                    "type": "string",
                                    "x-kubernetes-validations": [{"rule": "self == 'singleton'"}],
                                    "default": "singleton",
                                }
                            },
                        }
                    },
                },
                "value": {
                    "type": "string",
                    "x-kubernetes-validations": [{"rule": "self.startsWith('kube')"}],
                    "default": "kube-everything",
                },
                "object": {
                    "type": "object",
                    "properties": {"field1": {"type": "integer"}, "field2": {"type": "integer"}},
                    "x-kubernetes-validations": [{"rule": "self.field1 < self.field2"}],
                    "default": {"field1": 1, "field2": 2},
                },
            },
        },
        "errors": [],
    },
    {
        "test": "TestDefaultValidationWithOptionalOldSelf",
        "name": "invalid default",
        "schema": {
            "type": "object",
            "properties": {
                "defaultFailsRatcheting": {
                    "type": "string",
                    "default": "default",
                    "x-kubernetes-validations": [
                        {
                            "rule": "oldSelf.hasValue()",
                            "optionalOldSelf": True,
                            "message": "foobarErrorMessage",
                        }
                    ],
                }
            },
        },
        "errors": ["foobarErrorMessage"],
    },
    {
        "test": "TestDefaultValidationWithOptionalOldSelf",
        "name": "valid default",
        "schema": {
            "type": "object",
            "properties": {
                "defaultFailsRatcheting": {
                    "type": "string",
                    "default": "default",
                    "x-kubernetes-validations": [
                        {
                            "rule": "oldSelf.orValue(self) == self",
                            "optionalOldSelf": True,
                            "message": "foobarErrorMessage",
                        }
                    ],
                }
            },
        },
        "errors": [],
    },
]

NOT_PORTED = {
    "TestDefaultValidationWithCostBudget/default cel validation (budgets 0 and 9)": (
        "checks that a default's rules stop when the runtime cost budget runs out; the port "
        "evaluates rules with cel-python, which keeps no CEL cost"
    ),
}
