"""The cases of kubernetes/apiextensions-apiserver v0.36.3
``pkg/apiserver/schema/defaulting/algorithm_test.go`` (``TestDefault``) and
``prunenulls_test.go`` (``TestPruneNonNullableNullsWithoutDefaults``), restated as data.

A Go ``Structural`` is its raw schema dict (``Generic.Default`` → ``default``,
``Generic.Nullable`` → ``nullable``, ``AdditionalProperties{Bool: true}`` →
``additionalProperties: True``); a nil schema is None.
"""

from __future__ import annotations

from typing import Any


def _defaults(**defaults: Any) -> dict[str, Any]:
    return {"properties": {k: {"default": v} for k, v in defaults.items()}}


DEFAULT: list[dict[str, Any]] = [
    {"test": "TestDefault", "name": "empty", "json": None, "schema": None, "expected": None},
    {
        "test": "TestDefault",
        "name": "scalar",
        "json": 4,
        "schema": {"default": "foo"},
        "expected": 4,
    },
    {
        "test": "TestDefault",
        "name": "scalar array",
        "json": [1, 2],
        "schema": {"items": {"default": "foo"}},
        "expected": [1, 2],
    },
    {
        "test": "TestDefault",
        "name": "object array",
        "json": [{"a": 1}, {"b": 1}, {"c": 1}],
        "schema": {"items": _defaults(a="A", b="B", c="C")},
        "expected": [
            {"a": 1, "b": "B", "c": "C"},
            {"a": "A", "b": 1, "c": "C"},
            {"a": "A", "b": "B", "c": 1},
        ],
    },
    {
        "test": "TestDefault",
        "name": "object array object",
        "json": {
            "array": [{"a": 1}, {"b": 2}],
            "object": {"a": 1},
            "additionalProperties": {"x": {"a": 1}, "y": {"b": 2}},
        },
        "schema": {
            "properties": {
                "array": {"items": _defaults(a="A", b="B")},
                "object": _defaults(a="N", b="O"),
                "additionalProperties": {"additionalProperties": _defaults(a="alpha", b="beta")},
                "foo": {"default": "bar"},
            }
        },
        "expected": {
            "array": [{"a": 1, "b": "B"}, {"a": "A", "b": 2}],
            "object": {"a": 1, "b": "O"},
            "additionalProperties": {"x": {"a": 1, "b": "beta"}, "y": {"a": "alpha", "b": 2}},
            "foo": "bar",
        },
    },
    {
        "test": "TestDefault",
        "name": "empty and null",
        "json": [{}, {"a": 1}, {"a": 0}, {"a": 0.0}, {"a": ""}, {"a": None}, {"a": []}, {"a": {}}],
        "schema": {"items": _defaults(a="A")},
        "expected": [
            {"a": "A"},
            {"a": 1},
            {"a": 0},
            {"a": 0.0},
            {"a": ""},
            {"a": "A"},
            {"a": []},
            {"a": {}},
        ],
    },
    {
        "test": "TestDefault",
        "name": "null in nullable list",
        "json": [None],
        "schema": {"nullable": True, "items": _defaults(a="A")},
        "expected": [None],
    },
    {
        "test": "TestDefault",
        "name": "null in non-nullable list",
        "json": [None],
        "schema": {"nullable": False, "items": {"default": "A"}},
        "expected": ["A"],
    },
    {
        "test": "TestDefault",
        "name": "null in nullable object",
        "json": {"a": None},
        "schema": {"properties": {"a": {"nullable": True, "default": "A"}}},
        "expected": {"a": None},
    },
    {
        "test": "TestDefault",
        "name": "null in non-nullable object",
        "json": {"a": None},
        "schema": {"properties": {"a": {"nullable": False, "default": "A"}}},
        "expected": {"a": "A"},
    },
    {
        "test": "TestDefault",
        "name": "null in nullable object with additionalProperties",
        "json": {"a": None},
        "schema": {"additionalProperties": {"nullable": True, "default": "A"}},
        "expected": {"a": None},
    },
    {
        "test": "TestDefault",
        "name": "null in non-nullable object with additionalProperties",
        "json": {"a": None},
        "schema": {"additionalProperties": {"nullable": False, "default": "A"}},
        "expected": {"a": "A"},
    },
    {
        "test": "TestDefault",
        "name": "null unknown field",
        "json": {"a": None},
        "schema": {"additionalProperties": True},
        "expected": {"a": None},
    },
]

PRUNE_NULLS: list[dict[str, Any]] = [
    {
        "test": "TestPruneNonNullableNullsWithoutDefaults",
        "name": "empty",
        "json": None,
        "schema": None,
        "expected": None,
    },
    {
        "test": "TestPruneNonNullableNullsWithoutDefaults",
        "name": "scalar",
        "json": 4,
        "schema": {"default": "foo"},
        "expected": 4,
    },
    {
        "test": "TestPruneNonNullableNullsWithoutDefaults",
        "name": "scalar array",
        "json": [1, None],
        "schema": None,
        "expected": [1, None],
    },
    {
        "test": "TestPruneNonNullableNullsWithoutDefaults",
        "name": "object array",
        "json": [{"a": None}, {"b": None}, {"c": None}, {"d": None}, {"e": None}],
        "schema": {
            "items": {
                "properties": {
                    "a": {"default": "A"},
                    "b": {"nullable": True},
                    "c": {"default": "C", "nullable": True},
                    "d": {},
                }
            }
        },
        "expected": [{"a": None}, {"b": None}, {"c": None}, {}, {"e": None}],
    },
]
