"""The API client: kubeconfig credentials, REST paths, and the not-found/conflict policy."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from disagg_operator.k8s import Api, ApiError, url_for
from tests.integration.emulator import Emulator, kubeconfig


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
