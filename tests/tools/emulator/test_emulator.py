"""The API emulator behaves like an API server where kopf, kubectl and the operator care.

Each test speaks real HTTP to the emulator and checks one of the kmock 0.8 gaps fixed by
:mod:`disagg_tools.emulator.server`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from tests.support.emulator import ApiCall, Emulator, api_calls

OLD_CRD = Path(__file__).parent / "apiserver" / "crd_9de3707.yaml"

PODS = "/api/v1/namespaces/ns1/pods"
MERGE = {"Content-Type": "application/merge-patch+json"}


def _pod(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


async def _call(
    emu: Emulator, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession(str(emu.url)) as http,
        http.request(method, path, json=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


async def test_objects_get_identity_and_lists_are_typed(emulator: Emulator) -> None:
    code, pod = await _call(emulator, "POST", PODS, _pod("a"))
    assert code == 201
    meta = pod["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1
    assert meta["namespace"] == "ns1" and int(meta["resourceVersion"]) > 0
    code, again = await _call(emulator, "POST", PODS, _pod("a"))
    assert (code, again["reason"]) == (409, "AlreadyExists")
    code, listing = await _call(emulator, "GET", PODS)
    assert (listing["kind"], listing["apiVersion"]) == ("PodList", "v1")
    assert listing["metadata"]["resourceVersion"] == meta["resourceVersion"]
    assert [p["metadata"]["name"] for p in listing["items"]] == ["a"]


async def test_watch_from_list_version_loses_nothing(emulator: Emulator) -> None:
    _, listing = await _call(emulator, "GET", PODS)
    await _call(emulator, "POST", PODS, _pod("between"))  # after the list, before the watch
    rv = listing["metadata"]["resourceVersion"]
    async with (
        aiohttp.ClientSession(str(emulator.url)) as http,
        http.get(
            PODS, params={"watch": "true", "resourceVersion": rv, "timeoutSeconds": "1"}
        ) as resp,
    ):
        lines = [json.loads(line) async for line in resp.content if line.strip()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("ADDED", "between")]


async def test_patches_follow_api_server_semantics(emulator: Emulator) -> None:
    _, pod = await _call(emulator, "POST", PODS, _pod("a", app="x"))
    rv = pod["metadata"]["resourceVersion"]
    code, same = await _call(
        emulator, "PATCH", f"{PODS}/a", {"metadata": {"labels": {"app": "x"}}}, MERGE
    )
    assert code == 200 and same["metadata"]["resourceVersion"] == rv  # no-op: no new version
    stale = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "0"},
        {"op": "add", "path": "/metadata/labels/b", "value": "1"},
    ]
    code, err = await _call(
        emulator, "PATCH", f"{PODS}/a", stale, {"Content-Type": "application/json-patch+json"}
    )
    assert code == 422 and err["kind"] == "Status"
    _, cut = await _call(
        emulator, "PATCH", f"{PODS}/a", {"metadata": {"labels": {"app": None}}}, MERGE
    )
    assert cut["metadata"].get("labels") == {} and cut["metadata"]["resourceVersion"] != rv


async def test_status_subresource_is_separate_and_generation_tracks_spec(
    emulator: Emulator,
) -> None:
    await _call(emulator, "POST", PODS, _pod("a"))
    _, pod = await _call(emulator, "PATCH", f"{PODS}/a", {"status": {"phase": "Running"}}, MERGE)
    assert "status" not in pod
    _, pod = await _call(
        emulator,
        "PATCH",
        f"{PODS}/a/status",
        {"status": {"phase": "Running"}, "spec": {"nodeName": "n"}},
        MERGE,
    )
    assert pod["status"] == {"phase": "Running"} and "nodeName" not in pod["spec"]
    assert pod["metadata"]["generation"] == 1
    _, pod = await _call(emulator, "PATCH", f"{PODS}/a", {"spec": {"nodeName": "n"}}, MERGE)
    assert pod["metadata"]["generation"] == 2 and pod["status"] == {"phase": "Running"}


async def test_apply_creates_and_generate_name_and_selectors(emulator: Emulator) -> None:
    code, pod = await _call(
        emulator,
        "PATCH",
        f"{PODS}/applied",
        _pod("applied", app="x"),
        {"Content-Type": "application/apply-patch+yaml"},
    )
    assert code == 200 and pod["metadata"]["uid"]
    body = _pod("", app="y")
    body["metadata"] = {"generateName": "gen-", "labels": {"app": "y"}}
    _, gen = await _call(emulator, "POST", PODS, body)
    assert gen["metadata"]["name"].startswith("gen-") and len(gen["metadata"]["name"]) > 4
    _, listing = await _call(emulator, "GET", f"{PODS}?labelSelector=app%3Dy")
    assert [p["metadata"]["name"] for p in listing["items"]] == [gen["metadata"]["name"]]
    _, listing = await _call(emulator, "GET", f"{PODS}?labelSelector=app%20notin%20(y)")
    assert [p["metadata"]["name"] for p in listing["items"]] == ["applied"]


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PRESERVE = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}


async def test_a_crd_kube_apiserver_refuses_is_refused_in_its_words(emulator: Emulator) -> None:
    """The CRD of 9de3707 (not structural) answers 422 with kube-apiserver's message, and
    nothing is served; the CRD of crds/ was accepted (the fixture posts it)."""
    old = yaml.safe_load(OLD_CRD.read_text())
    old["metadata"]["name"] = "olds.disagg.dev"
    old["spec"]["names"].update(plural="olds", singular="old", kind="Old", listKind="OldList")
    old["spec"]["names"].pop("shortNames", None)
    code, err = await _call(emulator, "POST", CRDS, old)
    assert code == 422 and err["reason"] == "Invalid"
    assert err["message"].startswith(
        'CustomResourceDefinition.apiextensions.k8s.io "olds.disagg.dev" is invalid: ['
    )
    assert err["message"].count("Forbidden: must be empty to be structural") == 12
    code, _ = await _call(emulator, "GET", "/apis/disagg.dev/v1alpha1/namespaces/ns1/olds")
    assert code == 404
    assert (
        emulator.find("apiextensions.k8s.io/v1/customresourcedefinitions", "", "olds.disagg.dev")
        is None
    )
    assert emulator.find(
        "apiextensions.k8s.io/v1/customresourcedefinitions",
        "",
        "disaggregateddeployments.disagg.dev",
    )


async def test_discovery_namespaces_and_crd_posting(emulator: Emulator) -> None:
    _, core = await _call(emulator, "GET", "/api/v1")
    assert core["groupVersion"] == "v1"
    code, _ = await _call(emulator, "POST", "/api/v1/namespaces", {"metadata": {"name": "ns1"}})
    assert code == 201
    _, spaces = await _call(emulator, "GET", "/api/v1/namespaces")
    assert [n["metadata"]["name"] for n in spaces["items"]] == ["ns1"]
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.dev"},
        "spec": {
            "group": "example.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": PRESERVE}],
        },
    }
    code, _ = await _call(emulator, "POST", CRDS, crd)
    assert code == 201
    code, _ = await _call(
        emulator, "POST", "/apis/example.dev/v1/namespaces/ns1/widgets", {"metadata": {"name": "w"}}
    )
    assert code == 201
    code, err = await _call(emulator, "GET", "/apis/example.dev/v1/namespaces/ns1/gadgets")
    assert (code, err["reason"]) == (404, "NotFound")


async def test_requests_are_recorded_in_rbac_terms(emulator: Emulator) -> None:
    await _call(emulator, "POST", PODS, _pod("a"))
    await _call(emulator, "PATCH", f"{PODS}/a/status", {"status": {"phase": "Running"}}, MERGE)
    await _call(emulator, "GET", "/api/v1/pods")
    await _call(emulator, "DELETE", f"{PODS}/a")
    await asyncio.sleep(0)
    assert api_calls(emulator) == [
        ApiCall("create", "", "pods", "", "ns1", ""),
        ApiCall("patch", "", "pods", "status", "ns1", "a"),
        ApiCall("list", "", "pods", "", "", ""),
        ApiCall("delete", "", "pods", "", "ns1", "a"),
    ]
    assert [c.verb for c in api_calls(emulator, writes_only=True)] == ["create", "patch", "delete"]
    assert emulator.objects_of("v1/pods") == []


async def test_finalizers_hold_deletion_until_removed(emulator: Emulator) -> None:
    body = _pod("held")
    body["metadata"]["finalizers"] = ["example.dev/cleanup"]
    await _call(emulator, "POST", PODS, body)
    code, marked = await _call(emulator, "DELETE", f"{PODS}/held")
    assert code == 200 and marked["metadata"]["deletionTimestamp"]
    assert emulator.find("v1/pods", "ns1", "held") is not None
    await _call(emulator, "PATCH", f"{PODS}/held", {"metadata": {"finalizers": None}}, MERGE)
    assert emulator.find("v1/pods", "ns1", "held") is None


async def test_put_replaces_and_stale_versions_conflict(emulator: Emulator) -> None:
    _, pod = await _call(emulator, "POST", PODS, _pod("a"))
    pod["metadata"]["labels"] = {"new": "yes"}
    code, put = await _call(emulator, "PUT", f"{PODS}/a", pod)
    assert code == 200 and put["metadata"]["labels"] == {"new": "yes"}
    code, err = await _call(emulator, "PUT", f"{PODS}/a", pod)  # the old resourceVersion
    assert (code, err["reason"]) == (409, "Conflict")


async def test_refuse_answers_like_a_quota_until_allowed(emulator: Emulator) -> None:
    quota = emulator.refuse(
        "v1/pods",
        code=403,
        reason="Forbidden",
        message='pods "{name}" is forbidden: exceeded quota: q, limited: pods=1',
        namespace="ns1",
    )
    code, body = await _call(emulator, "POST", PODS, _pod("a"))
    assert code == 403
    assert body["kind"] == "Status" and body["reason"] == "Forbidden"
    assert body["message"] == 'pods "a" is forbidden: exceeded quota: q, limited: pods=1'
    assert body["details"] == {"name": "a", "kind": "pod"}
    assert emulator.find("v1/pods", "ns1", "a") is None
    assert api_calls(emulator, writes_only=True)[-1].verb == "create"  # recorded as sent
    other = "/api/v1/namespaces/ns2/pods"
    assert (await _call(emulator, "POST", other, _pod("b")))[0] == 201  # other namespace
    assert (await _call(emulator, "GET", PODS))[0] == 200  # other verbs
    emulator.allow(quota)
    assert (await _call(emulator, "POST", PODS, _pod("a")))[0] == 201


async def test_scale_subresource_reads_and_writes_through_the_crd_paths(emulator: Emulator) -> None:
    """GET/PATCH/PUT .../scale as an API server serves a CRD's scale subresource: an
    autoscaling/v1 Scale from the CRD's three paths; a write sets only specReplicasPath."""
    base = "/apis/disagg.dev/v1alpha1/namespaces/ns1/disaggregateddeployments"
    engine = {"type": "reference", "image": "example.com/reference:1"}
    spec = {"model": "m", "engine": engine, "prefill": {}, "decode": {"replicas": 2}}
    code, created = await _call(emulator, "POST", base, {"metadata": {"name": "d"}, "spec": spec})
    assert code == 201
    status = {"status": {"replicas": 2, "selector": "disagg.dev/deployment=d"}}
    await _call(emulator, "PATCH", f"{base}/d/status", status, MERGE)
    code, scale = await _call(emulator, "GET", f"{base}/d/scale")
    assert code == 200 and (scale["apiVersion"], scale["kind"]) == ("autoscaling/v1", "Scale")
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 2, "selector": "disagg.dev/deployment=d"}
    code, scale = await _call(
        emulator, "PATCH", f"{base}/d/scale", {"spec": {"replicas": 6}}, MERGE
    )
    assert code == 200 and scale["spec"] == {"replicas": 6}
    stored = emulator.find("disagg.dev/v1alpha1/disaggregateddeployments", "ns1", "d")
    scaled = {**created["spec"], "decode": {**created["spec"]["decode"], "replicas": 6}}
    assert stored is not None and stored["spec"] == scaled  # only specReplicasPath changed
    assert stored["metadata"]["generation"] == 2 and stored["status"]["replicas"] == 2
    scale["spec"]["replicas"] = 4
    code, _ = await _call(emulator, "PUT", f"{base}/d/scale", scale)
    assert code == 200
    code, err = await _call(emulator, "PUT", f"{base}/d/scale", scale)  # stale resourceVersion
    assert (code, err["reason"]) == (409, "Conflict")
    code, err = await _call(emulator, "PATCH", f"{base}/d/scale", {"spec": {"replicas": -1}}, MERGE)
    assert (code, err["reason"]) == (422, "Invalid")
    stored = emulator.find("disagg.dev/v1alpha1/disaggregateddeployments", "ns1", "d")
    assert stored is not None and stored["spec"]["decode"]["replicas"] == 4
    _, discovery = await _call(emulator, "GET", "/apis/disagg.dev/v1alpha1")
    entry = next(r for r in discovery["resources"] if r["name"].endswith("/scale"))
    assert (entry["group"], entry["version"], entry["kind"]) == ("autoscaling", "v1", "Scale")


async def test_each_watch_event_keeps_the_resource_version_of_its_own_write(
    emulator: Emulator,
) -> None:
    _, created = await _call(emulator, "POST", PODS, _pod("a"))
    emulator.set_pod_ready("ns1", "a")  # a merge patch: shares untouched parts with "a"
    await _call(emulator, "PATCH", f"{PODS}/a", {"metadata": {"labels": {"x": "y"}}}, MERGE)
    assert len(emulator._log["v1/pods"]) == 3
    events = [(rv, event["object"]) for rv, event in emulator._log["v1/pods"]]
    assert [obj["metadata"]["resourceVersion"] for _, obj in events] == [
        str(rv) for rv, _ in events
    ]
    assert events[0][1]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_a_budget_with_both_min_and_max_is_invalid_as_on_an_api_server(
    emulator: Emulator,
) -> None:
    """policy/v1 validation: minAvailable and maxUnavailable exclude each other, on create
    and on a patch that leaves both; a patch removing one (null) is accepted."""
    path = "/apis/policy/v1/namespaces/ns1/poddisruptionbudgets"
    selector = {"matchLabels": {"app": "x"}}
    both = {"metadata": {"name": "b"}, "spec": {"selector": selector, "minAvailable": 1}}
    both["spec"]["maxUnavailable"] = 1
    code, err = await _call(emulator, "POST", path, both)
    assert (code, err["reason"]) == (422, "Invalid") and "cannot be both set" in err["message"]
    old = {"metadata": {"name": "b"}, "spec": {"selector": selector, "maxUnavailable": 1}}
    assert (await _call(emulator, "POST", path, old))[0] == 201
    code, err = await _call(emulator, "PATCH", f"{path}/b", {"spec": {"minAvailable": 2}}, MERGE)
    assert (code, err["reason"]) == (422, "Invalid")
    swap = {"spec": {"minAvailable": 2, "maxUnavailable": None}}
    code, now = await _call(emulator, "PATCH", f"{path}/b", swap, MERGE)
    assert code == 200 and now["spec"] == {"selector": selector, "minAvailable": 2}
