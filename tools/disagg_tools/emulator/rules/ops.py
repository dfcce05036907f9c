"""Object operations of the API emulator: patches, label selectors, write bookkeeping.

Under :mod:`disagg_tools.emulator.server` (a dev/bench tool). These are the parts of
API-server semantics that kmock 0.8 lacks and that a controller relies on: RFC 7386 merge
patches, RFC 6902 JSON patches (a failed ``test`` is a conflict), equality/set-based label
selectors, which edits bump ``metadata.generation``, and the built-in kinds' validation a
controller can trip over (:func:`validate`).
"""

from __future__ import annotations

import copy
import datetime
import functools
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from disagg_operator.api import kinds


class PatchFailed(ValueError):
    """A JSON patch could not be applied (a ``test`` op failed or a path is missing)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: dicts merge recursively, ``None`` deletes a key, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def validate(key: str, obj: Mapping[str, Any]) -> None:
    """Raise 422 for what the API server's validation of built-in kinds refuses and a
    controller can write by mistake: a PodDisruptionBudget with both minAvailable and
    maxUnavailable (policy/v1 ValidatePodDisruptionBudgetSpec)."""
    spec = obj.get("spec") or {}
    if key.endswith("/poddisruptionbudgets") and {"minAvailable", "maxUnavailable"} <= set(spec):
        raise StatusError(
            422,
            "Invalid",
            f"PodDisruptionBudget.policy {obj['metadata'].get('name', '')!r} is invalid: spec: "
            "Invalid value: minAvailable and maxUnavailable cannot be both set",
        )


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchFailed(f"JSON pointer {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    node = doc
    for part in parts[:-1]:
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError) as e:
            raise PatchFailed(f"path segment {part!r} not found") from e
    return node


def _get(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    parent = _parent(doc, parts)
    try:
        return parent[int(parts[-1])] if isinstance(parent, list) else parent[parts[-1]]
    except (KeyError, IndexError, ValueError) as e:
        raise PatchFailed(f"path {'/'.join(parts)!r} not found") from e


def _add(doc: Any, parts: list[str], value: Any) -> None:
    parent, key = _parent(doc, parts), parts[-1]
    if isinstance(parent, list):
        parent.insert(len(parent) if key == "-" else int(key), value)
    else:
        parent[key] = value


def _remove(doc: Any, parts: list[str]) -> Any:
    parent, key = _parent(doc, parts), parts[-1]
    try:
        return parent.pop(int(key)) if isinstance(parent, list) else parent.pop(key)
    except (KeyError, IndexError, ValueError) as e:
        raise PatchFailed(f"cannot remove missing path {'/'.join(parts)!r}") from e


def json_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 on a copy of ``doc``; raises :class:`PatchFailed` on any failed op."""
    doc = copy.deepcopy(doc)
    for op in ops:
        kind, parts = op.get("op"), _pointer(str(op.get("path", "")))
        if kind == "test":
            if _get(doc, parts) != op.get("value"):
                raise PatchFailed(f"test failed at {op.get('path')!r}")
        elif kind == "add":
            _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            _remove(doc, parts)
            _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind in {"move", "copy"}:
            source = _pointer(str(op.get("from", "")))
            value = _remove(doc, source) if kind == "move" else copy.deepcopy(_get(doc, source))
            _add(doc, parts, value)
        else:
            raise PatchFailed(f"unknown JSON patch op {kind!r}")
    return doc


_SET_RE = re.compile(r"^\s*(!?)([\w./-]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")


_TERM_SPLIT = re.compile(r",(?![^(]*\))")  # commas outside "in (a,b)" lists


def _term(term: str) -> Callable[[Mapping[str, str]], bool]:
    for op in ("!=", "==", "="):
        if op in term:
            key, value = (s.strip() for s in term.split(op, 1))
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    match = _SET_RE.match(term)
    if match is None:
        raise ValueError(f"unsupported label selector term {term!r}")
    negate, key, setop, values = match.groups()
    if setop is None:
        return (lambda labels: key not in labels) if negate else (lambda labels: key in labels)
    allowed = frozenset(v.strip() for v in values.split(","))
    if setop == "in":
        return lambda labels: labels.get(key) in allowed
    return lambda labels: labels.get(key) not in allowed


@functools.lru_cache(maxsize=256)
def compile_selector(selector: str) -> Callable[[Mapping[str, str]], bool]:
    """A label selector (``a=b,c!=d,e,!f,g in (x,y),h notin (z)``) as a predicate."""
    terms = [_term(t.strip()) for t in _TERM_SPLIT.split(selector) if t.strip()]
    return lambda labels: all(term(labels) for term in terms)


def selector_matches(selector: str | None, labels: Mapping[str, str] | None) -> bool:
    """Whether ``labels`` match a Kubernetes label selector (empty matches everything)."""
    return not selector or compile_selector(selector)(labels or {})


def field_selector_matches(selector: str | None, obj: Mapping[str, Any]) -> bool:
    """Only ``metadata.name`` and ``metadata.namespace`` equality, as controllers use them."""
    if not selector:
        return True
    meta = obj.get("metadata", {})
    for term in selector.split(","):
        key, _, value = term.partition("=")
        field = key.rstrip("=!").removeprefix("metadata.")
        actual = meta.get(field)
        if key.endswith("!") and actual == value.lstrip("="):
            return False
        if not key.endswith("!") and actual != value.lstrip("="):
            return False
    return True


def spec_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether an edit bumps ``metadata.generation``: anything besides metadata and status."""

    def strip(o: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in o.items() if k not in {"metadata", "status"}}

    return strip(old) != strip(new)


class ResourcePath(NamedTuple):
    """A parsed resource URL: ``/api[s]/<group>/<version>[/namespaces/<ns>]/<plural>[/...]``."""

    group: str
    version: str
    plural: str
    namespace: str
    name: str
    subresource: str

    @property
    def key(self) -> str:
        """``group/version/plural``, or ``v1/plural`` for the core group."""
        return f"{self.group}/{self.version}/{self.plural}" if self.group else f"v1/{self.plural}"


def parse_path(path: str) -> ResourcePath | None:
    """The resource a URL addresses, or None for discovery and other non-resource URLs."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    name = rest[1] if len(rest) > 1 else ""
    return ResourcePath(group, version, rest[0], namespace, name, "/".join(rest[2:]))


WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


class ApiCall(NamedTuple):
    """One resource request, as RBAC sees it."""

    verb: str  # get/list/watch/create/update/patch/delete/deletecollection
    api_group: str  # "" for the core group
    resource: str  # plural
    subresource: str  # "" or e.g. "status"
    namespace: str  # "" for cluster-scoped or all-namespaces requests
    name: str  # "" for collection requests


ALL_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
# group/version/plural → (kind, namespaced, subresources, shortnames): the kinds the operator
# owns and uses come from its one table (api.kinds; its own resource is served from the
# CRD), and beside them the kinds Helm, kubectl and the tests touch.
_OTHERS: dict[str, tuple[str, bool, tuple[str, ...], tuple[str, ...]]] = {
    "v1/namespaces": ("Namespace", False, ("status",), ("ns",)),
    # the local kubelet's nodes: their topology.kubernetes.io/zone label is each
    # EndpointSlice endpoint's zone
    "v1/nodes": ("Node", False, ("status",), ("no",)),
    "v1/configmaps": ("ConfigMap", True, (), ("cm",)),
    "v1/serviceaccounts": ("ServiceAccount", True, (), ("sa",)),
    "events.k8s.io/v1/events": ("Event", True, (), ("ev",)),
    "apps/v1/deployments": ("Deployment", True, ("status", "scale"), ("deploy",)),
    "discovery.k8s.io/v1/endpointslices": ("EndpointSlice", True, (), ()),
    # the chart's ServiceMonitor (metrics.serviceMonitor.enabled), checked by its contract's
    # shape as the operator's own CRD kinds are (contracts.prometheus)
    "monitoring.coreos.com/v1/servicemonitors": ("ServiceMonitor", True, (), ("smon",)),
    "rbac.authorization.k8s.io/v1/roles": ("Role", True, (), ()),
    "rbac.authorization.k8s.io/v1/rolebindings": ("RoleBinding", True, (), ()),
    "rbac.authorization.k8s.io/v1/clusterroles": ("ClusterRole", False, (), ()),
    "rbac.authorization.k8s.io/v1/clusterrolebindings": ("ClusterRoleBinding", False, (), ()),
    "apiextensions.k8s.io/v1/customresourcedefinitions": (
        "CustomResourceDefinition",
        False,
        ("status",),
        ("crd",),
    ),
}
BUILTIN_KINDS: dict[str, tuple[str, bool, tuple[str, ...], tuple[str, ...]]] = {
    **{
        f"{version}/{k.plural}": (
            k.kind,
            k.namespaced,
            ("status",) if k.status else (),
            k.short_names,
        )
        for k in kinds.KINDS
        if k is not kinds.RESOURCE
        for version in k.api_versions
    },
    **_OTHERS,
}


def now() -> str:
    return datetime.datetime.now(tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
        "details": details,
    }


class StatusError(Exception):
    """An API failure answered as a Kubernetes ``Status`` body with its HTTP code."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        headers: Mapping[str, str] | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message)
        self.body = status_body(code, reason, message, **details)
        self.code = code
        self.headers = dict(headers or {})


class AdmissionRule(NamedTuple):
    """A rule that refuses writes, as an admission webhook or a ResourceQuota would.

    Matches calls on resource ``key`` (``v1/pods``) with ``verb``, in ``namespace`` ("":
    any); answers ``code`` with a ``Status`` body of ``reason`` and ``message``, where
    ``{name}`` stands for the object's name."""

    key: str
    verb: str
    namespace: str
    code: int
    reason: str
    message: str

    def check(self, key: str, call: ApiCall, body: Any) -> None:
        """Raise the rule's :class:`StatusError` if it matches this call."""
        if key != self.key or call.verb != self.verb:
            return
        if self.namespace and call.namespace != self.namespace:
            return
        meta = body.get("metadata", {}) if isinstance(body, dict) else {}
        name = call.name or meta.get("name") or ""
        kind = call.resource.removesuffix("s")
        message = self.message.replace("{name}", name)
        raise StatusError(self.code, self.reason, message, name=name, kind=kind)


class Throttle:
    """A rule that answers the next ``count`` matching calls 429 TooManyRequests with
    ``Retry-After: retry_after``, as API Priority and Fairness does when a priority
    level's queues are full. Matches calls on resource ``key`` with ``verb`` ("": any)."""

    def __init__(self, key: str, verb: str, count: int, retry_after: int) -> None:
        self.key, self.verb, self.left, self.retry_after = key, verb, count, retry_after

    def check(self, key: str, call: ApiCall) -> None:
        """Raise the 429 if this call matches and calls are left to refuse."""
        if self.left <= 0 or key != self.key or (self.verb and call.verb != self.verb):
            return
        self.left -= 1
        raise StatusError(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
            headers={"Retry-After": str(self.retry_after)},
            retryAfterSeconds=self.retry_after,
        )


def api_call(method: str, where: ResourcePath, params: Mapping[str, str]) -> ApiCall:
    """The RBAC view of one HTTP request on a resource URL."""
    if method == "GET":
        verb = "get" if where.name else "list"
        if params.get("watch") in {"true", "1"}:
            verb = "watch"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "")
        verb = verb or ("delete" if where.name else "deletecollection")
    return ApiCall(verb, where.group, where.plural, where.subresource, where.namespace, where.name)


def updated(method: str, ctype: str, body: Any, current: dict[str, Any]) -> dict[str, Any]:
    """The object after this PUT or PATCH, before status-subresource and no-op handling."""
    if method == "PUT":
        if not isinstance(body, dict):
            raise StatusError(400, "BadRequest", "the request body must be an object")
        new: dict[str, Any] = json.loads(json.dumps(body))
    elif "json-patch" in ctype:
        try:
            new = json_patch(current, body)
        except PatchFailed as e:
            raise StatusError(422, "Invalid", f"the JSON patch could not be applied: {e}") from e
    else:
        new = merge_patch(current, body)
    expected = (
        (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
    )
    if expected and expected != current["metadata"]["resourceVersion"]:
        raise StatusError(
            409,
            "Conflict",
            "the object has been modified; please apply your "
            "changes to the latest version and try again",
        )
    return new


def kubeconfig(url: str) -> dict[str, Any]:
    """A kubeconfig body pointing at ``url`` with no authentication."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulator", "cluster": {"server": url}}],
        "users": [{"name": "emulator", "user": {}}],
        "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "emulator"}}],
        "current-context": "emulator",
    }
