"""The router's zone source (:mod:`disagg_worker.serve.proxy.zones`) against a stub API
server: the list it makes, the ServiceAccount token it shows (read again at each list: a
bound token rotates), and the zones it keeps when a list fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from disagg_worker.serve.proxy.zones import KubeApi, Zones, service_of

SLICE = {
    "metadata": {"name": "demo-decode-x", "labels": {"kubernetes.io/service-name": "demo-decode"}},
    "endpoints": [{"addresses": ["10.0.0.7"], "zone": "zone-b"}],
}


async def test_zones_are_listed_with_the_token_and_kept_when_a_list_fails(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    answers = [200, 403]

    async def listing(request: web.Request) -> web.Response:
        seen.append({"path": request.path, "auth": request.headers.get("Authorization")})
        status = answers.pop(0) if answers else 200
        if status != 200:
            return web.json_response({"kind": "Status", "reason": "Forbidden"}, status=status)
        return web.json_response({"kind": "EndpointSliceList", "items": [SLICE]})

    app = web.Application()
    app.router.add_get("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", listing)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    token = tmp_path / "token"
    token.write_text("first\n")
    zones = Zones(KubeApi(str(server.make_url("")), "team-a", token), ["demo-decode"], 60)
    failed: list[int] = []
    zones.on_failure = lambda: failed.append(1)
    try:
        await zones.start()
        assert zones.zone("http://10.0.0.7:8000") == "zone-b"
        assert zones.zone("http://10.0.0.8:8000") is None  # not read: no zone
        token.write_text("rotated\n")
        await zones.refresh()  # refused: the zones last read stay
        assert zones.failures == 1 and zones.zone("http://10.0.0.7:8000") == "zone-b"
        assert failed == [1]  # the proxy's counter hears of it
    finally:
        await zones.close()
        await server.close()
    assert [s["path"] for s in seen] == [
        "/apis/discovery.k8s.io/v1/namespaces/team-a/endpointslices"
    ] * 2
    assert [s["auth"] for s in seen] == ["Bearer first", "Bearer rotated"]


def test_a_service_name_says_its_namespace_when_it_has_one() -> None:
    assert service_of("demo-p-abc.team-a.svc") == ("demo-p-abc", "team-a")
    assert service_of("demo-p-abc") == ("demo-p-abc", "")
