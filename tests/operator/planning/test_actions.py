"""The action planner, sample-controller style: each case asserts the exact list of actions."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from disagg_operator.planning.actions import Action, contains, drift_patch, plan

OWNER = [
    {
        "apiVersion": "disagg.dev/v1alpha1",
        "kind": "DisaggregatedDeployment",
        "name": "dd",
        "uid": "u1",
        "controller": True,
    }
]


def pdb(name: str, unavailable: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "ownerReferences": OWNER,
            "labels": {"disagg.dev/deployment": "dd"},
        },
        "spec": {"maxUnavailable": unavailable},
    }


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}}


def svc(name: str, port: int = 8000) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "ns", "ownerReferences": OWNER},
        "spec": {"clusterIP": "None", "ports": [{"name": "http", "port": port}]},
    }


def secret(name: str, key: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "ns", "ownerReferences": OWNER},
        "stringData": {"hmac": key},
    }


def as_observed(obj: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """What the API server returns: the object plus server-set and defaulted fields."""
    out = copy.deepcopy(obj)
    out["metadata"].update(uid="x", resourceVersion="7", **extra)
    if out["kind"] == "Service":
        for port in out["spec"]["ports"]:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port["port"])
    if out["kind"] == "Secret":
        out["data"] = {"hmac": "c2VjcmV0"}
        del out["stringData"]
    return out


def strs(actions: list[Action]) -> list[str]:
    return [str(a) for a in actions]


def test_nothing_observed_creates_everything_in_render_order() -> None:
    desired = [secret("dd-handshake", "k"), svc("dd-prefill"), pdb("dd-prefill")]
    assert strs(plan(desired, [])) == [
        "create Secret/dd-handshake",
        "create Service/dd-prefill",
        "create PodDisruptionBudget/dd-prefill",
    ]
    assert plan(desired, [])[2].body == desired[2]


def test_steady_state_with_server_defaults_plans_nothing() -> None:
    desired = [secret("dd-handshake", "k"), svc("dd-prefill"), pdb("dd-prefill")]
    assert plan(desired, [as_observed(o) for o in desired]) == []


def test_a_new_role_creates_only_its_objects() -> None:
    observed = [as_observed(pdb("dd-decode"))]
    desired = [pdb("dd-decode"), svc("dd-prefill"), pdb("dd-prefill")]
    assert strs(plan(desired, observed)) == [
        "create Service/dd-prefill",
        "create PodDisruptionBudget/dd-prefill",
    ]


def test_removed_role_deletes_after_the_rest() -> None:
    observed = [as_observed(o) for o in (svc("dd-prefill"), pdb("dd-prefill"), svc("dd-decode"))]
    desired = [svc("dd-decode", port=9000)]
    assert plan(desired, observed) == [
        Action("patch", "Service", "dd-decode", "ns", "v1"),
        Action("delete", "Service", "dd-prefill", "ns", "v1"),
        Action("delete", "PodDisruptionBudget", "dd-prefill", "ns", "policy/v1"),
    ]


def test_pods_are_the_rollout_planners_not_plans() -> None:
    """A pod's spec is immutable: patching it is never the fix. plan() refuses pods so a
    caller cannot get a patch of one (the rollout planner replaces pods)."""
    with pytest.raises(ValueError, match=r"rollout\.planner"):
        plan([pod("dd-prefill-0")], [])
    with pytest.raises(ValueError, match=r"rollout\.planner"):
        plan([], [as_observed(pod("dd-prefill-0"))])


def test_terminating_objects_get_no_action_until_gone() -> None:
    gone_soon = as_observed(pdb("dd-prefill", 1), deletionTimestamp="2026-01-01T00:00:00Z")
    extra = as_observed(pdb("dd-decode"), deletionTimestamp="2026-01-01T00:00:00Z")
    assert plan([pdb("dd-prefill", 2)], [gone_soon, extra]) == []


def test_service_drift_patches_only_the_managed_fields() -> None:
    observed = [as_observed(svc("dd-prefill", port=8000))]
    actions = plan([svc("dd-prefill", port=9000)], observed)
    assert strs(actions) == ["patch Service/dd-prefill"]
    assert actions[0].body == {"spec": svc("dd-prefill", 9000)["spec"]}


def test_lost_labels_are_patched_back() -> None:
    want = svc("dd-prefill")
    want["metadata"]["labels"] = {"disagg.dev/deployment": "dd"}
    have = as_observed(svc("dd-prefill"))
    assert drift_patch(want, have) == {"metadata": {"labels": {"disagg.dev/deployment": "dd"}}}


def test_secret_key_is_never_rewritten() -> None:
    observed = [as_observed(secret("dd-handshake", "old-key"))]
    assert plan([secret("dd-handshake", "new-key")], observed) == []


def test_contains_is_a_subset_test_with_exact_lists() -> None:
    assert contains({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": 2}})
    assert not contains({"a": [1, 2]}, {"a": [1]})
    assert not contains({"a": 1}, {"a": 1, "z": None})
    assert contains([{"port": 1, "protocol": "TCP"}], [{"port": 1}])


def test_a_budget_switching_form_drops_the_other_field() -> None:
    """minAvailable and maxUnavailable exclude each other (the API server refuses a budget
    with both): a budget written with maxUnavailable (an older operator) is patched to
    minAvailable with maxUnavailable removed (null in the merge patch), and back."""
    old = as_observed(pdb("dd-decode", unavailable=1))
    new = pdb("dd-decode")
    new["spec"] = {"minAvailable": 3}
    assert [(str(a), a.body) for a in plan([new], [old])] == [
        (
            "patch PodDisruptionBudget/dd-decode",
            {"spec": {"minAvailable": 3, "maxUnavailable": None}},
        )
    ]
    patched = copy.deepcopy(old)
    patched["spec"] = {"minAvailable": 3}
    assert plan([new], [patched]) == []  # converged: no drift, no write
    assert drift_patch(pdb("dd-decode"), patched) == {
        "spec": {"maxUnavailable": 1, "minAvailable": None}
    }
