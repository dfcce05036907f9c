"""The API client: kubeconfig credentials, REST paths, the not-found/conflict policy, 429
answers waited out (the emulator answering as API Priority and Fairness does), the write
bound."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_operator.controller.client import RETRIES_429, Api, ApiError, retry_after, url_for
from disagg_operator.controller.rules.refusals import is_refusal
from tests.support.emulator import Emulator, kubeconfig


def test_rest_paths_for_core_and_grouped_kinds() -> None:
    assert url_for("v1", "pods", "ns", "p") == "/api/v1/namespaces/ns/pods/p"
    assert url_for("networking.k8s.io/v1", "networkpolicies", "ns") == (
        "/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies"
    )
    assert url_for("disagg.dev/v1alpha1", "disaggregateddeployments") == (
        "/apis/disagg.dev/v1alpha1/disaggregateddeployments"
    )


async def test_kubeconfig_token_reaches_the_headers_and_calls_work(
    emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = kubeconfig(str(emulator.url).rstrip("/"))
    config["users"][0]["user"] = {"token": "s3cret"}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(path))
    api = await Api.connect()
    try:
        assert api._headers()["Authorization"] == "Bearer s3cret"
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "ns"}}
        assert (await api.create(pod))["metadata"]["uid"]
        assert await api.create(pod) is None  # 409: exists already, not an error
        assert [p["kind"] for p in await api.list("v1", "pods", "ns")] == ["Pod"]
        assert await api.patch("v1", "Pod", "ns", "gone", {"metadata": {}}) is None  # 404
        await api.delete("v1", "Pod", "ns", "a")
        await api.delete("v1", "Pod", "ns", "a")  # already gone: fine
        assert await api.get("v1", "pods", "ns", "a") is None
        with pytest.raises(ApiError, match="HTTP 404"):
            await api.create({**pod, "apiVersion": "example.dev/v1", "kind": "Pod"})
    finally:
        await api.close()


async def test_replace_is_conditional_on_the_resource_version_it_carries(
    emulator: Emulator,
) -> None:
    api = await Api.connect(str(emulator.url).rstrip("/"))
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l", "namespace": "ops"},
        "spec": {"holderIdentity": "a"},
    }
    try:
        assert await api.replace(lease) is None  # 404: not there
        created = await api.create(lease)
        assert created is not None
        mine = {**lease, "metadata": created["metadata"], "spec": {"holderIdentity": "b"}}
        replaced = await api.replace(mine)
        assert replaced is not None and replaced["spec"]["holderIdentity"] == "b"
        with pytest.raises(ApiError, match="HTTP 409") as stale:  # the same version again
            await api.replace({**mine, "spec": {"holderIdentity": "c"}})
        assert stale.value.status == 409
    finally:
        await api.close()
    assert emulator.find("coordination.k8s.io/v1/leases", "ops", "l")["spec"] == {
        "holderIdentity": "b"
    }


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "ns"}}


def test_retry_after_is_read_as_seconds_with_a_default_and_a_cap() -> None:
    assert retry_after("2") == 2.0
    assert retry_after(None) == 1.0  # a 429 without the header: wait a second
    assert retry_after("Wed, 21 Oct 2026 07:28:00 GMT") == 1.0  # a date: the default
    assert retry_after("3600") == 10.0  # never sleep an hour inside a sync


async def test_a_429_is_waited_out_and_the_same_call_sent_again(emulator: Emulator) -> None:
    emulator.throttle("v1/pods", count=2, retry_after=1, verb="create")
    api = await Api.connect(str(emulator.url).rstrip("/"))
    try:
        started = asyncio.get_running_loop().time()
        created = await api.create(POD)
        waited = asyncio.get_running_loop().time() - started
    finally:
        await api.close()
    assert created is not None and created["metadata"]["uid"]
    assert api.throttled == 2 and waited >= 2.0  # Retry-After: 1, twice
    assert [c.verb for c in emulator.calls if c.resource == "pods"] == ["create"] * 3


async def test_a_429_that_persists_raises_after_the_bounded_retries(emulator: Emulator) -> None:
    emulator.throttle("v1/pods", count=100, retry_after=0)
    api = await Api.connect(str(emulator.url).rstrip("/"))
    try:
        with pytest.raises(ApiError, match="HTTP 429") as raised:
            await api.create(POD)
    finally:
        await api.close()
    assert raised.value.status == 429 and not is_refusal(429)  # transient: kopf retries
    assert sum(1 for c in emulator.calls if c.resource == "pods") == RETRIES_429 + 1


async def test_writes_in_flight_never_exceed_the_client_bound(emulator: Emulator) -> None:
    api = await Api.connect(str(emulator.url).rstrip("/"))
    api._writes = asyncio.Semaphore(3)  # the bound under test, small enough to reach
    inflight, peak = 0, 0
    send = api._send

    async def counting(*args: Any) -> Any:
        nonlocal inflight, peak
        inflight += 1
        peak = max(peak, inflight)
        try:
            await asyncio.sleep(0.01)  # a slow API server
            return await send(*args)
        finally:
            inflight -= 1

    api._send = counting  # type: ignore[method-assign]
    try:
        pods = [{**POD, "metadata": {"name": f"p{i}", "namespace": "ns"}} for i in range(12)]
        await asyncio.gather(*(api.create(p) for p in pods))
    finally:
        await api.close()
    assert peak == 3
    assert len(emulator.objects_of("v1/pods", "ns")) == 12
