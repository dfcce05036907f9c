"""``disagg bench operator``'s rollout phase: two spec changes on one large deployment.

Benchmark step (I/O: the emulator and the running operator). One deployment behind its
router is rolled twice, in place (a node selector) and to a new KV revision (the engine
image), while the bench's kubelet makes pods Ready ``READY_AFTER_S`` after they appear and
holds deleted ones ``GRACE_S``, so the times are the operator's own pace. Every 20 ms it
records what routers could pair (:mod:`.rollout_figures`), because a roll must never offer
a prefill/decode pair of different KV revisions. Figures: docs/operator.md (Benchmark).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from disagg_operator.api import API_VERSION, PLURAL, RolloutStrategy
from disagg_operator.planning.reasons import ROLLOUT_COMPLETE
from disagg_operator.planning.rollout import Budget
from disagg_operator.render.router import name_of, revisions_reached
from disagg_tools.bench.rules import manifests
from disagg_tools.bench.rules import rollout_figures as figures

NAME = "roll"
READY_AFTER_S = 0.2
GRACE_S = 0.3
SURGE = 1
POOL_KEY = "inference.networking.k8s.io/v1/inferencepools"


def body(namespace: str, prefill: int, decode: int) -> dict[str, Any]:
    out = manifests.deployment(
        NAME, namespace, prefill=prefill, decode=decode, router={"enabled": True}
    )
    for role in ("prefill", "decode"):
        out["spec"][role]["rollout"] = {"maxSurge": SURGE}
    return out


class Sampler:
    """The routers' view of deployment NAME, sampled until stopped."""

    def __init__(self, emu: Any, namespace: str, replicas: dict[str, int]) -> None:
        self.emu, self.ns, self.replicas = emu, namespace, replicas
        self.lowest = dict.fromkeys(replicas, 1.0)
        self.mixed = 0
        self.extra = 0

    def sample(self) -> None:
        pods = [
            p
            for p in self.emu.objects_of("v1/pods", self.ns)
            if p["metadata"]["name"].startswith(f"{NAME}-")
        ]
        services = self.emu.objects_of("v1/services", self.ns)
        pools = [p for p in self.emu.objects_of(POOL_KEY, self.ns) if p["metadata"]["name"] == NAME]
        router = self.emu.find("apps/v1/deployments", self.ns, name_of(NAME)) or {}
        live = {p["metadata"]["labels"]["disagg.dev/kv-revision"] for p in pods}
        known = sorted(revisions_reached(router, live))
        fractions = figures.usable_fractions(NAME, pods, services, self.replicas, known)
        self.lowest = {r: min(v, fractions[r]) for r, v in self.lowest.items()}
        self.mixed = max(self.mixed, figures.mixed_pairs(NAME, pods, services, pools, known))
        self.extra = max(self.extra, figures.extra_pods(pods, self.replicas))

    async def run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(0.02)


def _status(emu: Any, namespace: str) -> dict[str, Any]:
    found = emu.find(f"{API_VERSION}/{PLURAL}", namespace, NAME) or {}
    return dict(found.get("status") or {})


def _complete(emu: Any, namespace: str, generation: int) -> bool:
    status = _status(emu, namespace)
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    progressing = conditions.get("Progressing", {})
    return (
        progressing.get("reason") == ROLLOUT_COMPLETE
        and progressing.get("observedGeneration") == generation
        and conditions.get("Ready", {}).get("status") == "True"
    )


async def run(
    bench: Any,
    http: Any,
    *,
    namespace: str,
    prefill: int,
    decode: int,
    timeout: float,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Create NAME, wait for it, then the two rolls; the figures of the module docstring."""
    path = f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURAL}"
    bench.pods.terminate_after = GRACE_S
    async with http.post(path, json=body(namespace, prefill, decode)) as resp:
        assert resp.status == 201, await resp.text()
    await bench.until("the rollout deployment", lambda: _complete(bench.emu, namespace, 1), timeout)
    replicas = {"prefill": prefill, "decode": decode}
    bench.pods.ready_after = READY_AFTER_S
    sampler = Sampler(bench.emu, namespace, replicas)
    task = asyncio.create_task(sampler.run())
    strategy = RolloutStrategy(max_surge=SURGE)
    unavailable = {r: Budget.of(n, strategy).unavailable for r, n in replicas.items()}
    targets = figures.ready_targets(replicas, unavailable)
    out: dict[str, Any] = {}
    try:
        pools = {"nodeSelector": {"pool": "b"}}
        change = {"prefill": pools, "decode": pools}
        seconds = await _roll(bench, http, namespace, change, 2, timeout, progress)
        role, lowest, target = figures.worst(sampler.lowest, targets)
        out["rollout_s"] = round(seconds, 3)
        out["rollout_min_ready_fraction"] = round(lowest, 3)
        out["rollout_min_ready_target"] = round(target, 3)
        out["rollout_min_ready_role"] = role
        sampler.lowest, sampler.extra = dict.fromkeys(replicas, 1.0), 0
        engine = {"type": "reference", "image": "worker:bench-2"}
        seconds = await _roll(bench, http, namespace, {"engine": engine}, 3, timeout, progress)
        role, lowest, target = figures.worst(sampler.lowest, targets)
        out["rollout_kv_s"] = round(seconds, 3)
        out["rollout_kv_min_ready_fraction"] = round(lowest, 3)
        out["rollout_kv_min_ready_target"] = round(target, 3)
        out["rollout_kv_peak_extra_pods"] = sampler.extra
    finally:
        task.cancel()
        bench.pods.ready_after, bench.pods.terminate_after = 0.0, None
    out["rollout_mixed_pairs"] = sampler.mixed
    out["rollout_pods"] = f"{prefill}P+{decode}D"
    return out


async def _roll(
    bench: Any,
    http: Any,
    namespace: str,
    spec: dict[str, Any],
    generation: int,
    timeout: float,
    progress: Callable[[str], None],
) -> float:
    """Patch NAME's spec; seconds until its status says the rollout of ``generation`` is
    complete."""
    started = time.monotonic()
    url = f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURAL}/{NAME}"
    headers = {"Content-Type": "application/merge-patch+json"}
    async with http.patch(url, json={"spec": spec}, headers=headers) as resp:
        assert resp.status == 200, await resp.text()

    def done() -> bool:
        status = _status(bench.emu, namespace)
        summary = ", ".join(f"{r} {status.get(r, {}).get('summary', '?')}" for r in figures.ROLES)
        progress(f"rollout {generation - 1}/2: {summary}")
        return _complete(bench.emu, namespace, generation)

    await bench.until(f"rollout {generation - 1}", done, timeout, every=0.05)
    return time.monotonic() - started
