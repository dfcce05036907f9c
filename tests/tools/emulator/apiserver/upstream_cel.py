"""kube-apiserver's own CEL compilation and cost cases, restated as data.

Source: kubernetes/apiextensions-apiserver v0.36.3,
``pkg/apiserver/schema/cel/compilation_test.go``. ``CEL_COMPILATION`` is
``TestCelCompilation``: a schema (upstream's ``schema.Structural`` written as the
JSONSchemaProps it stands for), its rules, and per rule what upstream expects (``error``:
None or a text the error contains; ``transition``: whether it reads ``oldSelf``;
``messageExpressionError``). ``COST_ESTIMATION`` is ``TestCostEstimation``: each case's
schema generator (upstream's helpers, restated below as builders of the same schemas), the
cost upstream computes with the generator's bound left unset (``expectedCalcCost``) and set
(``expectedSetCost``), and the costs it must at least reach.
"""

# ruff: noqa: E501

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SOURCE = "kubernetes/apiextensions-apiserver v0.36.3 pkg/apiserver/schema/cel/compilation_test.go"

CEL_COMPILATION: list[dict[str, Any]] = [
    {
        "name": "optional primitive transition rule type checking",
        "schema": {
            "type": "integer",
            "x-kubernetes-validations": [
                {"rule": "self >= oldSelf.value()", "optionalOldSelf": True},
                {"rule": "self >= oldSelf.orValue(1)", "optionalOldSelf": True},
                {
                    "rule": "oldSelf.hasValue() ? self >= oldSelf.value() : true",
                    "optionalOldSelf": True,
                },
                {"rule": "self >= oldSelf", "optionalOldSelf": True},
                {"rule": "self >= oldSelf.orValue('')", "optionalOldSelf": True},
            ],
        },
        "expected": [
            {"error": None, "transition": True},
            {"error": None, "transition": True},
            {"error": None, "transition": True},
            {"error": "optional"},
            {"error": "orValue"},
        ],
    },
    {
        "name": "optional complex transition rule type checking",
        "schema": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.i >= oldSelf.i.value()", "optionalOldSelf": True},
                {"rule": "self.s == oldSelf.s.value()", "optionalOldSelf": True},
                {"rule": "self.b == oldSelf.b.value()", "optionalOldSelf": True},
                {"rule": "self.o == oldSelf.o.value()", "optionalOldSelf": True},
                {"rule": "self.o.i >= oldSelf.o.i.value()", "optionalOldSelf": True},
                {"rule": "self.o.s == oldSelf.o.s.value()", "optionalOldSelf": True},
                {"rule": "self.o.b == oldSelf.o.b.value()", "optionalOldSelf": True},
                {"rule": "self.o.o == oldSelf.o.o.value()", "optionalOldSelf": True},
                {"rule": "self.o.i >= oldSelf.o.i.orValue(1)", "optionalOldSelf": True},
                {
                    "rule": "oldSelf.hasValue() ? self.o.i >= oldSelf.o.i.value() : true",
                    "optionalOldSelf": True,
                },
                {"rule": "self.o.i >= oldSelf.o.i", "optionalOldSelf": True},
                {"rule": "self.o.i >= oldSelf.o.s.orValue(0)", "optionalOldSelf": True},
            ],
            "properties": {
                "i": {"type": "integer"},
                "b": {"type": "boolean"},
                "s": {"type": "string"},
                "a": {"type": "array", "items": {"type": "integer"}},
                "o": {
                    "type": "object",
                    "properties": {
                        "i": {"type": "integer"},
                        "b": {"type": "boolean"},
                        "s": {"type": "string"},
                        "a": {"type": "array", "items": {"type": "integer"}},
                        "o": {"type": "object"},
                    },
                },
            },
        },
        "expected": [
            {"error": None, "transition": True},
            {"error": None, "transition": True},
            {"error": None, "transition": True},
            {"error": None, "transition": True},
            {"error": None, "transition": True},
            {"error": None, "transition": True},
            {"error": None, "transition": True},
            {"error": None, "transition": True},
            {"error": None, "transition": True},
            {"error": None, "transition": True},
            {"error": "optional"},
            {"error": "orValue"},
        ],
    },
    {
        "name": "valid object",
        "schema": {
            "type": "object",
            "x-kubernetes-validations": [
                {
                    "rule": "self.minReplicas < self.maxReplicas",
                    "message": "minReplicas should be smaller than maxReplicas",
                }
            ],
            "properties": {"minReplicas": {"type": "integer"}, "maxReplicas": {"type": "integer"}},
        },
        "expected": [{"error": None}],
    },
    {
        "name": "valid for string",
        "schema": {
            "type": "string",
            "x-kubernetes-validations": [
                {"rule": "self.startsWith('s')", "message": "scoped field should start with 's'"}
            ],
        },
        "expected": [{"error": None}],
    },
    {
        "name": "valid for byte",
        "schema": {
            "type": "string",
            "x-kubernetes-validations": [
                {
                    "rule": "string(self).endsWith('s')",
                    "message": "scoped field should end with 's'",
                }
            ],
            "format": "byte",
        },
        "expected": [{"error": None}],
    },
    {
        "name": "valid for boolean",
        "schema": {
            "type": "boolean",
            "x-kubernetes-validations": [
                {"rule": "self == true", "message": "scoped field should be true"}
            ],
        },
        "expected": [{"error": None}],
    },
    {
        "name": "valid for integer",
        "schema": {
            "type": "integer",
            "x-kubernetes-validations": [
                {"rule": "self > 0", "message": "scoped field should be greater than 0"}
            ],
        },
        "expected": [{"error": None}],
    },
    {
        "name": "valid for number",
        "schema": {
            "type": "number",
            "x-kubernetes-validations": [
                {"rule": "self > 1.0", "message": "scoped field should be greater than 1.0"}
            ],
        },
        "expected": [{"error": None}],
    },
    {
        "name": "valid nested object of object",
        "schema": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.nestedObj.val == 10", "message": "val should be equal to 10"}
            ],
            "properties": {
                "nestedObj": {
                    "type": "object",
                    "properties": {"val": {"type": "integer", "format": "int64"}},
                }
            },
        },
        "expected": [{"error": None}],
    },
    {
        "name": "valid nested object of array",
        "schema": {
            "type": "object",
            "x-kubernetes-validations": [
                {
                    "rule": "size(self.nestedObj[0]) == 10",
                    "message": "size of first element in nestedObj should be equal to 10",
                }
            ],
            "properties": {
                "nestedObj": {
                    "type": "array",
                    "items": {"type": "array", "items": {"type": "string"}},
                }
            },
        },
        "expected": [{"error": None}],
    },
    {
        "name": "valid nested array of array",
        "schema": {
            "type": "array",
            "x-kubernetes-validations": [
                {
                    "rule": "size(self[0][0]) == 10",
                    "message": "size of items under items of scoped field should be equal to 10",
                }
            ],
            "items": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
        },
        "expected": [{"error": None}],
    },
    {
        "name": "valid nested array of object",
        "schema": {
            "type": "array",
            "x-kubernetes-validations": [
                {
                    "rule": "self[0].nestedObj.val == 10",
                    "message": "val under nestedObj under properties under "
                    "items should be equal to 10",
                }
            ],
            "items": {
                "type": "object",
                "properties": {
                    "nestedObj": {
                        "type": "object",
                        "properties": {"val": {"type": "integer", "format": "int64"}},
                    }
                },
            },
        },
        "expected": [{"error": None}],
    },
    {
        "name": "valid map",
        "schema": {
            "type": "object",
            "x-kubernetes-validations": [
                {
                    "rule": "size(self) > 0",
                    "message": "size of scoped field should be greater than 0",
                }
            ],
            "additionalProperties": {"type": "boolean", "nullable": False},
        },
        "expected": [{"error": None}],
    },
    {
        "name": "invalid checking for number",
        "schema": {
            "type": "number",
            "x-kubernetes-validations": [
                {
                    "rule": "size(self) == 10",
                    "message": "size of scoped field should be equal to 10",
                }
            ],
        },
        "expected": [{"error": "compilation failed"}],
    },
    {
        "name": "compilation failure",
        "schema": {
            "type": "integer",
            "x-kubernetes-validations": [
                {
                    "rule": "size(self) == 10",
                    "message": "size of scoped field should be equal to 10",
                }
            ],
        },
        "expected": [{"error": "compilation failed"}],
    },
    {
        "name": "valid for escaping",
        "schema": {
            "type": "object",
            "x-kubernetes-validations": [
                {
                    "rule": "size(self.__namespace__[0]) == 10",
                    "message": "size of first element in nestedObj should be equal to 10",
                },
                {"rule": "self.__if__ == 10"},
                {"rule": "self.self == 10"},
            ],
            "properties": {
                "namespace": {
                    "type": "array",
                    "items": {"type": "array", "items": {"type": "string"}},
                },
                "if": {"type": "integer"},
                "self": {"type": "integer"},
            },
        },
        "expected": [{"error": None}, {"error": None}, {"error": None}],
    },
    {
        "name": "invalid for escaping",
        "schema": {
            "type": "object",
            "x-kubernetes-validations": [
                {
                    "rule": "size(self.namespace[0]) == 10",
                    "message": "size of first element in nestedObj should be equal to 10",
                },
                {"rule": "self.if == 10"},
                {"rule": "self == 10"},
            ],
            "properties": {
                "namespace": {
                    "type": "array",
                    "items": {"type": "array", "items": {"type": "string"}},
                },
                "if": {"type": "integer"},
                "self": {"type": "integer"},
            },
        },
        "expected": [{"error": None}, {"error": None}, {"error": "found no matching overload"}],
    },
    {
        "name": "transition rule identified",
        "schema": {
            "type": "integer",
            "x-kubernetes-validations": [{"rule": "self > 0"}, {"rule": "self >= oldSelf"}],
        },
        "expected": [{"error": None, "transition": False}, {"error": None, "transition": True}],
    },
    {
        "name": "expression must evaluate to bool",
        "schema": {"type": "object", "x-kubernetes-validations": [{"rule": "42"}]},
        "expected": [{"error": "must evaluate to a bool"}],
    },
    {
        "name": "messageExpression inclusion",
        "schema": {
            "type": "string",
            "x-kubernetes-validations": [
                {
                    "rule": "self.startsWith('s')",
                    "messageExpression": "\"scoped field should start with 's'\"",
                }
            ],
        },
        "expected": [{"error": None}],
    },
    {
        "name": "messageExpression must evaluate to a string",
        "schema": {
            "type": "integer",
            "x-kubernetes-validations": [{"rule": "self == 5", "messageExpression": "42"}],
        },
        "expected": [{"messageExpressionError": "must evaluate to a string"}],
    },
    {
        "name": "messageExpression syntax error",
        "schema": {
            "type": "number",
            "x-kubernetes-validations": [{"rule": "self < 32.0", "messageExpression": '"abc'}],
        },
        "expected": [{"messageExpressionError": "messageExpression compilation failed"}],
    },
]

COST_ESTIMATION: list[dict[str, Any]] = [
    {
        "name": "number array with all",
        "generator": ["genArrayWithRule", "number", "self.all(x, true)"],
        "expectedCalcCost": 4718591,
        "setMaxElements": 10,
        "expectedSetCost": 32,
    },
    {
        "name": "string array with all",
        "generator": ["genArrayWithRule", "string", "self.all(x, true)"],
        "expectedCalcCost": 3145727,
        "setMaxElements": 20,
        "expectedSetCost": 62,
    },
    {
        "name": "boolean array with all",
        "generator": ["genArrayWithRule", "boolean", "self.all(x, true)"],
        "expectedCalcCost": 1887437,
        "setMaxElements": 5,
        "expectedSetCost": 17,
    },
    {
        "name": "array of number arrays with all",
        "generator": ["genArrayOfArraysWithRule", "number", "self.all(x, true)"],
        "expectedCalcCost": 3145727,
        "setMaxElements": 100,
        "expectedSetCost": 302,
    },
    {
        "name": "array of objects with all",
        "generator": ["genObjectArrayWithRule", "self.all(x, true)"],
        "expectedCalcCost": 555128,
        "setMaxElements": 50,
        "expectedSetCost": 152,
    },
    {
        "name": "map of numbers with all",
        "generator": ["genMapWithRule", "number", "self.all(x, true)"],
        "expectedCalcCost": 1348169,
        "setMaxElements": 10,
        "expectedSetCost": 32,
    },
    {
        "name": "map of numbers with has",
        "generator": ["genMapWithRule", "number", "has(self.x)"],
        "expectedCalcCost": 0,
        "setMaxElements": 100,
        "expectedSetCost": 0,
    },
    {
        "name": "map of strings with all",
        "generator": ["genMapWithRule", "string", "self.all(x, true)"],
        "expectedCalcCost": 1179647,
        "setMaxElements": 3,
        "expectedSetCost": 11,
    },
    {
        "name": "map of strings with has",
        "generator": ["genMapWithRule", "string", "has(self.x)"],
        "expectedCalcCost": 0,
        "setMaxElements": 550,
        "expectedSetCost": 0,
    },
    {
        "name": "map of booleans with all",
        "generator": ["genMapWithRule", "boolean", "self.all(x, true)"],
        "expectedCalcCost": 943718,
        "setMaxElements": 100,
        "expectedSetCost": 302,
    },
    {
        "name": "map of booleans with has",
        "generator": ["genMapWithRule", "boolean", "has(self.x)"],
        "expectedCalcCost": 0,
        "setMaxElements": 1024,
        "expectedSetCost": 0,
    },
    {
        "name": "string with contains",
        "generator": ["genStringWithRule", "self.contains('test')"],
        "expectedCalcCost": 314574,
        "setMaxElements": 10,
        "expectedSetCost": 5,
    },
    {
        "name": "string with startsWith",
        "generator": ["genStringWithRule", "self.startsWith('test')"],
        "expectedCalcCost": 2,
        "setMaxElements": 15,
        "expectedSetCost": 2,
    },
    {
        "name": "string with endsWith",
        "generator": ["genStringWithRule", "self.endsWith('test')"],
        "expectedCalcCost": 2,
        "setMaxElements": 30,
        "expectedSetCost": 2,
    },
    {
        "name": "concat string",
        "generator": ["genStringWithRule", 'size(self + "hello") > size("hello")'],
        "expectedCalcCost": 314578,
        "setMaxElements": 4,
        "expectedSetCost": 7,
    },
    {
        "name": "index of array with numbers",
        "generator": ["genArrayWithRule", "number", "self[1] == 0.0"],
        "expectedCalcCost": 2,
        "setMaxElements": 5000,
        "expectedSetCost": 2,
    },
    {
        "name": "index of array with strings",
        "generator": ["genArrayWithRule", "string", "self[1] == self[1]"],
        "expectedCalcCost": 314577,
        "setMaxElements": 8,
        "expectedSetCost": 314577,
    },
    {
        "name": "O(n^2) loop with numbers",
        "generator": ["genArrayWithRule", "number", "self.all(x, self.all(y, true))"],
        "expectCalcCostExceedsLimit": 100000000,
        "setMaxElements": 10,
        "expectedSetCost": 352,
    },
    {
        "name": "O(n^3) loop with numbers",
        "generator": ["genArrayWithRule", "number", "self.all(x, self.all(y, self.all(z, true)))"],
        "expectCalcCostExceedsLimit": 100000000,
        "setMaxElements": 10,
        "expectedSetCost": 3552,
    },
    {
        "name": "regex matches simple",
        "generator": ["genStringWithRule", 'self.matches("x")'],
        "expectedCalcCost": 314574,
        "setMaxElements": 50,
        "expectedSetCost": 22,
    },
    {
        "name": "regex matches empty string",
        "generator": ["genStringWithRule", '"".matches("(((((((((())))))))))[0-9]")'],
        "expectedCalcCost": 7,
        "setMaxElements": 10,
        "expectedSetCost": 7,
    },
    {
        "name": "regex matches empty regex",
        "generator": ["genStringWithRule", 'self.matches("")'],
        "expectedCalcCost": 1,
        "setMaxElements": 100,
        "expectedSetCost": 1,
    },
    {
        "name": "map of strings with value length",
        "generator": ["genNestedSpecWithRule", "self.all(x, x.contains(self[x]))"],
        "expectedCalcCost": 2752507,
        "setMaxElements": 10,
        "expectedSetCost": 72,
    },
    {
        "name": "set array maxLength to zero",
        "generator": ["genArrayWithRule", "number", "self[3] == 0.0"],
        "expectedCalcCost": 2,
        "setMaxElements": 0,
        "expectedSetCost": 2,
    },
    {
        "name": "set map maxLength to zero",
        "generator": ["genMapWithRule", "number", 'self["x"] == 0.0'],
        "expectedCalcCost": 2,
        "setMaxElements": 0,
        "expectedSetCost": 2,
    },
    {
        "name": "set string maxLength to zero",
        "generator": ["genStringWithRule", 'self == "x"'],
        "expectedCalcCost": 2,
        "setMaxElements": 0,
        "expectedSetCost": 1,
    },
    {
        "name": "set bytes maxLength to zero",
        "generator": ["genBytesWithRule", 'self == b"x"'],
        "expectedCalcCost": 2,
        "setMaxElements": 0,
        "expectedSetCost": 1,
    },
    {
        "name": "set maxLength greater than estimated maxLength",
        "generator": ["genArrayWithRule", "number", "self.all(x, x == 0.0)"],
        "expectedCalcCost": 6291454,
        "setMaxElements": 6291456,
        "expectedSetCost": 25165826,
    },
    {
        "name": "nested types with root rule with all supporting maxLength",
        "generator": ["genAllMaxNestedSpecWithRootRule", 'self.all(x, x["y"].required == "z")'],
        "expectedCalcCost": 7340027,
        "setMaxElements": 10,
        "expectedSetCost": 72,
    },
    {
        "name": "nested types with root rule with one supporting maxLength",
        "generator": ["genOneMaxNestedSpecWithRootRule", 'self.all(x, x["y"].required == "z")'],
        "expectedCalcCost": 7340027,
        "setMaxElements": 10,
        "expectedSetCost": 7340027,
    },
    {
        "name": "int-or-string array with all",
        "generator": ["genArrayWithRule", "int-or-string", "self.all(x, true)"],
        "expectedCalcCost": 4718591,
        "setMaxElements": 10,
        "expectedSetCost": 32,
    },
    {
        "name": "index of array with int-or-strings",
        "generator": ["genArrayWithRule", "int-or-string", "self[0] == 5"],
        "expectedCalcCost": 3,
        "setMaxElements": 10,
        "expectedSetCost": 3,
    },
    {
        "name": "index of array with booleans",
        "generator": ["genArrayWithRule", "boolean", "self[0] == false"],
        "expectedCalcCost": 2,
        "setMaxElements": 25,
        "expectedSetCost": 2,
    },
    {
        "name": "index of array of objects",
        "generator": ["genObjectArrayWithRule", "self[0] == null"],
        "expectedCalcCost": 2,
        "setMaxElements": 422,
        "expectedSetCost": 2,
    },
    {
        "name": "index of array of array of numnbers",
        "generator": ["genArrayOfArraysWithRule", "number", "self[0][0] == -1.0"],
        "expectedCalcCost": 3,
        "setMaxElements": 51,
        "expectedSetCost": 3,
    },
    {
        "name": "array of number maps with all",
        "generator": ["getMapArrayWithRule", "number", "self.all(x, x.y == 25.2)"],
        "expectedCalcCost": 6291452,
        "setMaxElements": 12,
        "expectedSetCost": 74,
    },
    {
        "name": "index of array of number maps",
        "generator": ["getMapArrayWithRule", "number", "self[0].x > 2.0"],
        "expectedCalcCost": 4,
        "setMaxElements": 3000,
        "expectedSetCost": 4,
    },
    {
        "name": "duration array with all",
        "generator": ["genArrayWithRule", "duration", "self.all(x, true)"],
        "expectedCalcCost": 2359295,
        "setMaxElements": 5,
        "expectedSetCost": 17,
    },
    {
        "name": "index of duration array",
        "generator": ["genArrayWithRule", "duration", "self[0].getHours() == 2"],
        "expectedCalcCost": 4,
        "setMaxElements": 525,
        "expectedSetCost": 4,
    },
    {
        "name": "date array with all",
        "generator": ["genArrayWithRule", "date", "self.all(x, true)"],
        "expectedCalcCost": 725936,
        "setMaxElements": 15,
        "expectedSetCost": 47,
    },
    {
        "name": "index of date array",
        "generator": ["genArrayWithRule", "date", "self[2].getDayOfMonth() == 13"],
        "expectedCalcCost": 4,
        "setMaxElements": 42,
        "expectedSetCost": 4,
    },
    {
        "name": "date-time array with all",
        "generator": ["genArrayWithRule", "date-time", "self.all(x, true)"],
        "expectedCalcCost": 428963,
        "setMaxElements": 25,
        "expectedSetCost": 77,
    },
    {
        "name": "index of date-time array",
        "generator": ["genArrayWithRule", "date-time", "self[2].getMinutes() == 45"],
        "expectedCalcCost": 4,
        "setMaxElements": 99,
        "expectedSetCost": 4,
    },
    {
        "name": "map of int-or-strings with all",
        "generator": ["genMapWithRule", "int-or-string", "self.all(x, true)"],
        "expectedCalcCost": 1348169,
        "setMaxElements": 15,
        "expectedSetCost": 47,
    },
    {
        "name": "map of int-or-strings with has",
        "generator": ["genMapWithRule", "int-or-string", "has(self.x)"],
        "expectedCalcCost": 0,
        "setMaxElements": 5000,
        "expectedSetCost": 0,
    },
    {
        "name": "map of objects with all",
        "generator": ["genMapWithCustomItemRule", ["genObjectForMap"], "self.all(x, true)"],
        "expectedCalcCost": 428963,
        "setMaxElements": 20,
        "expectedSetCost": 62,
    },
    {
        "name": "map of objects with has",
        "generator": ["genMapWithCustomItemRule", ["genObjectForMap"], "has(self.x)"],
        "expectedCalcCost": 0,
        "setMaxElements": 9001,
        "expectedSetCost": 0,
    },
    {
        "name": "map of number maps with all",
        "generator": ["genMapWithCustomItemRule", ["genMapForMap"], "self.all(x, true)"],
        "expectedCalcCost": 1179647,
        "setMaxElements": 10,
        "expectedSetCost": 32,
    },
    {
        "name": "map of number maps with has",
        "generator": ["genMapWithCustomItemRule", ["genMapForMap"], "has(self.x)"],
        "expectedCalcCost": 0,
        "setMaxElements": 101,
        "expectedSetCost": 0,
    },
    {
        "name": "map of number arrays with all",
        "generator": ["genMapWithCustomItemRule", ["genArrayForMap"], "self.all(x, true)"],
        "expectedCalcCost": 1179647,
        "setMaxElements": 25,
        "expectedSetCost": 77,
    },
    {
        "name": "map of number arrays with has",
        "generator": ["genMapWithCustomItemRule", ["genArrayForMap"], "has(self.x)"],
        "expectedCalcCost": 0,
        "setMaxElements": 40000,
        "expectedSetCost": 0,
    },
    {
        "name": "map of durations with all",
        "generator": ["genMapWithRule", "duration", "self.all(x, true)"],
        "expectedCalcCost": 1048577,
        "setMaxElements": 5,
        "expectedSetCost": 17,
    },
    {
        "name": "map of durations with has",
        "generator": ["genMapWithRule", "duration", "has(self.x)"],
        "expectedCalcCost": 0,
        "setMaxElements": 256,
        "expectedSetCost": 0,
    },
    {
        "name": "map of dates with all",
        "generator": ["genMapWithRule", "date", "self.all(x, true)"],
        "expectedCalcCost": 524288,
        "setMaxElements": 10,
        "expectedSetCost": 32,
    },
    {
        "name": "map of dates with has",
        "generator": ["genMapWithRule", "date", "has(self.x)"],
        "expectedCalcCost": 0,
        "setMaxElements": 65536,
        "expectedSetCost": 0,
    },
    {
        "name": "map of date-times with all",
        "generator": ["genMapWithRule", "date-time", "self.all(x, true)"],
        "expectedCalcCost": 349526,
        "setMaxElements": 25,
        "expectedSetCost": 77,
    },
    {
        "name": "map of date-times with has",
        "generator": ["genMapWithRule", "date-time", "has(self.x)"],
        "expectedCalcCost": 0,
        "setMaxElements": 490,
        "expectedSetCost": 0,
    },
    {
        "name": "extended library regex find",
        "generator": ["genStringWithRule", "self.find('[0-9]+') == ''"],
        "expectedCalcCost": 629147,
        "setMaxElements": 10,
        "expectedSetCost": 11,
    },
    {
        "name": "extended library join",
        "generator": ["custom"],
        "expectedCalcCost": 329853068905,
        "setMaxElements": 10,
        "expectedSetCost": 43,
    },
    {
        "name": "extended library isSorted",
        "generator": ["custom"],
        "expectedCalcCost": 329854432052,
        "setMaxElements": 10,
        "expectedSetCost": 52,
    },
    {
        "name": "extended library replace",
        "generator": ["custom"],
        "expectedCalcCost": 629154,
        "setMaxElements": 4,
        "expectedSetCost": 12,
    },
    {
        "name": "extended library split",
        "generator": ["custom"],
        "expectedCalcCost": 629160,
        "setMaxElements": 10,
        "expectedSetCost": 22,
    },
    {
        "name": "extended library lowerAscii",
        "generator": ["custom"],
        "expectedCalcCost": 314575,
        "setMaxElements": 10,
        "expectedSetCost": 6,
    },
    {
        "name": "check cost of size call",
        "generator": ["genMapWithRule", "integer", "oldSelf.size() == self.size()"],
        "expectedCalcCost": 5,
        "setMaxElements": 10,
        "expectedSetCost": 5,
    },
    {
        "name": "check cost of timestamp comparison",
        "generator": ["genMapWithRule", "date-time", 'self["a"] == self["b"]'],
        "expectedCalcCost": 8,
        "setMaxElements": 7,
        "expectedSetCost": 8,
    },
    {
        "name": "check cost of duration comparison",
        "generator": ["genMapWithRule", "duration", 'self["c"] == self["d"]'],
        "expectedCalcCost": 8,
        "setMaxElements": 42,
        "expectedSetCost": 8,
    },
    {
        "name": "enums with maxLength equals to the longest possible value",
        "generator": ["genEnumWithRuleAndValues", "self.contains('A')", "A", "B", "C", "LongValue"],
        "expectedCalcCost": 2,
        "setMaxElements": 1000,
        "expectedSetCost": 401,
    },
    {
        "name": "IntOrString type with quantity rule",
        "generator": ["custom"],
        "expectedCalcCost": 314574,
        "setMaxElements": 20,
        "expectedSetCost": 9,
    },
]


# TestCelCompilation's case "whitespace-only rule": upstream checks the program is nil; the
# port keeps no program, so the case is restated as "no error, nothing compiled".
CEL_COMPILATION.append(
    {
        "name": "whitespace-only rule",
        "schema": {"type": "object", "x-kubernetes-validations": [{"rule": " \t"}]},
        "expected": [{"error": None, "blank": True}],
    }
)

NOT_PORTED = {
    "TestCelCompilation/unmodified expression may use CEL environment features planned to be added in future releases": (
        "runs a test-only CEL library (fakeLib) in the stored-expressions environment; "
        "the port has the new-expressions environment of a create only"
    ),
    "TestCelCompilation/modified expressions may not use CEL environment features planned to be added in future releases": (
        "declares upstream's test-only function fakeFunction (the refusal it checks, "
        "'undeclared reference', is what the port gives any unknown function)"
    ),
}

# --- upstream's schema generators of TestCostEstimation, restated ---------------------------
# Each takes the generator's arguments and returns a builder: bound (maxItems, maxProperties
# or maxLength, as upstream's generator sets it) -> schema. None leaves the bound unset.

Schema = dict[str, Any]
Builder = Callable[[int | None], Schema]


def _rule(rule: str) -> Schema:
    return {"x-kubernetes-validations": [{"rule": rule}]}


def _typed(name: str) -> Schema:
    """``parseRuleType``: date formats are strings, int-or-string has no type."""
    if name in ("duration", "date", "date-time"):
        return {"type": "string", "format": name}
    if name == "int-or-string":
        return {"x-kubernetes-int-or-string": True}
    return {"type": name}


def _bound(key: str, n: int | None) -> Schema:
    return {key: n} if n is not None else {}


_REQUIRED_OPTIONAL = {"required": {"type": "string"}, "optional": {"type": "string"}}


def _object_for_map() -> Schema:
    return {"type": "object", "properties": dict(_REQUIRED_OPTIONAL), "required": ["required"]}


def _string(n: int | None) -> Schema:
    return {"type": "string", **_bound("maxLength", n)}


GENERATORS: dict[str, Callable[..., Builder]] = {
    "genArrayWithRule": lambda t, rule: (
        lambda n: {"type": "array", "items": _typed(t), **_bound("maxItems", n), **_rule(rule)}
    ),
    "genArrayOfArraysWithRule": lambda t, rule: (
        lambda n: {
            "type": "array",
            "items": {"type": "array", "items": {"type": t}},
            **_bound("maxItems", n),
            **_rule(rule),
        }
    ),
    "genObjectArrayWithRule": lambda rule: (
        lambda n: {
            "type": "array",
            "items": _object_for_map(),
            **_bound("maxItems", n),
            **_rule(rule),
        }
    ),
    "getMapArrayWithRule": lambda t, rule: (
        lambda n: {
            "type": "array",
            "items": {"type": "object", "additionalProperties": {"type": t}},
            **_bound("maxItems", n),
            **_rule(rule),
        }
    ),
    "genMapWithRule": lambda t, rule: (
        lambda n: {
            "type": "object",
            "additionalProperties": _typed(t),
            **_bound("maxProperties", n),
            **_rule(rule),
        }
    ),
    "genStringWithRule": lambda rule: lambda n: {**_string(n), **_rule(rule)},
    "genEnumWithRuleAndValues": lambda rule, *values: (
        lambda n: {**_string(n), "enum": list(values), **_rule(rule)}
    ),
    "genBytesWithRule": lambda rule: lambda n: {**_string(n), "format": "byte", **_rule(rule)},
    "genNestedSpecWithRule": lambda rule: (
        lambda n: {
            "type": "object",
            "additionalProperties": _string(n),
            **_bound("maxProperties", n),
            **_rule(rule),
        }
    ),
    "genAllMaxNestedSpecWithRootRule": lambda rule: (
        lambda n: {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": {**_object_for_map(), **_bound("maxProperties", n)},
                **_bound("maxProperties", n),
            },
            **_bound("maxItems", n),
            **_rule(rule),
        }
    ),
    "genOneMaxNestedSpecWithRootRule": lambda rule: (
        lambda n: {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": _object_for_map(),
                **_bound("maxProperties", n),
            },
            **_rule(rule),
        }
    ),
    "genMapWithCustomItemRule": lambda item, rule: (
        lambda n: {
            "type": "object",
            "additionalProperties": item,
            **_bound("maxProperties", n),
            **_rule(rule),
        }
    ),
}
ITEMS: dict[str, Callable[[], Schema]] = {
    "genObjectForMap": _object_for_map,
    "genArrayForMap": lambda: {"type": "array", "items": {"type": "number"}},
    "genMapForMap": lambda: {"type": "object", "additionalProperties": {"type": "number"}},
}

# the cases whose generator upstream writes inline (``func(max *int64) ...``), by case name
CUSTOM: dict[str, Builder] = {
    "extended library join": lambda n: {
        "type": "array",
        "items": _string(n),
        "x-kubernetes-list-type": "atomic",
        **_bound("maxItems", n),
        **_rule("self.join(' ') == 'aa bb'"),
    },
    "extended library isSorted": lambda n: {
        "type": "array",
        "items": _string(n),
        "x-kubernetes-list-type": "atomic",
        **_bound("maxItems", n),
        **_rule("self.isSorted() == true"),
    },
    "extended library replace": lambda n: {
        "type": "object",
        "properties": {"str": _string(n), "before": _string(2), "after": _string(4)},
        **_rule("self.str.replace(self.before, self.after) == 'does not matter'"),
    },
    "extended library split": lambda n: {
        "type": "object",
        "properties": {"str": _string(n), "separator": _string(n)},
        **_rule("self.str.split(self.separator) == []"),
    },
    "extended library lowerAscii": lambda n: {
        **_string(n),
        **_rule("self.lowerAscii() == 'lower!'"),
    },
    "IntOrString type with quantity rule": lambda n: {
        "x-kubernetes-int-or-string": True,
        **_bound("maxLength", n),
        **_rule("isQuantity(self)"),
    },
}


def cost_schema(case: dict[str, Any], bound: int | None) -> Schema:
    """The schema of a ``COST_ESTIMATION`` case with its bound unset (None) or set."""
    generator = case["generator"]
    if generator == ["custom"]:
        return CUSTOM[case["name"]](bound)
    name, *args = generator
    args = [ITEMS[a[0]]() if isinstance(a, list) else a for a in args]
    return GENERATORS[name](*args)(bound)
