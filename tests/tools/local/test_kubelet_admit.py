"""What a pod reads from the API before it starts, on the local kubelet: a Secret its env
names that does not exist yet keeps the pod waiting, not failed, and it starts once the
Secret is made (a kubelet's pod worker tries again: ``CreateContainerConfigError`` until
then, Kubernetes 1.36 ``kuberuntime_container.go``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from disagg_operator.api import LABEL_DEPLOYMENT
from disagg_tools.local.engines import BUILTIN
from disagg_tools.local.kubelet import run as kubelet_run
from tests.operator.builders import body
from tests.operator.conftest import DD_PATH, NS, api, until
from tests.support.emulator import Emulator
from tests.support.toy_engine.local import ToyLocal

PORT = 8000


def _pod() -> dict[str, Any]:
    engine = {
        "name": "engine",
        "image": "example.com/toy:1",
        "command": ["toy-serve", "--role", "decode", "--listen", str(PORT)],
        "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "late", "key": "t"}}}],
        "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": PORT}, "periodSeconds": 1},
    }
    meta = {"name": "waits-0", "namespace": NS, "labels": {LABEL_DEPLOYMENT: "waits"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [engine]}}


async def test_a_pod_waits_for_a_secret_its_env_names_then_starts(
    emulator: Emulator, tmp_path: Path
) -> None:
    owner = body()
    owner["metadata"] = {"name": "waits", "namespace": NS}
    await api(emulator, "POST", DD_PATH, owner)
    engines = {**BUILTIN, "reference": ToyLocal()}
    async with kubelet_run.running(str(emulator.url), tmp_path, engines=engines) as kubelet:
        await api(emulator, "POST", f"/api/v1/namespaces/{NS}/pods", _pod())
        await until("the pod waits for its Secret", lambda: bool(kubelet.waiting), 10)
        await asyncio.sleep(1.0)  # ten ticks: still waiting, at the same address
        (uid,) = kubelet.waiting
        address, why = kubelet.waiting[uid]
        assert "Secret 'late' does not exist" in why
        assert not kubelet.failed and not kubelet.pods
        pod = emulator.objects_of("v1/pods", NS)[0]
        assert (pod.get("status") or {}).get("phase") != "Failed"
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "late"},
                  "stringData": {"t": "x"}}  # fmt: skip
        await api(emulator, "POST", f"/api/v1/namespaces/{NS}/secrets", secret)

        def ready() -> bool:
            conditions = (emulator.objects_of("v1/pods", NS)[0].get("status") or {}).get(
                "conditions", []
            )
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        await until("the pod Ready once its Secret exists", ready, 60)
        assert not kubelet.waiting and kubelet.address_of("waits-0", NS) == address
        (run,) = [p.run for p in kubelet.pods.values()]
        assert run.processes[0].env["TOKEN"] == "x"
