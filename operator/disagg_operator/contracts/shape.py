"""The vocabulary the contracts write third-party object shapes in: what render writes of
a kind no Kubernetes release defines (a LeaderWorkerSet, a PodMonitor, ...), as a small
structural schema typed as that kind's CRD types it at one upstream tag.

A shape is a JSON-schema dict: ``type``, ``properties``, ``required``, ``items``, string
maps, the CRD's own enums, patterns and bounds, and ``additionalProperties: false`` on
every object it lists the fields of, so a field render writes that the shape does not
declare is *unknown*. Two markers stand for what the CRD itself says differently:
:data:`BUILTIN` (this node is Kubernetes' own definition of that name, e.g. the core/v1
PodTemplateSpec a CRD embeds, with the ObjectMeta inside it cut to the fields the CRD's
generator keeps, :data:`EMBEDDED_META`) and :data:`INT_OR_STRING` (the CRD's
``x-kubernetes-int-or-string``).
The root's ``$comment`` names the upstream repository, tag and file the shape was read
from (``scripts/thirdparty-shapes.py`` holds each shape to that file). Pure data.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Schema = dict[str, Any]

BUILTIN = "x-disagg-builtin"  # value: the OpenAPI definition, io.k8s.api.core.v1.PodSpec
EMBEDDED = "x-disagg-embedded-meta"  # value: the fields an ObjectMeta inside it keeps
INT_OR_STRING: Schema = {"x-kubernetes-int-or-string": True}
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
POD_TEMPLATE_SPEC = "io.k8s.api.core.v1.PodTemplateSpec"
# What controller-gen keeps of an ObjectMeta a CRD embeds with
# ``crd:generateEmbeddedObjectMeta=true`` (LWS v0.10.0's Makefile; its CRD shows them).
EMBEDDED_META = ("annotations", "finalizers", "labels", "name", "namespace")


def obj(properties: Schema, *, required: Iterable[str] = (), **rules: Any) -> Schema:
    """An object whose every field is listed (any other is unknown)."""
    out: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required := sorted(required):
        out["required"] = required
    return {**out, **rules}


def string(**rules: Any) -> Schema:
    return {"type": "string", **rules}


def integer(**rules: Any) -> Schema:
    return {"type": "integer", **rules}


def array(items: Schema, **rules: Any) -> Schema:
    return {"type": "array", "items": items, **rules}


def string_map(values: Schema | None = None, **rules: Any) -> Schema:
    """A map of any keys to strings (labels, annotations), ``values`` typing them."""
    return {"type": "object", "additionalProperties": values or string(), **rules}


def builtin(definition: str, embedded_meta: Iterable[str] | None = None) -> Schema:
    """A node that is Kubernetes' own definition ``definition`` (its schema judges it);
    ``embedded_meta``: the fields any ObjectMeta inside it keeps (None: all)."""
    out: Schema = {BUILTIN: definition}
    if embedded_meta is not None:
        out[EMBEDDED] = sorted(embedded_meta)
    return out


def resource(source: str, spec: Schema, *, required: Iterable[str] = ("spec",)) -> Schema:
    """A whole object of a custom kind: apiVersion, kind, ObjectMeta (the API server's
    own for every kind) and ``spec``; ``source``: '<owner/repo> <tag> <CRD file>'."""
    fields = {"apiVersion": string(), "kind": string(), "metadata": builtin(OBJECT_META)}
    return {"$comment": source, **obj({**fields, "spec": spec}, required=required)}
