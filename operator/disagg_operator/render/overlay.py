"""A role's ``podTemplate`` merged over its derived pod.

Validation has already refused what would break a derived setting
(:mod:`disagg_operator.validation.pods`), so the merge is plain:

- labels and annotations added to the pod's;
- pod fields (service account, pull secrets, classes) set; the pod security context
  merged key by key (the user's key wins); the grace period raised;
- volumes appended; init containers placed after the derived ones (a model download
  runs before the user's);
- a container named like a derived one merged into it: volumeMounts and envFrom
  appended, env merged by name, securityContext and resources merged key by key, other
  keys set; any other container appended.
"""

from __future__ import annotations

import copy
from typing import Any

from disagg_operator.api.podtemplate import PodTemplate

POD_FIELDS = (
    "serviceAccountName",
    "automountServiceAccountToken",
    "priorityClassName",
    "runtimeClassName",
    "imagePullSecrets",
    "resourceClaims",
)


def apply(pod_spec: dict[str, Any], template: PodTemplate | None) -> dict[str, Any]:
    """``pod_spec`` with ``template.spec`` merged in (a new dict; the input is kept)."""
    if template is None or template.spec is None:
        return pod_spec
    given = template.spec.model_dump(by_alias=True, exclude_none=True)
    out = copy.deepcopy(pod_spec)
    for key in POD_FIELDS:
        if key in given:
            out[key] = given[key]
    if "securityContext" in given:
        out["securityContext"] = {**out.get("securityContext", {}), **given["securityContext"]}
    if "terminationGracePeriodSeconds" in given:
        out["terminationGracePeriodSeconds"] = max(
            out["terminationGracePeriodSeconds"], given["terminationGracePeriodSeconds"]
        )
    for key in ("volumes", "initContainers"):
        if given.get(key):
            out[key] = [*out.get(key, []), *given[key]]
    by_name = {c["name"]: c for c in out["containers"]}
    for container in given.get("containers", []):
        if container["name"] in by_name:
            _merge_container(by_name[container["name"]], container)
        else:
            out["containers"].append(container)
    return out


def metadata(template: PodTemplate | None) -> tuple[dict[str, str], dict[str, str]]:
    """The (labels, annotations) the template adds to each pod."""
    meta = template.metadata if template is not None else None
    if meta is None:
        return {}, {}
    return dict(meta.labels or {}), dict(meta.annotations or {})


def _merge_container(derived: dict[str, Any], given: dict[str, Any]) -> None:
    for key, value in given.items():
        if key in ("volumeMounts", "envFrom"):
            derived[key] = [*derived.get(key, []), *value]
        elif key == "env":
            names = {e["name"] for e in value}
            derived[key] = [e for e in derived.get(key, []) if e["name"] not in names] + value
        elif key in ("securityContext", "resources"):
            derived[key] = {**derived.get(key, {}), **value}
        else:
            derived[key] = value
