"""The real operator (kopf, in this event loop) against the API emulator, plus test verbs."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from disagg_operator.controller.config import OperatorConfig
from disagg_operator.controller.run import running
from tests.support.emulator import Emulator

ROOT = Path(__file__).resolve().parents[2]
NS = "team-a"
DD = "disagg.dev/v1alpha1/disaggregateddeployments"
DD_PATH = f"/apis/disagg.dev/v1alpha1/namespaces/{NS}/disaggregateddeployments"


def quickstart(name: str = "demo", **spec: Any) -> dict[str, Any]:
    """examples/quickstart-cpu.yaml named ``name`` in NS, without its router unless ``spec``
    says ``router`` (the tests count the pods' children), with top-level spec overrides."""
    body = yaml.safe_load((ROOT / "examples" / "quickstart-cpu.yaml").read_text())
    body["metadata"] = {"name": name, "namespace": NS}
    body["spec"].pop("router", None)
    body["spec"].update(copy.deepcopy(spec))
    return body


async def api(emu: Emulator, method: str, path: str, body: Any = None) -> Any:
    """One request as a user (kubectl) would make it; returns the decoded answer."""
    headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
    async with (
        aiohttp.ClientSession(str(emu.url)) as http,
        http.request(method, path, json=body, headers=headers) as resp,
    ):
        assert resp.status < 400, await resp.text()
        return await resp.json()


async def until(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Poll ``check`` until truthy; fail naming ``what`` if it never is (not a timing test)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        result = check()
        if result:
            return result
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


async def sampled(samples: list[Any]) -> None:
    """Wait for an observer that appends to ``samples`` to take one more: a sample of the
    world as it is now (a change can land between two of its samples, and a test that
    checks the samples for the last state must not end first)."""
    taken = len(samples)
    await until("the observer's next sample", lambda: len(samples) > taken)


def pods(emu: Emulator, name: str = "demo") -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["name"]: p
        for p in emu.objects_of("v1/pods", NS)
        if p["metadata"].get("labels", {}).get("disagg.dev/deployment") == name
    }


def condition(emu: Emulator, name: str, kind: str = "Ready") -> dict[str, Any]:
    body = emu.find(DD, NS, name) or {}
    found = [c for c in body.get("status", {}).get("conditions", []) if c["type"] == kind]
    return found[0] if found else {}


def ready_after(emu: Emulator, seen: dict[str, float], now: float, delay: float = 0.3) -> None:
    """Play the kubelet: mark each of the deployment's pods Ready ``delay`` s after it was
    first seen (``seen``: uid → when, kept by the caller)."""
    for name, pod in pods(emu).items():
        first = seen.setdefault(pod["metadata"]["uid"], now)
        conditions = (pod.get("status") or {}).get("conditions") or []
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        if not ready and now - first > delay:
            emu.set_pod_ready(NS, name)


async def rolled_out(emu: Emulator, name: str = "demo") -> dict[str, Any]:
    """The deployment's status once its rollout is complete (Progressing RolloutComplete)
    for the spec as it is now: a condition observed for an older generation is stale, as
    kubectl rollout status reads it."""

    def finished() -> Any:
        body = emu.find(DD, NS, name) or {}
        progressing = condition(emu, name, "Progressing")
        current = progressing.get("observedGeneration") == body["metadata"].get("generation")
        return current and progressing.get("reason") == "RolloutComplete" and body["status"]

    found: dict[str, Any] = await until("rollout complete", finished, timeout=60)
    return found


@pytest.fixture()
async def operator(emulator: Emulator) -> AsyncIterator[asyncio.Task[None]]:
    """The operator, cluster-wide, talking HTTP to the emulator."""
    async with running(OperatorConfig(host=str(emulator.url).rstrip("/"))) as task:
        yield task
