"""What a pod gets before it starts, on the local kubelet: a Secret its env names that does
not exist yet keeps the pod waiting, not failed, and it starts once the Secret is made (a
kubelet's pod worker tries again: ``CreateContainerConfigError`` until then, Kubernetes
1.36 ``kuberuntime_container.go``); the address, cores and host ports the node's
configuration gives it (its IPAM, CPU manager, host ports), and this host's address for a
``hostNetwork`` pod."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from disagg_operator.api import LABEL_DEPLOYMENT
from disagg_tools.local.engines import BUILTIN, LocalProcess
from disagg_tools.local.kubelet import run as kubelet_run
from disagg_tools.local.kubelet.node import NodeConfig
from disagg_tools.local.serving import free_ports
from tests.operator.builders import body
from tests.operator.conftest import DD_PATH, NS, api, until
from tests.support.emulator import Emulator
from tests.support.toy_engine.local import ToyLocal

PORT = 8000


def _pod(name: str = "waits-0", port: int = PORT, **spec: Any) -> dict[str, Any]:
    engine = {
        "name": "engine",
        "image": "example.com/toy:1",
        "command": ["toy-serve", "--role", "decode", "--listen", str(port)],
        "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "late", "key": "t"}}}],
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": port}, "periodSeconds": 1},
    }
    meta = {"name": name, "namespace": NS, "labels": {LABEL_DEPLOYMENT: "waits"}}
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"containers": [engine], **spec},
    }  # fmt: skip


async def test_a_pod_waits_for_a_secret_its_env_names_then_starts(
    emulator: Emulator, tmp_path: Path
) -> None:
    owner = body()
    owner["metadata"] = {"name": "waits", "namespace": NS}
    await api(emulator, "POST", DD_PATH, owner)
    engines = {**BUILTIN, "reference": ToyLocal()}
    async with kubelet_run.running(
        str(emulator.url), tmp_path, NodeConfig(engines=engines)
    ) as kubelet:
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


class _Recorded(ToyLocal):
    """The toy engine, remembering the cores and host ports each pod's engine was given."""

    def __init__(self) -> None:
        self.given: dict[str, tuple[list[int], int | None]] = {}

    def process(
        self,
        name: str,
        command: Sequence[str],
        env: dict[str, str],
        *,
        secret_path: str,
        address: str,
        cores: Sequence[int] = (),
        host_ports: Iterator[int] | None = None,
    ) -> LocalProcess:
        port = next(host_ports) if host_ports is not None else None
        self.given[name] = (list(cores), port)
        return super().process(
            name, command, env, secret_path=secret_path, address=address, cores=cores
        )


async def test_the_node_config_gives_addresses_cores_and_host_ports(
    emulator: Emulator, tmp_path: Path
) -> None:
    """A caller's IPAM, CPU manager and host ports reach each pod; a hostNetwork pod is
    at this host's address; a pod the IPAM does not name gets one of the network."""
    owner = body()
    owner["metadata"] = {"name": "waits", "namespace": NS}
    await api(emulator, "POST", DD_PATH, owner)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "late"},
              "stringData": {"t": "x"}}  # fmt: skip
    await api(emulator, "POST", f"/api/v1/namespaces/{NS}/secrets", secret)
    engine = _Recorded()
    config = NodeConfig(
        engines={**BUILTIN, "reference": engine},
        addresses={"a-0": "127.0.9.40"}.__getitem__,
        cores={"a-0": [1]},
        host_ports=itertools.count(9700),
    )
    async with kubelet_run.running(str(emulator.url), tmp_path, config) as kubelet:
        await api(emulator, "POST", f"/api/v1/namespaces/{NS}/pods", _pod("a-0"))
        host = _pod("h-0", next(free_ports()), hostNetwork=True)  # on this host's loopback
        await api(emulator, "POST", f"/api/v1/namespaces/{NS}/pods", host)
        await until("both pods started", lambda: len(kubelet.pods) == 2, 20)
        assert kubelet.address_of("a-0", NS) == "127.0.9.40"
        assert kubelet.address_of("h-0", NS) == "127.0.0.1"  # the node's network
        assert engine.given["a-0"][0] == [1] and engine.given["h-0"][0] == []
        assert sorted(p for _, p in engine.given.values()) == [9700, 9701]
