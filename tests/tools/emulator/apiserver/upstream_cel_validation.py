"""Cases of kubernetes/apiextensions-apiserver v0.36.3
``pkg/apiserver/schema/cel/validation_test.go``, restated as data: ``TestMessageExpression``
(what a failing rule says; its cost-budget cases are left out: the budget is not ported)
and ``TestReasonAndFldPath`` (the error's type and path from ``reason`` and ``fieldPath``).
Paths are under the test's base path ``root``.
"""

from __future__ import annotations

from typing import Any

STRING = {"type": "string"}


def _message_schema(message: str, expression: str) -> dict[str, Any]:
    """``withRule[Message]AndMessageExpression(objectType({str}), "false", ...)``."""
    rule: dict[str, Any] = {"rule": "false", "messageExpression": expression}
    if message:
        rule["message"] = message
    return {"type": "object", "properties": {"str": STRING}, "x-kubernetes-validations": [rule]}


MESSAGE_EXPRESSION: list[dict[str, Any]] = [
    {
        "name": "no cost error expected",
        "message": "",
        "expression": '"static string"',
        "contains": "static string",
    },
    {
        "name": "messageExpression takes precedence over message",
        "message": "invisible",
        "expression": '"this is messageExpression"',
        "contains": "this is messageExpression",
    },
    {
        "name": "default rule message used if messageExpression does not eval to string",
        "message": "",
        "expression": "true",
        "contains": "failed rule",
    },
    {
        "name": "messageExpression budget (str concat)",
        "message": "",
        "expression": '"str1 " + self.str',
        "contains": "str1 a string",
    },
    {
        "name": "runtime cost preserved if messageExpression fails during evaluation",
        "message": "message not messageExpression",
        "expression": '"str1 " + ["a", "b", "c", "d"][4]',
        "contains": "message not messageExpression",
    },
    {
        "name": "runtime cost preserved if messageExpression fails during evaluation "
        "(no message set)",
        "message": "",
        "expression": '"str1 " + ["a", "b", "c", "d"][4]',
        "contains": "failed rule",
    },
    {
        "name": "messageExpression is not allowed to generate a string with newlines",
        "message": "message not messageExpression",
        "expression": '"str with \\na newline"',
        "contains": "message not messageExpression",
    },
    {
        "name": "messageExpression is not allowed to generate messages >5000 characters",
        "message": "message not messageExpression",
        "expression": '"' + "a" * 5121 + '"',
        "contains": "message not messageExpression",
    },
    {
        "name": "messageExpression is not allowed to generate an empty string",
        "message": "message not messageExpression",
        "expression": 'string("")',
        "contains": "message not messageExpression",
    },
    {
        "name": "messageExpression is not allowed to generate a string with only spaces",
        "message": "message not messageExpression",
        "expression": 'string("     ")',
        "contains": "message not messageExpression",
    },
]
for _case in MESSAGE_EXPRESSION:
    _case.update(
        test="TestMessageExpression",
        obj={"str": "a string"},
        schema=_message_schema(_case["message"], _case["expression"]),
    )


def _f(reason: str | None, field_path: str) -> dict[str, Any]:
    """``withReasonAndFldPath(objectType({m: integer}), "self.m == 2", fieldPath, reason)``."""
    rule: dict[str, Any] = {"rule": "self.m == 2"}
    if reason:
        rule["reason"] = reason
    if field_path:
        rule["fieldPath"] = field_path
    return {
        "type": "object",
        "properties": {"m": {"type": "integer"}},
        "x-kubernetes-validations": [rule],
    }


def _root(**properties: Any) -> dict[str, Any]:
    """``withRulePtr(objectTypePtr(...), "1 == 1")``."""
    return {
        "type": "object",
        "properties": properties,
        "x-kubernetes-validations": [{"rule": "1 == 1"}],
    }


T = "TestReasonAndFldPath"
F = {"f": {"m": 1}}
REASON_AND_FIELD_PATH: list[dict[str, Any]] = [
    {
        "test": T,
        "name": "Return error based on input reason",
        "obj": F,
        "schema": _root(f=_f("FieldValueForbidden", "")),
        "errors": [("FieldValueForbidden", "root.f")],
    },
    {
        "test": T,
        "name": "Return error default is invalid",
        "obj": F,
        "schema": _root(f=_f(None, "")),
        "errors": [("FieldValueInvalid", "root.f")],
    },
    {
        "test": T,
        "name": "Return error based on input fieldPath",
        "obj": F,
        "schema": _root(f=_f("FieldValueForbidden", ".m")),
        "errors": [("FieldValueForbidden", "root.f.m")],
    },
    {
        "test": T,
        "name": "multiple rules with custom reason and field path",
        "obj": {"field1": "value1", "field2": "value2", "field3": "value3"},
        "schema": {
            "type": "object",
            "properties": {"field1": STRING, "field2": STRING, "field3": STRING},
            "x-kubernetes-validations": [
                {
                    "rule": 'self.field2 != "value2"',
                    "reason": "FieldValueDuplicate",
                    "fieldPath": ".field2",
                },
                {
                    "rule": 'self.field3 != "value3"',
                    "reason": "FieldValueRequired",
                    "fieldPath": ".field3",
                },
                {
                    "rule": 'self.field1 != "value1"',
                    "reason": "FieldValueForbidden",
                    "fieldPath": ".field1",
                },
            ],
        },
        "errors": [
            ("FieldValueDuplicate", "root.field2"),
            ("FieldValueRequired", "root.field3"),
            ("FieldValueForbidden", "root.field1"),
        ],
    },
]
