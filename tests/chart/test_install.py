"""`helm install` of the chart into the API emulator, with Helm's own engine and client.

Helm talks real HTTP to the emulator (discovery, CRD install, object creation, release
storage in memory). Helm's calls block, so they run in a thread while the emulator serves
from this test's event loop. Never ``wait=``: nothing becomes ready in the emulator.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import helm_python
from helm_python import _native

from tests.chart.chartkit import CHART, FULL_VALUES, NAMESPACE, RELEASE
from tests.support.emulator import Emulator

DD_CRD = "disaggregateddeployments.disagg.dev"
CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"


def install(kubeconfig: Path, values: dict[str, Any]) -> dict[str, Any]:
    """``helm install`` (blocking): Helm's own install action, release kept in memory.

    The emulator publishes no OpenAPI schemas, so Helm's client-side schema check is off
    (``disable_openapi_validation``, an install option the SDK's Python signature does not
    expose yet, passed through its native call). The unit tests validate every rendered
    object against the upstream schemas instead.
    """
    cfg = helm_python.Config(kubeconfig_path=kubeconfig, storage_driver="memory")
    return _helm(cfg, "helm_install", values)


async def _install(kubeconfig: Path, values: dict[str, Any]) -> dict[str, Any]:
    # Helm blocks; the emulator serves from this event loop: run Helm in a thread.
    return await asyncio.to_thread(install, kubeconfig, values)


def _names(emu: Emulator, key: str, namespace: str | None = None) -> list[str]:
    return [o["metadata"]["name"] for o in emu.objects_of(key, namespace)]


async def test_install_all_namespaces_mode(emulator: Emulator, kubeconfig_path: Path) -> None:
    before = len(emulator.calls)
    release = await _install(kubeconfig_path, {})
    assert release["status"] == "deployed", release
    assert "kubectl apply -f examples/quickstart-cpu.yaml" in release["notes"]
    assert _names(emulator, "apps/v1/deployments", NAMESPACE) == ["disagg"]
    assert _names(emulator, "v1/serviceaccounts", NAMESPACE) == ["disagg"]
    assert _names(emulator, "v1/services", NAMESPACE) == ["disagg-metrics"]
    assert _names(emulator, "rbac.authorization.k8s.io/v1/clusterroles") == ["disagg"]
    assert _names(emulator, "rbac.authorization.k8s.io/v1/clusterrolebindings") == ["disagg"]
    # Two replicas by default: leader election (a Role for the Lease, in the release
    # namespace only) and a disruption budget keeping one of them up.
    assert _names(emulator, "rbac.authorization.k8s.io/v1/roles") == ["disagg-leader-election"]
    assert _names(emulator, "rbac.authorization.k8s.io/v1/roles", NAMESPACE) == [
        "disagg-leader-election"
    ]
    assert _names(emulator, "policy/v1/poddisruptionbudgets", NAMESPACE) == ["disagg"]
    # The CRD went in from the chart's crds/, and the emulator now serves the kind.
    crd = emulator.find(CRDS, "", DD_CRD)
    assert crd is not None and crd["spec"]["names"]["shortNames"] == ["disagg"]
    writes = [c for c in emulator.calls[before:] if c.verb in {"create", "patch", "update"}]
    assert {c.resource for c in writes} >= {"customresourcedefinitions", "deployments"}


async def test_install_namespaced_mode_with_every_value(
    emulator: Emulator, kubeconfig_path: Path
) -> None:
    release = await _install(kubeconfig_path, FULL_VALUES)
    assert release["status"] == "deployed", release
    roles = "rbac.authorization.k8s.io/v1/roles"
    assert _names(emulator, roles, "team-a") == _names(emulator, roles, "team-b") == ["dd-op"]
    bindings = "rbac.authorization.k8s.io/v1/rolebindings"
    assert _names(emulator, bindings, "team-a") == ["dd-op"]
    assert _names(emulator, "monitoring.coreos.com/v1/servicemonitors", NAMESPACE) == ["dd-op"]
    deploy = emulator.find("apps/v1/deployments", NAMESPACE, "dd-op")
    assert deploy is not None
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args and "--namespace=team-b" in args
    assert "--lease-duration-seconds=15" in args and deploy["spec"]["replicas"] == 3
    assert _names(emulator, roles, NAMESPACE) == ["dd-op-leader-election"]


def _helm(cfg: Any, action: str, values: dict[str, Any]) -> dict[str, Any]:
    """One Helm release action (``helm_install``/``helm_upgrade``, blocking) on ``cfg``,
    whose in-memory release storage carries the release from one action to the next."""
    opts = {"namespace": NAMESPACE, "timeout_seconds": 60, "disable_openapi_validation": True}
    chart = helm_python.Chart.load(CHART)
    payload = _native.call_string(
        action,
        cfg._raw(),
        cfg._context_arg(None),
        chart._raw(),
        None,
        RELEASE,
        json.dumps(values),
        json.dumps(opts),
    )
    release: dict[str, Any] = json.loads(payload)
    return release


async def test_root_key_is_made_once_and_kept_on_upgrade(
    emulator: Emulator, kubeconfig_path: Path
) -> None:
    cfg = helm_python.Config(
        kubeconfig_path=kubeconfig_path, storage_driver="memory", namespace=NAMESPACE
    )

    def root_key() -> str:
        secret = emulator.find("v1/secrets", NAMESPACE, "disagg-root-key")
        assert secret is not None
        return str(secret["data"]["root-key"])

    await asyncio.to_thread(_helm, cfg, "helm_install", {})
    installed = root_key()
    release = await asyncio.to_thread(_helm, cfg, "helm_upgrade", {"logLevel": "debug"})
    assert release["status"] == "deployed", release
    assert root_key() == installed  # Helm's lookup read the installed key back
