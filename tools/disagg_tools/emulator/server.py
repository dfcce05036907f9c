"""A Kubernetes API emulator for tests and benchmarks: kmock 0.8 with its gaps fixed.

Dev/bench tool (needs the ``dev`` extra: kmock). Real HTTP on 127.0.0.1, so kopf, the
``kubernetes`` client, kubectl and Helm talk to it as to an API server. kmock provides the
HTTP server, request recording and discovery; this subclass replaces its object store with
one that behaves like an API server wherever a controller can tell the difference
(:mod:`.store`, :mod:`.custom`: kube-apiserver's custom-resource rules, :mod:`.scale`).
What it does and never emulates: docs/operator.md (Testing against the API emulator).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import json
import secrets
from collections.abc import Iterable
from typing import Any, NamedTuple

import aiohttp.web
import attrs
import kmock
import multidict

from disagg_tools.emulator.apiserver import crd, decoding, fielderrors, writes
from disagg_tools.emulator.apiserver.strategy import Served
from disagg_tools.emulator.custom import CustomResources
from disagg_tools.emulator.rules import admission, builtin, gc, ops, scale, tables
from disagg_tools.emulator.store import ObjectStore
from disagg_tools.emulator.verbs import TestVerbs
from disagg_tools.emulator.watch import Req, stream

_CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"
_OPENAPI_V2_PROTO = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_LOG_LIMIT = 100_000  # watch-replay history per resource; older resourceVersions get 410


@attrs.define(kw_only=True)
class Emulator(CustomResources, TestVerbs, ObjectStore, kmock.KubernetesEmulator):
    """kmock's emulator with an API-server-like store; see the module docstring."""

    store: dict[tuple[str, str, str], dict[str, Any]] = attrs.field(factory=dict, init=False)
    calls: list[ops.ApiCall] = attrs.field(factory=list, init=False)
    columns: dict[str, list[dict[str, Any]]] = attrs.field(factory=dict, init=False)
    scales: dict[str, dict[str, str]] = attrs.field(factory=dict, init=False)
    served: dict[str, Served] = attrs.field(factory=dict, init=False)  # CRD keys: their rules
    watch_selectors: list[tuple[str, str]] = attrs.field(factory=list, init=False)
    admission_rules: list[ops.AdmissionRule] = attrs.field(factory=list, init=False)
    throttles: list[ops.Throttle] = attrs.field(factory=list, init=False)
    # store by resource: lists and watches touch one resource, not the whole store
    _index: dict[str, dict[tuple[str, str], dict[str, Any]]] = attrs.field(
        factory=lambda: collections.defaultdict(dict), init=False
    )
    _rv: int = attrs.field(default=0, init=False)
    _log: dict[str, collections.deque[tuple[int, dict[str, Any]]]] = attrs.field(
        factory=lambda: collections.defaultdict(lambda: collections.deque(maxlen=_LOG_LIMIT)),
        init=False,
    )
    _watchers: dict[str, set[asyncio.Queue[dict[str, Any]]]] = attrs.field(
        factory=lambda: collections.defaultdict(set), init=False
    )
    _dependents: dict[str, set[tuple[str, str, str]]] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for key, (kind, namespaced, subresources, shortnames) in ops.BUILTIN_KINDS.items():
            self.register(
                key, kind, namespaced=namespaced, subresources=subresources, shortnames=shortnames
            )

    # ---------------------------------------------------------------- registration
    def register(
        self,
        key: str,
        kind: str,
        *,
        namespaced: bool = True,
        subresources: Iterable[str] = (),
        shortnames: Iterable[str] = (),
        categories: Iterable[str] = (),
        singular: str | None = None,
    ) -> None:
        """Serve resource ``group/version/plural`` (``v1/plural`` for core) with all verbs."""
        self.resources[key] = kmock.ResourceInfo(
            kind=kind,
            namespaced=namespaced,
            singular=singular or kind.lower(),
            verbs=set(ops.ALL_VERBS),
            subresources=set(subresources),
            shortnames=set(shortnames),
            categories=set(categories),
        )

    def register_crd(self, crd: dict[str, Any]) -> None:
        """Serve every version of a CustomResourceDefinition body."""
        spec, names = crd["spec"], crd["spec"]["names"]
        self.served.update(_served(json.dumps(crd, sort_keys=True)))
        for version in spec.get("versions", []):
            if not version.get("served", True):
                continue
            key = f"{spec['group']}/{version['name']}/{names['plural']}"
            self.columns[key] = version.get("additionalPrinterColumns", [])
            if "scale" in version.get("subresources", {}):
                self.scales[key] = version["subresources"]["scale"]
            self.register(
                key,
                names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                subresources=version.get("subresources", {}).keys(),
                shortnames=names.get("shortNames", ()),
                categories=names.get("categories", ()),
                singular=names.get("singular"),
            )

    # ---------------------------------------------------------------- test helpers
    def objects_of(self, key: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Live objects of resource ``key`` (e.g. ``v1/pods``), sorted by namespace/name."""
        objs = self._index[key]
        return [objs[k] for k in sorted(objs) if namespace is None or k[0] == namespace]

    @property
    def revision(self) -> int:
        """The newest resourceVersion issued: unchanged means nothing was written."""
        return self._rv

    def find(self, key: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.get((key, namespace, name))

    # ---------------------------------------------------------------- discovery fixes
    async def _serve_version(self, request: kmock.Request) -> kmock.Payload:
        payload: dict[str, Any] = await super()._serve_version(request)  # type: ignore[assignment]
        if payload.get("groupVersion") == "/v1":
            payload["groupVersion"] = "v1"
        for entry in payload.get("resources", []):
            if "/" in entry["name"]:  # subresources have no short names or categories
                entry["shortNames"], entry["categories"] = [], []
            if entry["name"].endswith("/scale"):  # what kubectl scale's client decodes
                entry.update(group="autoscaling", version="v1", kind="Scale")
                entry["verbs"] = ["get", "patch", "update"]
        return payload

    async def _serve_server_version(self, request: kmock.Request) -> kmock.Payload:
        major, minor, _ = builtin.KUBERNETES.split(".")
        git = f"v{builtin.KUBERNETES}"
        return {"major": major, "minor": minor, "gitVersion": git, "platform": "linux/amd64"}

    # ---------------------------------------------------------------- request dispatch
    async def __call__(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """Resource URLs are served here; discovery and anything else by kmock."""
        if raw.path.startswith("/openapi/"):
            # No schemas: kubectl reads an empty v2 protobuf document as "nothing to check".
            if raw.path == "/openapi/v2":
                return aiohttp.web.Response(body=b"", content_type=_OPENAPI_V2_PROTO)
            return aiohttp.web.json_response({"paths": {}})
        where = ops.parse_path(raw.path)
        if where is None:
            return await super().__call__(raw)
        req = Req(
            raw, where, dict(raw.query), raw.headers.get("Content-Type", ""), await raw.read()
        )
        call = ops.api_call(raw.method, where, req.params)
        self.calls.append(call)
        try:
            info = self._info(where.key)
            for throttle in self.throttles:
                throttle.check(where.key, call)
            for rule in self.admission_rules:
                rule.check(where.key, call, req.payload())
            if call.verb == "watch":
                return await self._watch(req)
            warnings: list[str] = []
            body = self._dispatch(req, call, info, warnings)
        except ops.StatusError as e:
            return aiohttp.web.json_response(e.body, status=e.code, headers=e.headers)
        except fielderrors.ApiError as e:
            return aiohttp.web.json_response(e.body, status=e.code)
        code = 201 if call.verb == "create" and not req.params.get("dryRun") else 200
        headers = multidict.CIMultiDict(("Warning", w) for w in decoding.warning_headers(warnings))
        return aiohttp.web.json_response(body, status=code, headers=headers)

    def _info(self, key: str) -> kmock.ResourceInfo:
        info = self.resources.get(key) if key in self.resources else None
        if not isinstance(info, kmock.ResourceInfo):
            raise ops.StatusError(
                404, "NotFound", f"the server could not find the requested resource ({key})"
            )
        return info

    def _dispatch(
        self, req: Req, call: ops.ApiCall, info: kmock.ResourceInfo, warnings: list[str]
    ) -> dict[str, Any]:
        key, ns = req.where.key, req.where.namespace if info.namespaced else ""
        if call.verb in {"list", "deletecollection"}:
            items = list(self._select(key, ns, req.params))
            if call.verb == "deletecollection":
                policy = self._policy(req)
                items = [self._remove(key, o, policy) for o in items]
            if "as=Table" in req.raw.headers.get("Accept", "") and self.columns.get(key):
                return tables.table(items, self.columns[key], str(self._rv))
            return {
                "kind": f"{info.kind}List",
                "apiVersion": key.rsplit("/", 1)[0],
                "metadata": {"resourceVersion": str(self._rv)},
                "items": items,
            }
        if call.verb == "create":
            return self._create(key, info, ns, req, warnings)
        current = self.store.get((key, ns, call.name))
        if call.verb == "patch" and current is None and "apply-patch" in req.ctype:
            return self._create(key, info, ns, req, warnings)
        if current is None:
            raise ops.StatusError(
                404,
                "NotFound",
                f'{call.resource} "{call.name}" not found',
                name=call.name,
                kind=call.resource,
            )
        if req.where.subresource == "scale" and key in self.scales:
            return self._scale(key, info, current, call, req, warnings)
        if call.verb == "get":
            if "as=Table" in req.raw.headers.get("Accept", "") and self.columns.get(key):
                return tables.table([current], self.columns[key], str(self._rv))
            return current
        if call.verb == "delete":
            policy = self._policy(req)
            return current if req.params.get("dryRun") else self._remove(key, current, policy)
        new = self._updated(key, req, current, warnings)
        return self._write(key, info, current, new, req, warnings)

    @staticmethod
    def _policy(req: Req) -> gc.Policy:
        """A DELETE's propagation policy (its DeleteOptions body or query)."""
        try:
            return gc.delete_policy(req.payload(), req.params)
        except ValueError as e:
            raise ops.StatusError(422, "Invalid", str(e)) from e

    def _local(
        self, method: str, key: str, ns: str, name: str, sub: str, obj: dict[str, Any]
    ) -> dict[str, Any]:
        """One write made here rather than over HTTP, served as a request would be but not
        recorded (:meth:`TestVerbs.put_object`): a failure raises its Status."""
        group_version, plural = key.rsplit("/", 1)
        group, _, version = group_version.rpartition("/")
        where = ops.ResourcePath(group, version, plural, ns, "" if method == "POST" else name, sub)
        raw = _LocalRequest(method, multidict.CIMultiDict())
        body = json.dumps(obj).encode()
        req = Req(raw, where, {"fieldValidation": "Strict"}, "application/json", body)  # type: ignore[arg-type]
        call = ops.api_call(method, where, req.params)
        try:
            return self._dispatch(req, call, self._info(key), [])
        except fielderrors.ApiError as e:
            raise ops.StatusError(e.code, str(e.body.get("reason", "")), str(e)) from e

    def _has_status(self, key: str) -> bool:
        return "status" in self._info(key).subresources

    # ---------------------------------------------------------------- verbs
    def _scale(
        self,
        key: str,
        info: kmock.ResourceInfo,
        current: dict[str, Any],
        call: ops.ApiCall,
        req: Req,
        warnings: list[str],
    ) -> dict[str, Any]:
        """GET, PATCH or PUT ``.../scale``: the Scale, written through to the object."""
        paths = self.scales[key]
        if call.verb == "get":
            return scale.to_scale(current, paths)
        written = ops.updated(
            req.raw.method, req.ctype, req.payload(), scale.to_scale(current, paths)
        )
        new = scale.with_replicas(current, paths, written)
        return scale.to_scale(self._write(key, info, current, new, req, warnings), paths)

    def _create(
        self, key: str, info: kmock.ResourceInfo, ns: str, req: Req, warnings: list[str]
    ) -> dict[str, Any]:
        served, params = self.served.get(key), req.params
        body = self._new_body(served, req, warnings)
        if not isinstance(body, dict):
            raise ops.StatusError(400, "BadRequest", "the request body must be an object")
        obj = json.loads(json.dumps(body))
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        if not meta.get("name"):
            raise ops.StatusError(
                422, "Invalid", "metadata.name: Required value: name or generateName is required"
            )
        if ns and meta.get("namespace", ns) != ns:
            raise ops.StatusError(
                400,
                "BadRequest",
                "the namespace of the object does not match the namespace of the request",
            )
        if ns:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if (key, ns, meta["name"]) in self.store:
            raise ops.StatusError(
                409,
                "AlreadyExists",
                f'{key.rsplit("/", 1)[-1]} "{meta["name"]}" already exists',
                name=meta["name"],
            )
        obj.setdefault("kind", info.kind)
        obj.setdefault("apiVersion", key.rsplit("/", 1)[0])
        if served is not None:
            warnings.extend(writes.admit_create(served, obj))
        else:
            if "status" in info.subresources:
                obj.pop("status", None)
            options = "PatchOptions" if req.raw.method == "PATCH" else "CreateOptions"
            obj = self._admit(key, obj, params, options, warnings)
        ops.validate(key, obj)
        return obj if params.get("dryRun") else self._insert(key, obj)

    def _admit(
        self,
        key: str,
        obj: dict[str, Any],
        params: dict[str, str],
        options: str,
        warnings: list[str],
    ) -> dict[str, Any]:
        """A built-in or contract kind's write, as its schema admits it; a posted CRD as
        kube-apiserver's CRD validation admits it."""
        if key == _CRDS:
            problems = _crd_problems(json.dumps(obj, sort_keys=True))
            if problems:
                status = fielderrors.status(
                    422, "Invalid", crd.invalid_message(obj, problems), None
                )
                raise fielderrors.ApiError(status)
            return obj
        admitted, said = admission.admit(obj, params, options)
        warnings.extend(said)
        return admitted

    def _write(
        self,
        key: str,
        info: kmock.ResourceInfo,
        current: dict[str, Any],
        new: dict[str, Any],
        req: Req,
        warnings: list[str],
    ) -> dict[str, Any]:
        served = self.served.get(key)
        if served is not None:
            new = self._admit_write(served, current, new, req, warnings)
        else:
            if "status" in info.subresources:
                if req.where.subresource == "status":
                    new = {**current, "status": new.get("status")}
                    if new["status"] is None:
                        new.pop("status")
                else:
                    new = {k: v for k, v in new.items() if k != "status"}
                    if "status" in current:
                        new["status"] = current["status"]
            options = "PatchOptions" if req.raw.method == "PATCH" else "UpdateOptions"
            new = self._admit(key, new, req.params, options, warnings)
        ops.validate(key, new)
        if req.params.get("dryRun"):
            return new
        return self._commit(key, current, new)

    async def _watch(self, req: Req) -> aiohttp.web.StreamResponse:
        self.watch_selectors.append((req.where.key, req.params.get("labelSelector", "")))
        key, since = req.where.key, req.params.get("resourceVersion")
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        # Snapshot/replay and subscription happen with no await in between: nothing is lost.
        if since and since != "0":
            log = self._log[key]
            if log and log[0][0] > int(since) + 1 and len(log) == log.maxlen:
                backlog = [{"type": "ERROR", "object": ops.status_body(410, "Expired", "too old")}]
            else:
                backlog = [ev for rv, ev in log if rv > int(since)]
        else:
            backlog = [
                {"type": "ADDED", "object": o}
                for o in self._select(key, req.where.namespace, req.params)
            ]
        self._watchers[key].add(queue)
        try:
            return await stream(
                req.raw,
                queue,
                backlog,
                functools.partial(self._wanted, req),
                float(req.params.get("timeoutSeconds") or 0) or None,
            )
        finally:
            self._watchers[key].discard(queue)

    def _wanted(self, req: Req, event: dict[str, Any]) -> bool:
        meta = event["object"].get("metadata", {})
        ns, name = req.where.namespace, req.where.name
        if (ns and meta.get("namespace") != ns) or (name and meta.get("name") != name):
            return False
        return event["type"] == "ERROR" or self._matches(event["object"], req.params)


# A CRD's admission and its compiled rules are pure functions of its content, and one
# process makes many emulators with the same CRD (a test suite, a benchmark): each is
# worked out once.
@functools.cache
def _crd_problems(text: str) -> list[Any]:
    return crd.validate_crd(json.loads(text))


@functools.cache
def _served(text: str) -> dict[str, Served]:
    return writes.served_versions(json.loads(text))


class _LocalRequest(NamedTuple):
    """What the dispatch reads of an HTTP request, for a write made in process."""

    method: str
    headers: multidict.CIMultiDict[str]


def api_calls(emulator: Emulator, *, writes_only: bool = False) -> list[ops.ApiCall]:
    """Every resource request the emulator served so far (optionally only the writes)."""
    return [c for c in emulator.calls if not writes_only or c.verb in ops.WRITE_VERBS]


kubeconfig = ops.kubeconfig
ApiCall = ops.ApiCall
