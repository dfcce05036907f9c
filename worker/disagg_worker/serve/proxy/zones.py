"""Where each pool's pods sit: their zones, read from their Services' EndpointSlices.

I/O layer (HTTPS to the API server with the pod's ServiceAccount token; aiohttp, no
Kubernetes client: the worker image ships none). Only with ``--transfer-locality``: the
router lists the EndpointSlices of its namespace every ``refresh_s`` (as often as it
resolves its Services) and keeps the zone of each address (:func:`.rules.locality.zones_of`).
Its ServiceAccount may get, list and watch EndpointSlices in its own namespace, nothing
else (the operator renders the Role). A failed list keeps the zones last read: a pod the
router has not read yet has no zone (the zone-less group of docs/routing.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp

from disagg_worker.serve.proxy.discovery import Periodic
from disagg_worker.serve.proxy.rules.locality import Zone, zones_of

log = logging.getLogger("disagg.proxy")
ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SLICES = "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
LIST_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class KubeApi:
    """Where the API server is and how to prove who the router is: in a pod, from
    ``KUBERNETES_SERVICE_HOST``/``PORT`` and the mounted ServiceAccount (its token read
    again at each call: a bound token rotates); elsewhere an URL (the local emulator)."""

    url: str
    namespace: str
    token: Path | None = None
    ca: Path | None = None

    @classmethod
    def in_cluster(cls, url: str = "", namespace: str = "") -> KubeApi:
        """``url`` or the pod's API server; ``namespace`` or the pod's own."""
        if not url:
            host, port = (
                os.environ.get("KUBERNETES_SERVICE_HOST"),
                os.environ.get("KUBERNETES_SERVICE_PORT", "443"),
            )
            if not host:
                raise ValueError(
                    "--transfer-locality: no API server to read zones from "
                    "(KUBERNETES_SERVICE_HOST unset): give --kube-api URL"
                )
            url = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        if not namespace:
            path = ACCOUNT / "namespace"
            namespace = path.read_text().strip() if path.exists() else "default"
        token, ca = ACCOUNT / "token", ACCOUNT / "ca.crt"
        return cls(url.rstrip("/"), namespace, token if token.exists() else None,
                   ca if ca.exists() else None)  # fmt: skip

    def headers(self) -> dict[str, str]:
        if self.token is None:
            return {}
        return {"Authorization": f"Bearer {self.token.read_text().strip()}"}

    def ssl(self) -> ssl.SSLContext | bool:
        """The cluster's CA when mounted, else the system's (True)."""
        return ssl.create_default_context(cafile=str(self.ca)) if self.ca else True


class Zones(Periodic):
    """The zone of every address behind ``services`` (their names), kept current."""

    def __init__(self, api: KubeApi, services: Sequence[str], refresh_s: float) -> None:
        self.api, self.services, self.refresh_s = api, list(services), refresh_s
        self.by_address: dict[str, Zone] = {}
        self.failures = 0  # lists that failed (the zones last read stay)
        self.on_failure: Callable[[], None] = lambda: None  # the proxy counts them
        self._session: aiohttp.ClientSession | None = None

    def zone(self, url: str) -> Zone:
        """The zone of the pod at ``url`` (a worker's base URL); None when unknown."""
        return self.by_address.get(urlsplit(url).hostname or "")

    async def refresh(self) -> None:
        assert self._session is not None, "start() first"
        url = self.api.url + SLICES.format(namespace=self.api.namespace)
        timeout = aiohttp.ClientTimeout(total=LIST_TIMEOUT_S)
        try:
            async with self._session.get(
                url, headers=self.api.headers(), ssl=self.api.ssl(), timeout=timeout
            ) as resp:
                if resp.status != 200:
                    text = (await resp.text())[:300]
                    raise OSError(f"HTTP {resp.status}: {text}")
                listed = await resp.json()
        except (OSError, aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
            self.failures += 1
            self.on_failure()
            log.warning("listing EndpointSlices at %s (zones kept as last read): %s", url, e)
            return
        self.by_address = zones_of(listed.get("items") or [], self.services)

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        await super().start()

    async def close(self) -> None:
        await super().close()
        if self._session is not None:
            await self._session.close()


def service_of(host: str) -> tuple[str, str]:
    """A Service's DNS name (``name.namespace.svc``, or ``name``) → (name, namespace; ""
    when the name does not say)."""
    parts = host.split(".")
    return parts[0], parts[1] if len(parts) > 1 else ""
