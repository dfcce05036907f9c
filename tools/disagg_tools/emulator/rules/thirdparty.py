"""Objects of the custom kinds the operator renders (LeaderWorkerSet, PodMonitor,
PrometheusRule, InferencePool) checked against the shape each contract declares: the
fields render writes, typed as that kind's CRD at the contract's tag types them. A field
the shape does not declare is *unknown* (a cluster with the CRD prunes it or, under
strict field validation, refuses it); a wrong type, a value outside an enum or pattern, a
missing required field is *invalid*.

Pure, as :mod:`.builtin` (whose result and paths it shares): an embedded pod template and
every object's ``metadata`` are judged by Kubernetes' own definitions, inlined with the
ObjectMeta inside a template cut as the CRD's generator cuts it (the definitions name
ObjectMeta by reference, and the root's must stay whole). Kinds no contract declares are
not judged.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jsonschema

from disagg_operator.contracts import inference_pool, lws, prometheus, shape
from disagg_tools.emulator.rules import builtin

# (apiVersion, kind) → the shape its contract declares.
SHAPES: dict[tuple[str, str], shape.Schema] = {
    (lws.API_VERSION, lws.KIND): lws.SHAPE,
    (prometheus.API_VERSION, "PodMonitor"): prometheus.POD_MONITOR_SHAPE,
    (prometheus.API_VERSION, "PrometheusRule"): prometheus.PROMETHEUS_RULE_SHAPE,
    (prometheus.API_VERSION, "ServiceMonitor"): prometheus.SERVICE_MONITOR_SHAPE,
    (inference_pool.API_VERSION, inference_pool.KIND): inference_pool.SHAPE,
}


def schema(node: Any) -> Any:
    """A shape as plain JSON Schema: its markers turned into what they stand for."""
    if isinstance(node, list):
        return [schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    if shape.BUILTIN in node:
        meta = node.get(shape.EMBEDDED)
        kept = None if meta is None else frozenset(meta)
        return _inline(builtin.definitions()[node[shape.BUILTIN]], kept)
    out = {key: schema(value) for key, value in node.items()}
    if out.pop("x-kubernetes-int-or-string", False):
        out["type"] = ["integer", "string"]  # a pattern, if any, judges the string alone
    return out


def _inline(node: Any, meta: frozenset[str] | None) -> Any:
    """A Kubernetes definition with the definitions it names inlined, each ObjectMeta
    cut to the fields in ``meta`` (None: whole), descriptions left out."""
    if isinstance(node, list):
        return [_inline(item, meta) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        found = builtin.definitions()[name]
        if name == shape.OBJECT_META and meta is not None:
            kept = {k: v for k, v in found["properties"].items() if k in meta}
            found = {**found, "properties": kept}
        return _inline(found, meta)
    return {
        k: _inline(v, meta)
        for k, v in node.items()
        if not (k == "description" and isinstance(v, str))
    }


@functools.cache
def validator(kind: str, api_version: str) -> jsonschema.Draft202012Validator | None:
    """The compiled shape of ``kind`` in ``api_version`` (None: no contract declares it)."""
    declared = SHAPES.get((api_version, kind))
    if declared is None:
        return None
    return jsonschema.Draft202012Validator(schema(declared))


def check(obj: Mapping[str, Any]) -> builtin.Findings:
    """Unknown and invalid fields of a custom object (none for a kind no shape declares)."""
    found = validator(str(obj.get("kind")), str(obj.get("apiVersion")))
    return builtin.Findings([], []) if found is None else builtin.findings(found, obj)
