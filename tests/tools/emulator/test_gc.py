"""The emulator collects garbage by owner reference as kube-controller-manager does
(v1.36 pkg/controller/garbagecollector): background, foreground and orphan propagation,
dangling references, and an object created for an owner that is gone. Real HTTP."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from disagg_tools.emulator.rules import gc
from tests.support.emulator import Emulator

NS = "gc"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
PODS = f"/api/v1/namespaces/{NS}/pods"


async def _call(emu: Emulator, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession(str(emu.url)) as http,
        http.request(method, path, json=body) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


def _ref(owner: dict[str, Any], *, block: bool = False) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": meta["name"],
        "uid": meta["uid"],
        **({"blockOwnerDeletion": True} if block else {}),
    }


async def _owner(emu: Emulator, name: str) -> dict[str, Any]:
    code, body = await _call(emu, "POST", CMS, {"metadata": {"name": name}})
    assert code == 201
    return dict(body)


async def _pod(emu: Emulator, name: str, *refs: dict[str, Any], **meta: Any) -> int:
    pod = {
        "metadata": {"name": name, "ownerReferences": list(refs), **meta},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    code, _ = await _call(emu, "POST", PODS, pod)
    return code


def _live(emu: Emulator, key: str, name: str) -> dict[str, Any] | None:
    return emu.find(key, NS, name)


async def test_background_deletes_dependents_and_drops_dangling_references(
    emulator: Emulator,
) -> None:
    owner, other = await _owner(emulator, "owner"), await _owner(emulator, "other")
    await _pod(emulator, "only-child", _ref(owner))
    await _pod(emulator, "shared", _ref(owner), _ref(other))
    code, _ = await _call(emulator, "DELETE", f"{CMS}/owner")
    assert code == 200
    assert _live(emulator, "v1/configmaps", "owner") is None
    assert _live(emulator, "v1/pods", "only-child") is None
    shared = _live(emulator, "v1/pods", "shared")
    assert shared is not None  # another owner still holds it: only the dangling ref goes
    assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["other"]


async def test_foreground_waits_for_blocking_dependents_first(emulator: Emulator) -> None:
    owner = await _owner(emulator, "owner")
    await _pod(emulator, "blocker", _ref(owner, block=True), finalizers=["example.com/hold"])
    options = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}
    code, _ = await _call(emulator, "DELETE", f"{CMS}/owner", options)
    assert code == 200
    # the dependent cannot go (a finalizer of its own): the owner waits, marked
    held = _live(emulator, "v1/configmaps", "owner")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    assert gc.FOREGROUND in held["metadata"]["finalizers"]
    assert _live(emulator, "v1/pods", "blocker")["metadata"]["deletionTimestamp"]
    # its finalizer lifted, the dependent goes, then the owner
    patch = {"metadata": {"finalizers": None}}
    async with (
        aiohttp.ClientSession(str(emulator.url)) as http,
        http.patch(
            f"{PODS}/blocker", json=patch, headers={"Content-Type": "application/merge-patch+json"}
        ) as resp,
    ):
        assert resp.status == 200
    assert _live(emulator, "v1/pods", "blocker") is None
    assert _live(emulator, "v1/configmaps", "owner") is None


async def test_foreground_deletes_dependents_before_the_owner(emulator: Emulator) -> None:
    owner = await _owner(emulator, "owner")
    await _pod(emulator, "child", _ref(owner, block=True))
    mark = emulator.revision
    options = {"propagationPolicy": "Foreground"}
    assert (await _call(emulator, "DELETE", f"{CMS}/owner", options))[0] == 200
    events = sorted(
        (rv, ev["type"], ev["object"].get("kind", key))
        for key in ("v1/pods", "v1/configmaps")
        for rv, ev in emulator._log[key]
        if rv > mark
    )
    kinds = [(t, k) for _, t, k in events]
    assert kinds[0] == ("MODIFIED", "ConfigMap")  # marked: deletionTimestamp, finalizer
    assert kinds.index(("DELETED", "Pod")) < kinds.index(("DELETED", "ConfigMap"))


async def test_orphan_keeps_dependents_without_the_reference(emulator: Emulator) -> None:
    owner = await _owner(emulator, "owner")
    await _pod(emulator, "child", _ref(owner))
    code, _ = await _call(emulator, "DELETE", f"{CMS}/owner?propagationPolicy=Orphan")
    assert code == 200
    assert _live(emulator, "v1/configmaps", "owner") is None
    child = _live(emulator, "v1/pods", "child")
    assert child is not None and "ownerReferences" not in child["metadata"]


async def test_an_object_created_for_an_absent_owner_is_collected(emulator: Emulator) -> None:
    owner = await _owner(emulator, "owner")
    stale = {**_ref(owner), "uid": "an-earlier-owner-of-that-name"}
    assert await _pod(emulator, "late", stale) == 201
    assert _live(emulator, "v1/pods", "late") is None
    assert await _pod(emulator, "kept", _ref(owner)) == 201
    assert _live(emulator, "v1/pods", "kept") is not None


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"propagationPolicy": "Sideways"}, 'Unsupported value: "Sideways"'),
        ({"propagationPolicy": "Orphan", "orphanDependents": True}, "cannot be both set"),
    ],
)
async def test_a_bad_propagation_policy_is_refused(
    emulator: Emulator, options: dict[str, Any], says: str
) -> None:
    await _owner(emulator, "owner")
    code, body = await _call(emulator, "DELETE", f"{CMS}/owner", options)
    assert code == 422 and says in body["message"]
    assert _live(emulator, "v1/configmaps", "owner") is not None
