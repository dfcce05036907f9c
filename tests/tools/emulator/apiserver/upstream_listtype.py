"""The cases of kubernetes/apiextensions-apiserver v0.36.3
``pkg/apiserver/schema/listtype/validation_test.go`` (``TestValidateListSetsAndMaps``),
restated as data: the schema (a Go ``Structural`` as its raw dict; only what list types
read is kept: ``type``, ``items``, ``properties``, ``additionalProperties`` and the
``x-kubernetes-list-*`` extensions), the object, and the errors as (type, path) under the
base path ``root``, matched one for one in any order, as the test matches them.
"""

from __future__ import annotations

from typing import Any

DUP, INV = "FieldValueDuplicate", "FieldValueInvalid"
SET = {"x-kubernetes-list-type": "set"}


def _array(items: dict[str, Any] | None = None, **extensions: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"type": "array", **extensions}
    if items is not None:
        found["items"] = items
    return found


def _map_list(keys: list[str], items: dict[str, Any] | None = None) -> dict[str, Any]:
    return _array(items, **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": keys})


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


STRING = {"type": "string"}
STRINGS = {"type": "object", "additionalProperties": STRING}
T = "TestValidateListSetsAndMaps"

CASES: list[dict[str, Any]] = [
    {"test": T, "name": "nil", "schema": None, "obj": None, "errors": []},
    {"test": T, "name": "no schema", "schema": None, "obj": {}, "errors": []},
    {"test": T, "name": "no object", "schema": {}, "obj": None, "errors": []},
    {
        "test": T,
        "name": "list without schema",
        "schema": None,
        "obj": {"array": ["a", "b", "a"]},
        "errors": [],
    },
    {
        "test": T,
        "name": "list without items",
        "schema": _object(array=_array()),
        "obj": {"array": ["a", "b", "a"]},
        "errors": [],
    },
    {
        "test": T,
        "name": "set list with one item",
        "schema": _object(array=_array(**SET)),
        "obj": {"array": ["a"]},
        "errors": [],
    },
    {
        "test": T,
        "name": "set list with two equal items",
        "schema": _object(array=_array(**SET)),
        "obj": {"array": ["a", "a"]},
        "errors": [(DUP, "root.array[1]")],
    },
    {
        "test": T,
        "name": "set list with two different items",
        "schema": _object(array=_array(**SET)),
        "obj": {"array": ["a", "b"]},
        "errors": [],
    },
    {
        "test": T,
        "name": "set list with multiple duplicated items",
        "schema": _object(array=_array(**SET)),
        "obj": {"array": ["a", "a", "b", "c", "d", "c"]},
        "errors": [(DUP, "root.array[1]"), (DUP, "root.array[5]")],
    },
    {
        "test": T,
        "name": "normal list with items",
        "schema": _object(array=_array(STRING)),
        "obj": {"array": ["a", "b", "a"]},
        "errors": [],
    },
    {
        "test": T,
        "name": "set list with items",
        "schema": _object(array=_array(STRING, **SET)),
        "obj": {"array": ["a", "b", "a"]},
        "errors": [(DUP, "root.array[2]")],
    },
    {
        "test": T,
        "name": "set list with items under additionalProperties",
        "schema": {"type": "object", "additionalProperties": _array(STRING, **SET)},
        "obj": {"array": ["a", "b", "a"]},
        "errors": [(DUP, "root[array][2]")],
    },
    {
        "test": T,
        "name": "set list with items under items",
        "schema": _object(array=_array(_array(STRING, **SET))),
        "obj": {"array": [["a", "b", "a"], ["b", "b", "a"]]},
        "errors": [(DUP, "root.array[0][2]"), (DUP, "root.array[1][1]")],
    },
    {
        "test": T,
        "name": "nested set lists",
        "schema": _object(array=_array(_array(**SET), **SET)),
        "obj": {"array": ["a", "b", "a", ["b", "b", "a"]]},
        "errors": [(DUP, "root.array[2]"), (DUP, "root.array[3][1]")],
    },
    {
        "test": T,
        "name": "set list with compound map items",
        "schema": _object(
            **{
                "strings": _array(STRING, **SET),
                "integers": _array({"type": "integer"}, **SET),
                "booleans": _array({"type": "boolean"}, **SET),
                "float64": _array({"type": "number"}, **SET),
                "nil": _array({"type": "string", "nullable": True}, **SET),
                "empty maps": _array(STRINGS, **SET),
                "map values": _array(STRINGS, **SET),
                "nil values": _array(
                    {
                        "type": "object",
                        "additionalProperties": {"type": "string", "nullable": True},
                    },
                    **SET,
                ),
                "array": _array(_array(STRING), **SET),
                "nil array": _array(_array({"type": "string", "nullable": True}), **SET),
                "multiple duplicates": _array(STRINGS, **SET),
            }
        ),
        "obj": {
            "strings": ["a", "b", "a"],
            "integers": [1, 2, 1],
            "booleans": [False, True, True],
            "float64": [1.0, 2.0, 2.0],
            "nil": ["a", None, None],
            "empty maps": [{"a": "b"}, {}, {}],
            "map values": [{"a": "b"}, {"a": "c"}, {"a": "b"}],
            "nil values": [{"a": None}, {"b": "c", "a": None}],
            "array": [[], ["a"], ["b"], ["a"]],
            "nil array": [[], [None], [None, None], [None], ["a"]],
            "multiple duplicates": [{"a": "b"}, {"a": "c"}, {"a": "b"}, {"a": "c"}, {"a": "c"}],
        },
        "errors": [
            (DUP, "root.strings[2]"),
            (DUP, "root.integers[2]"),
            (DUP, "root.booleans[2]"),
            (DUP, "root.float64[2]"),
            (DUP, "root.nil[2]"),
            (DUP, "root.empty maps[2]"),
            (DUP, "root.map values[2]"),
            (DUP, "root.array[3]"),
            (DUP, "root.nil array[3]"),
            (DUP, "root.multiple duplicates[2]"),
            (DUP, "root.multiple duplicates[3]"),
        ],
    },
    {
        "test": T,
        "name": "set list with compound array items",
        "schema": _object(array=_array(STRING, **SET)),
        "obj": {"array": [[], ["a"], ["a"]]},
        "errors": [(DUP, "root.array[2]")],
    },
    {
        "test": T,
        "name": "map list with compound map items",
        "schema": _object(
            **{
                "strings": _map_list(["a"], STRING),
                "integers": _map_list(["a"], {"type": "integer"}),
                "booleans": _map_list(["a"], {"type": "boolean"}),
                "float64": _map_list(["a"], {"type": "number"}),
                "nil": _map_list(["a"]),
                "array": _map_list(["a"], _array(STRING)),
                "one key": _map_list(["a"], STRINGS),
                "two keys": _map_list(["a", "b"], STRINGS),
                "undefined key": _map_list(["a", "b"], STRINGS),
                "compound key": _map_list(["a"], {"type": "object"}),
                "nil key": _map_list(["a"], _object(a=STRING, c=STRING)),
                "nil item": _map_list(["a"], _object(a=STRING, c=STRING)),
                "nil item multiple keys": _map_list(
                    ["a", "b"], _object(a=STRING, b=STRING, c=STRING)
                ),
                "multiple duplicates": _map_list(["a"], {"type": "object"}),
            }
        ),
        "obj": {
            "strings": ["a"],
            "integers": [1],
            "booleans": [False],
            "float64": [1.0],
            "nil": [None],
            "array": [["a"]],
            "one key": [{"a": "0", "c": "2"}, {"a": "1", "c": "1"}, {"a": "1", "c": "2"}, {}],
            "two keys": [
                {"a": "1", "b": "1", "c": "1"},
                {"a": "1", "b": "2", "c": "2"},
                {"a": "1", "b": "2", "c": "3"},
                {},
            ],
            "undefined key": [
                {"a": "1", "b": "1", "c": "1"},
                {"a": "1", "c": "2"},
                {"a": "1", "c": "3"},
                {},
            ],
            "compound key": [
                {"a": [], "c": "1"},
                {"a": None, "c": "1"},
                {"a": ["a"], "c": "1"},
                {"a": ["a", 42], "c": "2"},
                {"a": ["a", 42], "c": ["3"]},
            ],
            "nil key": [{"a": [], "c": "1"}, {"a": None, "c": "1"}, {"c": "1"}, {"a": None}],
            "nil item": [None, {"a": "0", "c": "1"}, {"a": None}, {"c": "1"}],
            "nil item multiple keys": [None, {"b": "0", "c": "1"}, {"a": None}, {"c": "1"}],
            "multiple duplicates": [
                {"a": [], "c": "1"},
                {"a": None, "c": "1"},
                {"a": ["a"], "c": "1"},
                {"a": ["a", 42], "c": "2"},
                {"a": ["a", 42], "c": ["3"]},
                {"a": ["a"], "c": "1", "d": "1"},
                {"a": ["a"], "c": "1", "d": "2"},
            ],
        },
        "errors": [
            (INV, "root.strings[0]"),
            (INV, "root.integers[0]"),
            (INV, "root.booleans[0]"),
            (INV, "root.float64[0]"),
            (INV, "root.array[0]"),
            (DUP, "root.one key[2]"),
            (DUP, "root.two keys[2]"),
            (DUP, "root.undefined key[2]"),
            (DUP, "root.compound key[4]"),
            (DUP, "root.nil key[3]"),
            (DUP, "root.nil item[3]"),
            (DUP, "root.nil item multiple keys[3]"),
            (DUP, "root.multiple duplicates[4]"),
            (DUP, "root.multiple duplicates[5]"),
        ],
    },
]
