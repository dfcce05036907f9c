"""The scale subresource of the API emulator: an object ↔ its ``autoscaling/v1`` Scale.

Under :mod:`disagg_tools.emulator.server` (a dev/bench tool). A CRD's
``subresources.scale`` names three JSON paths (``specReplicasPath``,
``statusReplicasPath``, ``labelSelectorPath``); an API server answers GET ``.../scale``
with a Scale built from them and applies a PATCH or PUT of the Scale to the object's
``specReplicasPath``. Only ``spec.replicas`` of a written Scale is used, as upstream.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from disagg_tools.emulator.rules import ops, tables


def _value(obj: Any, path: str | None) -> Any:
    found = tables.jsonpath(obj, path) if path else []
    return found[0] if found else None


def to_scale(obj: Mapping[str, Any], paths: Mapping[str, str]) -> dict[str, Any]:
    """The Scale of ``obj``; missing replicas read as 0, as upstream."""
    meta = obj["metadata"]
    status: dict[str, Any] = {"replicas": _value(obj, paths.get("statusReplicasPath")) or 0}
    selector = _value(obj, paths.get("labelSelectorPath"))
    if selector:
        status["selector"] = selector
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": _value(obj, paths["specReplicasPath"]) or 0},
        "status": status,
    }


def with_replicas(obj: Mapping[str, Any], paths: Mapping[str, str], scale: Any) -> dict[str, Any]:
    """A copy of ``obj`` with ``spec.replicas`` of the written ``scale`` at its path.

    Raises :class:`ops.StatusError` (422) when the Scale carries no valid replica count.
    """
    replicas = (
        ((scale or {}).get("spec") or {}).get("replicas") if isinstance(scale, dict) else None
    )
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise ops.StatusError(
            422, "Invalid", f"Scale.spec.replicas: Invalid value: {replicas!r}: must be >= 0"
        )
    new = copy.deepcopy(dict(obj))
    *parents, leaf = paths["specReplicasPath"].lstrip(".").split(".")
    node = new
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = replicas
    return new
