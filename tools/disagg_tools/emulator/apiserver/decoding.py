"""Decoding a custom resource: what kube-apiserver notices and drops before validation.

Ports apiextensions-apiserver v0.36.3 ``pkg/apiserver/customresource_handler.go``
(``schemaCoercingDecoder``, ``unstructuredSchemaCoercer``; ``schema/objectmeta/coerce.go``)
and the strict JSON decoding (duplicate, unknown fields) apiserver v0.36.3 asks for.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from disagg_tools.emulator.apiserver import defaulting, pruning

# metav1.ObjectMeta's JSON fields, and those of the lists in it
_META = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)
_META_ITEMS = {
    "ownerReferences": frozenset(
        {"apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"}
    ),
    "managedFields": frozenset(
        {"manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource"}
    ),
}
# the json module's string scanner (typeshed leaves it out): (text, end) of a JSON string
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]
_PATCH_OP = frozenset({"op", "path", "from", "value"})
_INT64 = (-(2**63), 2**63 - 1)


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader without the timestamp resolver: ``2024-01-01`` stays a string."""


_YamlLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _go_int(text: str) -> int | float:
    """A JSON integer as Go's unstructured decoding keeps it: int64, else float64."""
    value = int(text)
    return value if _INT64[0] <= value <= _INT64[1] else float(value)


def parse(body: bytes, content_type: str = "application/json") -> tuple[Any, list[str]]:
    """The decoded body and its ``duplicate field "x"`` errors (JSON bodies; a YAML body,
    which is what an ``application/*yaml`` type or a non-JSON text is, reports none)."""
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for k, v in items:
            if k in seen:
                duplicates.append(f'duplicate field "{k}"')
            seen[k] = v
        return seen

    if not body:
        return {}, []
    if "yaml" not in content_type:
        try:
            value = json.loads(body, object_pairs_hook=pairs, parse_int=_go_int)
        except ValueError:
            pass
        else:  # in document order, as the Go decoder meets them
            text = body.decode()
            return value, [
                f'duplicate field "{k}"' for k in _repeated_keys(text)
            ] if duplicates else []
    return yaml.load(body, Loader=_YamlLoader), []  # a SafeLoader subclass


def _repeated_keys(text: str) -> list[str]:
    """Each object key met a second time in the JSON ``text``, in document order."""
    found: list[str] = []
    stack: list[set[str] | None] = []  # a set of keys per open object, None per array
    key_next, i = False, 0
    while i < len(text):
        char = text[i]
        if char == '"':
            value, i = _scanstring(text, i + 1)
            keys = stack[-1] if stack else None
            if key_next and keys is not None:
                if value in keys:
                    found.append(value)
                keys.add(value)
                key_next = False
            continue
        if char in "{[":
            stack.append(set() if char == "{" else None)
            key_next = char == "{"
        elif char in "}]":
            stack.pop()
            key_next = False
        elif char == ",":
            key_next = bool(stack) and stack[-1] is not None
        i += 1
    return found


def json_patch_errors(ops: Any) -> list[str]:
    """``UnmarshalStrict`` of a JSON patch into its operations: unknown keys of an op."""
    found = []
    for op in ops if isinstance(ops, list) else []:
        for k in op if isinstance(op, dict) else {}:
            if k not in _PATCH_OP:
                found.append(f'json patch unknown field "{k}"')
    return found


def unknown_metadata(obj: dict[str, Any]) -> list[str]:
    """Drop (in place) what ``metav1.ObjectMeta`` has no field for; their paths."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return []
    found = []
    for k in list(meta):
        if k not in _META:
            found.append(f"metadata.{k}")
            del meta[k]
        elif k in _META_ITEMS and isinstance(meta[k], list):
            for i, item in enumerate(meta[k]):
                for sub in list(item) if isinstance(item, dict) else []:
                    if sub not in _META_ITEMS[k]:
                        found.append(f"metadata.{k}[{i}].{sub}")
                        del item[sub]
    return found


def coerce(
    obj: dict[str, Any], schema: dict[str, Any] | None, *, group: str, kind: str
) -> list[str]:
    """``unstructuredSchemaCoercer.apply`` on a decoded object, in place: unknown metadata
    dropped, then (for this kind) unknown fields pruned and non-nullable nulls without a
    default dropped. The unknown field paths, in the order the apiserver reports them."""
    found = unknown_metadata(obj)
    api_version = str(obj.get("apiVersion") or "")
    if api_version.rpartition("/")[0] == group and obj.get("kind") == kind:
        found.extend(pruning.prune(obj, schema, is_resource_root=True))
        defaulting.prune_non_nullable_nulls(obj, schema)
    return found


def strict_errors(duplicates: list[str], unknown: list[str]) -> list[str]:
    """The strict decoding errors: duplicates first, then unknown fields."""
    return [*duplicates, *(f'unknown field "{p}"' for p in unknown)]


def strict_message(errors: list[str]) -> str:
    """``runtime.NewStrictDecodingError(...).Error()``."""
    return "strict decoding error: " + ", ".join(errors)


def warning_headers(texts: list[str]) -> list[str]:
    """``Warning`` header values as k8s.io/apiserver's recorder writes them: each text once,
    ``299 - "<text>"`` with ``"`` and ``\\`` escaped, and past 4096 runes in all, each cut
    to 256 runes (apiserver pkg/endpoints/filters/warning.go)."""
    ordered = [t for t in dict.fromkeys(texts) if t]
    if sum(len(t) for t in ordered) > 4096:
        kept, written = [], 0
        for text in (t[:256] for t in ordered):
            if written >= 4096:
                break
            kept.append(text)
            written += len(text)
        ordered = kept
    return ['299 - "' + t.replace("\\", "\\\\").replace('"', '\\"') + '"' for t in ordered]
