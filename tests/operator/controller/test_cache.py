"""The watch-fed cache: what it keeps, and its rule for the operator's own writes."""

from __future__ import annotations

from typing import Any

from disagg_operator.controller.rules.cache import Cache, owner, project

KEY = ("ns", "demo")
UID = "cr-uid"


def child(kind: str, name: str, rv: int | str, uid: str = "", **extra: Any) -> dict[str, Any]:
    meta = {
        "name": name,
        "namespace": "ns",
        "uid": uid or f"uid-{name}",
        "resourceVersion": str(rv),
        "ownerReferences": [
            {"kind": "DisaggregatedDeployment", "name": "demo", "uid": UID, "controller": True}
        ],
        **extra,
    }
    return {"apiVersion": "v1", "kind": kind, "metadata": meta}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(pods: list[dict[str, Any]], clock: Clock | None = None) -> Cache:
    """A cache over one child source (the list stays live: tests edit it as a watch would)."""
    cr = {"kind": "DisaggregatedDeployment", "metadata": {"name": "demo", "namespace": "ns"}}
    return Cache({KEY: [cr]}, [{KEY: pods}], ttl=30.0, monotonic=clock or Clock())


def names(cache: Cache) -> list[str]:
    return [o["metadata"]["name"] for o in cache.children("ns", "demo", UID)]


def test_project_keeps_what_a_sync_reads() -> None:
    pod = child("Pod", "p", 1, managedFields=[{"manager": "x"}], labels={"a": "b"})
    pod["spec"] = {"containers": [{"name": "engine"}]}
    pod["status"] = {"phase": "Running"}
    kept = project(pod)
    assert "spec" not in kept and kept["status"] == {"phase": "Running"}
    assert "managedFields" not in kept["metadata"] and kept["metadata"]["labels"] == {"a": "b"}
    service = {**child("Service", "s", 1), "spec": {"ports": []}}
    assert project(service)["spec"] == {"ports": []}
    cr = {"kind": "X", "metadata": {"annotations": {"disagg.dev/last-handled-configuration": "{}"}}}
    assert project(cr)["metadata"]["annotations"] == {}


def test_owner_is_the_controlling_deployment() -> None:
    assert owner(child("Pod", "p", 1)) == KEY
    stray = child("Pod", "p", 1)
    stray["metadata"]["ownerReferences"][0]["controller"] = False
    assert owner(stray) is None


def test_children_are_those_the_deployment_uid_owns() -> None:
    other = child("Pod", "old", 1)
    other["metadata"]["ownerReferences"][0]["uid"] = "an-earlier-cr-with-that-name"
    assert names(make([child("Pod", "a", 1), other])) == ["a"]


def test_a_created_object_shows_until_the_watch_has_it() -> None:
    pods: list[dict[str, Any]] = []
    cache = make(pods)
    cache.wrote(KEY, child("Pod", "a", 7))
    assert names(cache) == ["a"]  # the watch has not delivered it: no second create
    pods.append(child("Pod", "a", 7))
    assert names(cache) == ["a"]
    pods[0] = child("Pod", "a", 9, labels={"x": "y"})  # a later change wins
    assert cache.children("ns", "demo", UID)[0]["metadata"]["labels"] == {"x": "y"}


def test_a_patch_answer_wins_over_an_older_cached_version_only() -> None:
    pods = [child("Pod", "a", 5, labels={"v": "old"})]
    cache = make(pods)
    cache.wrote(KEY, child("Pod", "a", 8, labels={"v": "ours"}))
    assert cache.children("ns", "demo", UID)[0]["metadata"]["labels"] == {"v": "ours"}
    pods[0] = child("Pod", "a", 8, labels={"v": "ours"})
    pods[0]["metadata"]["labels"] = {"v": "watched"}
    assert cache.children("ns", "demo", UID)[0]["metadata"]["labels"] == {"v": "watched"}


def test_a_deleted_object_is_gone_until_the_watch_drops_it_and_never_deleted_twice() -> None:
    pods = [child("Pod", "a", 5), child("Pod", "b", 5)]
    cache = make(pods)
    cache.deleted(KEY, "Pod", "a", {"kind": "Status", "status": "Success"})
    assert names(cache) == ["b"]
    pods.pop(0)  # the watch's DELETED
    assert names(cache) == ["b"]
    pods.insert(0, child("Pod", "a", 12, uid="new-uid"))  # recreated later: shown
    assert names(cache) == ["a", "b"]


def test_a_terminating_delete_answer_counts_as_terminating() -> None:
    cache = make([child("Pod", "a", 5)])
    cache.deleted(KEY, "Pod", "a", child("Pod", "a", 6, deletionTimestamp="2026-01-01T00:00:00Z"))
    (pod,) = cache.children("ns", "demo", UID)
    assert pod["metadata"]["deletionTimestamp"]


def test_own_writes_expire_after_the_ttl() -> None:
    clock = Clock()
    cache = make([], clock)
    cache.wrote(KEY, child("Pod", "a", 7))
    clock.now += 31  # the watch never showed it (e.g. deleted at once): trust the cache
    assert names(cache) == []


def test_without_integer_resource_versions_the_cache_wins() -> None:
    cache = make([child("Pod", "a", "opaque-1")])
    cache.wrote(KEY, child("Pod", "a", "opaque-2", labels={"v": "ours"}))
    assert "labels" not in cache.children("ns", "demo", UID)[0]["metadata"]


def test_the_status_written_is_the_next_syncs_previous_status() -> None:
    cr: dict[str, Any] = {
        "kind": "DisaggregatedDeployment",
        "metadata": {"name": "demo", "namespace": "ns", "resourceVersion": "3"},
    }
    cache = Cache({KEY: [cr]}, [])
    cache.wrote(KEY, {**cr, "metadata": {**cr["metadata"], "resourceVersion": "4"}, "status": {}})
    assert (cache.deployment("ns", "demo") or {})["status"] == {}
    assert cache.deployment("ns", "other") is None
    assert cache.deployments() == [KEY]


def test_correct_hides_what_was_deleted_without_an_event() -> None:
    pods = [child("Pod", "a", 5), child("Pod", "b", 5), child("Pod", "c", 20)]
    cache = make(pods)
    lost = cache.correct([child("Pod", "b", 5)], "10", {"Pod"})
    assert lost == {KEY}
    # a was lost; c is newer than the listing (created after it), so it stays
    assert names(cache) == ["b", "c"]
    pods.append(child("Pod", "a", 30, uid="recreated"))  # the sync recreated it
    assert names(cache) == ["a", "b", "c"]
    assert cache.correct(list(pods[1:]), "40", {"Pod"}) == {KEY}  # the ghost stays hidden
    assert names(cache) == ["a", "b", "c"]
