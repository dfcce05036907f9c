"""The sync (read → render → plan → execute → status) against an in-memory API double.

The double keeps objects and records writes; no HTTP. The end-to-end behaviour over HTTP
is in tests/integration/operator.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
from pathlib import Path
from typing import Any

import yaml

from disagg_operator.k8s import PLURALS
from disagg_operator.reconcile import Coalescer, status_patch, sync

ROOT = Path(__file__).resolve().parents[3]
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
LATER = NOW + datetime.timedelta(minutes=5)


class FakeApi:
    """Objects by (kind-plural, name); writes recorded as (verb, kind, name[, subresource])."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, ...]] = []

    async def get(self, api_version: str, plural: str, namespace: str, name: str) -> Any:
        return self.objects.get((plural, name))

    async def list(self, api_version: str, plural: str, namespace: str, selector: str = "") -> Any:
        key, _, value = selector.partition("=")
        return [
            copy.deepcopy(o)
            for (p, _), o in sorted(self.objects.items())
            if p == plural and o["metadata"].get("labels", {}).get(key) == value
        ]

    async def create(self, obj: Any) -> Any:
        self.writes.append(("create", obj["kind"], obj["metadata"]["name"]))
        stored = copy.deepcopy(dict(obj))
        stored["metadata"]["uid"] = f"uid-{len(self.writes)}"
        self.objects[(PLURALS[obj["kind"]], obj["metadata"]["name"])] = stored
        return stored

    async def patch(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        patch: Any,
        *,
        subresource: str = "",
    ) -> Any:
        self.writes.append(("patch", kind, name, subresource))
        if subresource == "status":
            self.body["status"] = {
                k: v
                for k, v in {**self.body.get("status", {}), **patch["status"]}.items()
                if v is not None
            }

    async def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        self.writes.append(("delete", kind, name))
        self.objects.pop((PLURALS[kind], name), None)

    async def event(self, involved: Any, *, type_: str, reason: str, message: str) -> None:
        self.writes.append(("event", type_, reason))

    @property
    def body(self) -> dict[str, Any]:
        return self.objects[("disaggregateddeployments", "demo")]


def deployment(api: FakeApi, **spec: Any) -> dict[str, Any]:
    body = yaml.safe_load((ROOT / "examples" / "quickstart-cpu.yaml").read_text())
    body["metadata"] = {"name": "demo", "namespace": "ns", "uid": "cr-uid", "generation": 1}
    body["spec"].update(spec)
    api.objects[("disaggregateddeployments", "demo")] = body
    return copy.deepcopy(body)


async def test_first_sync_creates_children_and_writes_status_once() -> None:
    api = FakeApi()
    outcome = await sync(api, deployment(api), now=NOW, new_key=lambda: "k" * 64)
    assert [str(a) for a in outcome.actions] == [
        "create Secret/demo-handshake",
        "create Service/demo-prefill",
        "create Service/demo-decode",
        "create NetworkPolicy/demo-side-channel",
        "create PodDisruptionBudget/demo-prefill",
        "create PodDisruptionBudget/demo-decode",
        "create Pod/demo-prefill-0",
        "create Pod/demo-decode-0",
    ]
    assert api.writes[-2:] == [
        ("event", "Normal", "Reconciled"),
        ("patch", "DisaggregatedDeployment", "demo", "status"),
    ]
    assert api.body["status"]["prefill"] == {
        "desired": 1,
        "ready": 0,
        "updated": 1,
        "summary": "0/1",
    }


async def test_second_sync_over_the_same_world_writes_nothing() -> None:
    api = FakeApi()
    await sync(api, deployment(api), now=NOW)
    mark = len(api.writes)
    outcome = await sync(api, copy.deepcopy(api.body), now=LATER)
    assert outcome.actions == [] and not outcome.status_written
    assert api.writes[mark:] == []


async def test_invalid_spec_writes_status_and_one_event_and_nothing_else() -> None:
    api = FakeApi()
    body = deployment(api, decode={"replicas": 1, "device": "quantum"})
    outcome = await sync(api, body, now=NOW)
    assert outcome.actions == [] and outcome.problems
    assert api.writes == [
        ("patch", "DisaggregatedDeployment", "demo", "status"),
        ("event", "Warning", "InvalidSpec"),
    ]
    ready = api.body["status"]["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "InvalidSpec")
    await sync(api, copy.deepcopy(api.body), now=LATER)
    assert len(api.writes) == 2  # unchanged problems: no new status, no second event


def test_status_patch_removes_vanished_keys_and_is_empty_when_equal() -> None:
    assert status_patch({"a": 1, "b": 2}, {"a": 1, "b": 2}) == {}
    assert status_patch({"a": 1, "gone": 2}, {"a": 3}) == {"gone": None, "a": 3}
    assert status_patch(None, {"a": 1}) == {"a": 1}


async def test_requests_during_a_run_collapse_into_one_rerun() -> None:
    runs: list[str] = []
    release = asyncio.Event()

    async def run(key: object) -> None:
        runs.append(str(key))
        await release.wait()

    coalescer = Coalescer(run)
    first = asyncio.create_task(coalescer.request("a"))
    await asyncio.sleep(0)
    others = [asyncio.create_task(coalescer.request("a")) for _ in range(5)]
    other_key = asyncio.create_task(coalescer.request("b"))
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, *others, other_key)
    assert sorted(runs) == ["a", "a", "b"]
