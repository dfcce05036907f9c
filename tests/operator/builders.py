"""Small builders for DisaggregatedDeployment bodies used by the operator unit tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
GPU = {"limits": {"nvidia.com/gpu": 1}}
# What a vLLM CPU pool must declare (its threads and KV cache derive from it).
CPU_POOL = {"limits": {"cpu": "8", "memory": "16Gi"}}
DEVICE_MEMORY = "24Gi"
# What a pair of different devices must declare (vLLM's handshake check is off for it).
PAIR_MODEL = {"dtype": "bfloat16", "kvCacheDtype": "auto", "blockSize": 64}


def role(device: str = "cpu", replicas: int = 1, **extra: Any) -> dict[str, Any]:
    return {"replicas": replicas, "device": device, **extra}


def body(
    name: str = "demo",
    *,
    engine: str = "reference",
    prefill: dict[str, Any] | None = None,
    decode: dict[str, Any] | None = None,
    uid: str = "uid-1",
    generation: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    """A valid body (two CPU pods, reference engine) unless the arguments say otherwise.

    vLLM CPU pools without resources get :data:`CPU_POOL` (pass resources={} for none);
    vLLM accelerator pools without acceleratorMemory get :data:`DEVICE_MEMORY` (what a cpu
    KV buffer's host copy is sized from; pass acceleratorMemory=None for none), and vLLM
    pools of different devices :data:`PAIR_MODEL` under the modelConfig given.
    """
    roles = [prefill if prefill is not None else role(), decode if decode is not None else role()]
    if engine == "vllm" and len({r.get("device", "cpu") for r in roles}) > 1:
        spec["modelConfig"] = {**PAIR_MODEL, **spec.get("modelConfig", {})}
    if engine == "vllm":
        for r in roles:
            if r.get("device", "cpu") == "cpu" and "resources" not in r:
                r["resources"] = copy.deepcopy(CPU_POOL)
            elif r.get("resources") == {}:
                del r["resources"]
            if r.get("device", "cpu") != "cpu" and "acceleratorMemory" not in r:
                r["acceleratorMemory"] = DEVICE_MEMORY
    return {
        "apiVersion": "disagg.dev/v1alpha1",
        "kind": "DisaggregatedDeployment",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "generation": generation},
        "spec": {
            "model": "tiny" if engine == "reference" else "Qwen/Qwen3-0.6B",
            "engine": {"type": engine, "image": f"example.com/{engine}:1"},
            "prefill": roles[0],
            "decode": roles[1],
            **spec,
        },
    }


def vllm_gpu_cpu(**spec: Any) -> dict[str, Any]:
    """vLLM with a GPU prefill pool and a CPU decode pool."""
    return body(
        engine="vllm",
        prefill=role("cuda", resources=copy.deepcopy(GPU)),
        decode=role("cpu", resources={"limits": {"cpu": "8", "memory": "16Gi"}}),
        **spec,
    )


def example(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    doc["metadata"].setdefault("uid", "uid-example")
    return doc


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    """name → value (or the valueFrom dict) of a container's env."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def as_built_in(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """What of ``obj`` the core/v1 schemas judge: the object, or for a LeaderWorkerSet
    (a CRD of kubernetes-sigs/lws: tests/operator/render/test_groups.py states its shape)
    its leader's and workers' pod templates as Pods."""
    if obj["kind"] != "LeaderWorkerSet":
        return [obj]
    group = obj["spec"]["leaderWorkerTemplate"]
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "t", **t["metadata"]},
            "spec": t["spec"],
        }
        for t in (group["leaderTemplate"], group["workerTemplate"])
    ]


def spanning(nodes: int = 2, tp: int = 2, replicas: int = 2, **spec: Any) -> dict[str, Any]:
    """vLLM with a GPU prefill pool whose instances span ``nodes`` pods, one GPU per rank."""
    gpus = {"limits": {"nvidia.com/gpu": tp // nodes}}
    prefill = role("cuda", replicas, tensorParallelSize=tp, nodesPerInstance=nodes)
    decode = role("cuda", 1, tensorParallelSize=tp, resources={"limits": {"nvidia.com/gpu": tp}})
    return body(engine="vllm", prefill={**prefill, "resources": gpus}, decode=decode, **spec)
