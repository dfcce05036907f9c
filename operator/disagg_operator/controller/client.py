"""The Kubernetes API client: the only module of the operator that talks to the API server.

I/O layer. Plain aiohttp against the REST API (kopf already depends on it, and the calls we
need are few); credentials come from the in-cluster service account or ``$KUBECONFIG``
through the ``kubernetes`` package's config loaders, the only part of it used. 404 on
get/patch/replace/delete and 409 on create return None (the next event re-plans); 429 is
retried here, holding its write slot, so the client slows down as the server asks; any
other failure raises :class:`ApiError` for the sync to judge. Bounds: docs/operator.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import ssl
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp

from disagg_operator.api import kinds
from disagg_operator.controller import metrics
from disagg_operator.controller.rules.refusals import ApiError

__all__ = ["MAX_WRITES", "PLURALS", "Api", "ApiError", "retry_after", "url_for"]

MAX_WRITES = 32  # writes in flight at once, all deployments together
RETRIES_429 = 5  # further attempts of a call answered 429
RETRY_AFTER_CAP = 10.0  # seconds; a longer Retry-After is cut to this

# kind → plural, for the kinds the operator writes (the one table of kinds).
PLURALS = kinds.PLURALS


def url_for(api_version: str, plural: str, namespace: str = "", name: str = "") -> str:
    """The REST path of a collection or object: ``/api/v1/...`` or ``/apis/<group>/...``."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    path = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    return f"{path}/{name}" if name else path


def retry_after(value: str | None) -> float:
    """Seconds to wait for a 429's ``Retry-After`` (delta-seconds), capped; 1 s without."""
    try:
        seconds = float(value) if value is not None else 1.0
    except ValueError:  # an HTTP date: the API server never sends one; wait the default
        seconds = 1.0
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)


def _load_configuration() -> Any:
    """In-cluster service account first, then $KUBECONFIG / ~/.kube/config."""
    from kubernetes import client, config

    cfg = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=cfg)
    except config.ConfigException:
        path = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None
        config.load_kube_config(config_file=path, client_configuration=cfg)
    return cfg


class Api:
    """An async API client bound to one server; create with :meth:`connect`."""

    def __init__(
        self,
        host: str,
        session: aiohttp.ClientSession,
        cfg: Any = None,
        *,
        max_writes: int = MAX_WRITES,
    ) -> None:
        self.host = host.rstrip("/")
        self._session = session
        self._cfg = cfg
        self._writes = asyncio.Semaphore(max_writes)
        self.throttled = 0  # 429 answers waited out (tests, logs)

    @classmethod
    async def connect(cls, host: str | None = None) -> Api:
        """Connect with the ambient credentials, or to ``host`` with none (tests, emulator)."""
        cfg: Any = None if host else _load_configuration()
        ssl_ctx: ssl.SSLContext | bool = False
        if cfg is not None and cfg.host.startswith("https"):
            ssl_ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
            if cfg.cert_file:
                ssl_ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
            if not cfg.verify_ssl:
                ssl_ctx.check_hostname = False
                ssl_ctx.verify_mode = ssl.CERT_NONE
        connector = aiohttp.TCPConnector(ssl=ssl_ctx, limit=32)
        timeout = aiohttp.ClientTimeout(total=30)
        session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return cls(host or cfg.host, session, cfg)

    async def close(self) -> None:
        await self._session.close()

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        if self._cfg is not None:
            # "BearerToken" since kubernetes 36, "authorization" before; the call refreshes
            # an expiring service-account or exec-plugin token first
            token = self._cfg.get_api_key_with_prefix("BearerToken", alias="authorization")
            if token:
                headers["Authorization"] = token
        return headers

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str | None = None,
        ok_missing: bool = False,
    ) -> dict[str, Any] | None:
        async with self._slot(method):
            for attempt in range(RETRIES_429 + 1):
                status, answer, wait = await self._send(method, path, body, params, content_type)
                if status != 429 or attempt == RETRIES_429:
                    break
                self.throttled += 1
                await asyncio.sleep(wait)
        if status == 404 and ok_missing:
            return None
        if status == 409 and method == "POST":
            return None
        if status >= 400:
            raise ApiError(status, method, path, answer)
        result: dict[str, Any] = json.loads(answer) if answer else {}
        return result

    @contextlib.asynccontextmanager
    async def _slot(self, method: str) -> AsyncIterator[None]:
        if method == "GET":
            yield
            return
        async with self._writes:
            yield

    async def _send(
        self,
        method: str,
        path: str,
        body: Any,
        params: Mapping[str, str] | None,
        content_type: str | None,
    ) -> tuple[int, str, float]:
        """One HTTP exchange: (status, body text, seconds a 429 asks to wait)."""
        headers = self._headers(content_type or ("application/json" if body else None))
        async with self._session.request(
            method, self.host + path, json=body, params=params, headers=headers
        ) as resp:
            return resp.status, await resp.text(), retry_after(resp.headers.get("Retry-After"))

    # ------------------------------------------------------------------ reads
    async def get(
        self, api_version: str, plural: str, namespace: str, name: str
    ) -> dict[str, Any] | None:
        path = url_for(api_version, plural, namespace, name)
        return await self._request("GET", path, ok_missing=True)

    async def listing(
        self, api_version: str, plural: str, namespace: str, label_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        """Objects of one kind in a namespace ([] if the API does not serve the kind at
        all) and the list's resourceVersion ("" then)."""
        params = {"labelSelector": label_selector} if label_selector else None
        path = url_for(api_version, plural, namespace)
        result = await self._request("GET", path, params=params, ok_missing=True) or {}
        items: list[dict[str, Any]] = result.get("items", [])
        kind = result.get("kind", "").removesuffix("List")
        for item in items:  # typed lists omit kind/apiVersion on items
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", api_version)
        return items, str((result.get("metadata") or {}).get("resourceVersion") or "")

    async def list(
        self, api_version: str, plural: str, namespace: str, label_selector: str = ""
    ) -> list[dict[str, Any]]:
        """Objects of one kind in a namespace; [] if the API does not serve the kind at all."""
        items, _ = await self.listing(api_version, plural, namespace, label_selector)
        return items

    # ------------------------------------------------------------------ writes
    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """Create; None when it exists already (409: the next event re-plans)."""
        meta = obj["metadata"]
        path = url_for(obj["apiVersion"], PLURALS[obj["kind"]], meta.get("namespace", ""))
        metrics.API_WRITES.labels("create", obj["kind"]).inc()
        return await self._request("POST", path, body=obj)

    async def patch(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str = "",
    ) -> dict[str, Any] | None:
        """Merge-patch an object (or its ``status``); None when it is gone."""
        path = url_for(api_version, PLURALS[kind], namespace, name)
        path = f"{path}/{subresource}" if subresource else path
        metrics.API_WRITES.labels("patch", kind).inc()
        return await self._request(
            "PATCH",
            path,
            body=patch,
            content_type="application/merge-patch+json",
            ok_missing=True,
        )

    async def replace(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """PUT the whole object; None when it is gone. With ``metadata.resourceVersion`` it is
        conditional: a changed object answers 409 Conflict (raised as :class:`ApiError`)."""
        meta = obj["metadata"]
        path = url_for(obj["apiVersion"], PLURALS[obj["kind"]], meta.get("namespace", ""))
        metrics.API_WRITES.labels("update", obj["kind"]).inc()
        return await self._request("PUT", f"{path}/{meta['name']}", body=obj, ok_missing=True)

    async def delete(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> dict[str, Any] | None:
        """Delete with background propagation; a missing object is fine (None). Returns the
        answer: the object (with deletionTimestamp while it terminates) or a Status."""
        path = url_for(api_version, PLURALS[kind], namespace, name)
        metrics.API_WRITES.labels("delete", kind).inc()
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        return await self._request("DELETE", path, body=body, ok_missing=True)

    async def event(
        self, involved: Mapping[str, Any], *, type_: str, reason: str, message: str
    ) -> None:
        """Post a core/v1 Event about ``involved`` (Normal or Warning)."""
        meta = involved["metadata"]
        now = datetime.datetime.now(tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta['name']}.{uuid.uuid4().hex[:10]}",
                "namespace": meta.get("namespace", "default"),
            },
            "involvedObject": {
                "apiVersion": involved.get("apiVersion"),
                "kind": involved.get("kind"),
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": "disagg-operator"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": "disagg-operator",
        }
        await self.create(event)
