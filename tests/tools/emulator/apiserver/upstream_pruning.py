"""The cases of kubernetes/apiextensions-apiserver v0.36.3
``pkg/apiserver/schema/pruning/algorithm_test.go``, restated as data.

Each case names its upstream test function and case. A Go ``structuralschema.Structural``
is written as the raw schema dict it stands for (``Properties`` → ``properties``,
``Items`` → ``items``, ``AdditionalProperties`` → ``additionalProperties``: the schema, or
the bool; ``Generic.Type`` → ``type``; ``XPreserveUnknownFields`` and ``XEmbeddedResource``
→ their ``x-kubernetes-*`` keys); a nil schema is None.
"""

from __future__ import annotations

from typing import Any

OBJECT = {"type": "object"}
PRESERVE = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
EMBEDDED = {"type": "object", "x-kubernetes-embedded-resource": True}


def _embedded_instance(unspecified_meta: dict[str, Any]) -> dict[str, Any]:
    """One embedded object of the embedded-resource cases, with its unknown fields."""
    return {
        "apiVersion": "foo/v1",
        "kind": "Foo",
        "unspecified": "bar",
        "metadata": {**unspecified_meta, "unspecified": "bar"},
        "spec": {"unspecified": "bar"},
    }


def _embedded_json(meta: dict[str, Any]) -> dict[str, Any]:
    nested = _embedded_instance(meta)
    nested["spec"]["embedded"] = _embedded_instance(meta)
    return {
        "apiVersion": "foo/v1",
        "kind": "Foo",
        "metadata": {**meta, "unspecified": "bar"},
        "unspecified": "bar",
        "pruned": _embedded_instance(meta),
        "preserving": _embedded_instance(meta),
        "nested": nested,
    }


def _embedded_expected(meta: dict[str, Any], root_kept: bool) -> dict[str, Any]:
    kept_meta = {**meta, "unspecified": "bar"}
    pruned = {"apiVersion": "foo/v1", "kind": "Foo", "metadata": kept_meta, "spec": {}}
    expected = {
        "pruned": pruned,
        "preserving": _embedded_instance(meta),
        "nested": {
            "apiVersion": "foo/v1",
            "kind": "Foo",
            "metadata": kept_meta,
            "spec": {"embedded": {**pruned, "metadata": dict(kept_meta), "spec": {}}},
        },
    }
    if root_kept:
        expected = {"apiVersion": "foo/v1", "kind": "Foo", "metadata": kept_meta, **expected}
    return expected


EMBEDDED_PRUNED = [
    "nested.spec.embedded.spec.unspecified",
    "nested.spec.embedded.unspecified",
    "nested.spec.unspecified",
    "nested.unspecified",
    "pruned.spec.unspecified",
    "pruned.unspecified",
    "unspecified",
]
ROOT_META = {"name": "instance", "namespace": "myns", "labels": {"foo": "bar"}}

CASES: list[dict[str, Any]] = [
    {"test": "TestPrune", "name": "empty", "json": None, "schema": None, "expected_object": None},
    {"test": "TestPrune", "name": "scalar", "json": 4, "schema": {}, "expected_object": 4},
    {
        "test": "TestPrune",
        "name": "scalar array",
        "json": [1, 2],
        "schema": {"items": {}},
        "expected_object": [1, 2],
    },
    {
        "test": "TestPrune",
        "name": "object array",
        "json": [{"a": 1}, {"b": 1}, {"a": 1, "b": 2, "c": 3}],
        "schema": {"items": {"properties": {"a": {}, "c": {}}}},
        "expected_object": [{"a": 1}, {}, {"a": 1, "c": 3}],
        "expected_pruned": ["[1].b", "[2].b"],
    },
    {
        "test": "TestPrune",
        "name": "object array with nil schema",
        "json": [{"a": 1}, {"b": 1}, {"a": 1, "b": 2, "c": 3}],
        "schema": None,
        "expected_object": [{}, {}, {}],
        "expected_pruned": ["[0].a", "[1].b", "[2].a", "[2].b", "[2].c"],
    },
    {
        "test": "TestPrune",
        "name": "object array object",
        "json": {
            "array": [{"a": 1}, {"b": 1}, {"a": 1, "b": 2, "c": 3}],
            "unspecified": {"a": 1},
            "specified": {"a": 1, "b": 2, "c": 3},
        },
        "schema": {
            "properties": {
                "array": {"items": {"properties": {"a": {}, "c": {}}}},
                "specified": {"properties": {"a": {}, "c": {}}},
            }
        },
        "expected_object": {
            "array": [{"a": 1}, {}, {"a": 1, "c": 3}],
            "specified": {"a": 1, "c": 3},
        },
        "expected_pruned": ["array[1].b", "array[2].b", "specified.b", "unspecified"],
    },
    {
        "test": "TestPrune",
        "name": "nested x-kubernetes-preserve-unknown-fields",
        "json": {
            "unspecified": "bar",
            "alpha": "abc",
            "beta": 42.0,
            "unspecifiedObject": {"unspecified": "bar"},
            "pruning": {
                "unspecified": "bar",
                "unspecifiedObject": {"unspecified": "bar"},
                "pruning": {"unspecified": "bar"},
                "apiVersion": "unknown",
                "preserving": {"unspecified": "bar"},
            },
            "preserving": {
                "unspecified": "bar",
                "unspecifiedObject": {"unspecified": "bar"},
                "pruning": {"unspecified": "bar"},
                "preserving": {"unspecified": "bar"},
                "preservingUnknownType": [{"foo": True}, {"bar": True}],
            },
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
                "foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}
            },
            "preservingAdditionalPropertiesKeyPruneValues": {
                "foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}
            },
        },
        "schema": {
            **PRESERVE,
            "properties": {
                "alpha": {"type": "string"},
                "beta": {"type": "number"},
                "pruning": {
                    "type": "object",
                    "properties": {"preserving": PRESERVE, "pruning": OBJECT},
                },
                "preserving": {
                    **PRESERVE,
                    "properties": {
                        "preserving": PRESERVE,
                        "preservingUnknownType": {"x-kubernetes-preserve-unknown-fields": True},
                        "pruning": OBJECT,
                    },
                },
                "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
                    **PRESERVE,
                    "additionalProperties": {"type": "object", "properties": {"specified": OBJECT}},
                },
                "preservingAdditionalPropertiesKeyPruneValues": {
                    "type": "object",
                    "additionalProperties": {"type": "object", "properties": {"specified": OBJECT}},
                },
            },
        },
        "expected_object": {
            "unspecified": "bar",
            "alpha": "abc",
            "beta": 42.0,
            "unspecifiedObject": {"unspecified": "bar"},
            "pruning": {"pruning": {}, "preserving": {"unspecified": "bar"}},
            "preserving": {
                "unspecified": "bar",
                "unspecifiedObject": {"unspecified": "bar"},
                "pruning": {},
                "preserving": {"unspecified": "bar"},
                "preservingUnknownType": [{"foo": True}, {"bar": True}],
            },
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
                "foo": {"specified": {}}
            },
            "preservingAdditionalPropertiesKeyPruneValues": {"foo": {"specified": {}}},
        },
        "expected_pruned": [
            "preserving.pruning.unspecified",
            "preservingAdditionalPropertiesKeyPruneValues.foo.specified.unspecified",
            "preservingAdditionalPropertiesKeyPruneValues.foo.unspecified",
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.specified.unspecified",
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.unspecified",
            "pruning.apiVersion",
            "pruning.pruning.unspecified",
            "pruning.unspecified",
            "pruning.unspecifiedObject",
        ],
    },
    {
        "test": "TestPrune",
        "name": "additionalProperties with schema",
        "json": {"a": 1, "b": 1, "c": {"a": 1, "b": 2, "c": {"a": 1}}},
        "schema": {
            "properties": {"a": {}, "c": {"additionalProperties": {"type": "integer"}}},
        },
        "expected_object": {"a": 1, "c": {"a": 1, "b": 2, "c": {}}},
        "expected_pruned": ["b", "c.c.a"],
    },
    {
        "test": "TestPrune",
        "name": "additionalProperties with bool",
        "json": {"a": 1, "b": 1, "c": {"a": 1, "b": 2, "c": {"a": 1, "apiVersion": "unknown"}}},
        "schema": {"properties": {"a": {}, "c": {"additionalProperties": False}}},
        "expected_object": {"a": 1, "c": {"a": 1, "b": 2, "c": {}}},
        "expected_pruned": ["b", "c.c.a", "c.c.apiVersion"],
    },
    {
        "test": "TestPrune",
        "name": "x-kubernetes-embedded-resource",
        "json": _embedded_json({"name": "instance"}),
        "schema": {
            "type": "object",
            "properties": {
                "pruned": {**EMBEDDED, "properties": {"spec": OBJECT}},
                "preserving": {**EMBEDDED, "x-kubernetes-preserve-unknown-fields": True},
                "nested": {
                    **EMBEDDED,
                    "properties": {
                        "spec": {
                            "type": "object",
                            "properties": {
                                "embedded": {**EMBEDDED, "properties": {"spec": OBJECT}}
                            },
                        }
                    },
                },
            },
        },
        "expected_object": _embedded_expected({"name": "instance"}, root_kept=False),
        "expected_pruned": EMBEDDED_PRUNED,
    },
    {
        "test": "TestPrune",
        "name": "x-kubernetes-embedded-resource, with root=true",
        "json": _embedded_json(ROOT_META),
        "is_resource_root": True,
        "schema": {
            "type": "object",
            "properties": {
                "metadata": OBJECT,
                "pruned": {**EMBEDDED, "properties": {"metadata": OBJECT, "spec": OBJECT}},
                "preserving": {**EMBEDDED, "x-kubernetes-preserve-unknown-fields": True},
                "nested": {
                    **EMBEDDED,
                    "properties": {
                        "spec": {
                            "type": "object",
                            "properties": {
                                "embedded": {
                                    **EMBEDDED,
                                    "properties": {"metadata": OBJECT, "spec": OBJECT},
                                }
                            },
                        }
                    },
                },
            },
        },
        "expected_object": _embedded_expected(ROOT_META, root_kept=True),
        "expected_pruned": EMBEDDED_PRUNED,
    },
]
