"""The real operator on what an apiserver hands it: the object as stored (pruned and
defaulted on write by the emulator, as kube-apiserver does), not the manifest as sent."""

from __future__ import annotations

import asyncio

import aiohttp

from tests.operator.conftest import DD, DD_PATH, NS, api, condition, pods, quickstart, until
from tests.support.emulator import Emulator, writes


async def test_a_null_with_a_default_is_reconciled_as_the_default(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    """``kvTransfer: null`` (a non-nullable object with ``default: {}``): the apiserver
    stores the defaulted object, so the deployment is reconciled, not InvalidSpec."""
    body = quickstart()
    body["spec"]["kvTransfer"] = None
    await api(emulator, "POST", DD_PATH, body)
    stored = emulator.find(DD, NS, "demo")
    assert stored is not None and stored["spec"]["kvTransfer"]["backends"] == ["UCX"]
    got = await until("2 pods", lambda: len(pods(emulator)) == 2 and pods(emulator))
    for pod in got:
        emulator.set_pod_ready(NS, pod)
    await until("Ready=True", lambda: condition(emulator, "demo").get("status") == "True")
    assert condition(emulator, "demo", "Ready").get("reason") != "InvalidSpec"


async def test_a_spec_of_the_wrong_type_never_reaches_a_sync(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    """``spec: "hello"``: the apiserver refuses it (the schema's type) and stores nothing,
    so the operator neither syncs it nor writes anything."""
    body = quickstart()
    body["spec"] = "hello"
    mark = len(emulator.calls)
    async with (
        aiohttp.ClientSession(str(emulator.url)) as http,
        http.post(DD_PATH, json=body) as resp,
    ):
        err = await resp.json()
    assert resp.status == 422 and err["details"]["causes"][0]["field"] == "spec"
    assert 'Invalid value: "string": spec in body must be of type object' in err["message"]
    await asyncio.sleep(1.0)  # a sync, had there been one, would have written by now
    assert emulator.find(DD, NS, "demo") is None
    assert [c.verb for c in writes(emulator, mark)] == ["create"]  # the refused one
