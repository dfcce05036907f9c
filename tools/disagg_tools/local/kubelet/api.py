"""The local kubelet's API client: the few calls a kubelet and two controllers make.

I/O layer (aiohttp, JSON). It speaks to an API server's URL (the emulator's, in tests and
``disagg cluster``) with no credentials; a 404 on a read is None, on a delete nothing;
any other error status raises :class:`KubeletApiError` naming the call and the answer.
"""

from __future__ import annotations

from typing import Any

import aiohttp

MERGE = {"Content-Type": "application/merge-patch+json"}
Items = list[dict[str, Any]]


class KubeletApiError(RuntimeError):
    """An API call of the local kubelet answered an error status."""


def path(api_version: str, plural: str, namespace: str = "", name: str = "") -> str:
    """The REST path of a resource (all namespaces when ``namespace`` is empty)."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{where}/{plural}" + (f"/{name}" if name else "")


class Api:
    """One aiohttp session to the API server at ``url``."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._http: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._http = aiohttp.ClientSession(self.url, timeout=aiohttp.ClientTimeout(total=10))

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    async def __aenter__(self) -> Api:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(
        self, method: str, where: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> Any:
        assert self._http is not None, "Api.start() first"
        async with self._http.request(method, where, json=body, headers=headers) as resp:
            if resp.status == 404 and method in ("GET", "DELETE"):
                return None
            if resp.status >= 400:
                raise KubeletApiError(f"{method} {where}: {resp.status} {await resp.text()}")
            return await resp.json()

    async def list(self, api_version: str, plural: str, namespace: str = "") -> Items:
        """Every object of the resource (in ``namespace`` only, when given)."""
        found = await self._call("GET", path(api_version, plural, namespace))
        items: Items = (found or {}).get("items") or []
        return items

    async def get(self, api_version: str, plural: str, namespace: str, name: str) -> Any:
        return await self._call("GET", path(api_version, plural, namespace, name))

    async def create(self, api_version: str, plural: str, namespace: str, body: Any) -> Any:
        return await self._call("POST", path(api_version, plural, namespace), body)

    async def patch(
        self, api_version: str, plural: str, namespace: str, name: str, body: Any, sub: str = ""
    ) -> Any:
        where = path(api_version, plural, namespace, name) + (f"/{sub}" if sub else "")
        return await self._call("PATCH", where, body, MERGE)

    async def delete(self, api_version: str, plural: str, namespace: str, name: str) -> Any:
        return await self._call("DELETE", path(api_version, plural, namespace, name))
