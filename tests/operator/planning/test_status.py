"""Status: counts, conditions with reasons, and lastTransitionTime moving only on a flip."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from disagg_operator.api import SPEC_HASH
from disagg_operator.controller.sync import status_patch
from disagg_operator.planning import status
from disagg_operator.planning.decide import decide, rendering
from disagg_operator.planning.observed import Observed
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, by_kind, role

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
T0_TEXT = "2026-01-01T12:00:00Z"


def _observed(desired: list[dict[str, Any]], *, ready: bool = True) -> list[dict[str, Any]]:
    pods = copy.deepcopy(desired)
    for pod in pods:
        pod["status"] = {"conditions": [{"type": "Ready", "status": str(ready)}]}
    return pods


def _compute(
    obj: dict[str, Any],
    pods: list[dict[str, Any]],
    previous: Any = None,
    now: datetime = T0,
    generation: int = 1,
) -> dict[str, Any]:
    dd, problems = validation.parse(obj)
    uid = obj["metadata"]["uid"]
    name = obj["metadata"]["name"]
    seen = Observed(name, now, pods, generation=generation, previous=previous)
    steps = decide(dd, seen, rendering(dd, uid)) if dd and not problems else None
    return status.compute(seen, spec=dd.spec if dd else None, problems=problems, rollout=steps)


def _counts(role: dict[str, Any]) -> dict[str, Any]:
    """A role's counts without its revisions (hashes, checked in their own tests)."""
    return {k: v for k, v in role.items() if not k.endswith("Revision")}


def _cond(result: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in result["conditions"] if c["type"] == kind)


def _desired(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return by_kind(render(obj, hmac_key="k"), "Pod")


def test_all_ready() -> None:
    obj = body(prefill=role(replicas=2))
    result = _compute(obj, _observed(_desired(obj)), generation=3)
    assert _counts(result["prefill"]) == {"desired": 2, "ready": 2, "updated": 2, "summary": "2/2"}
    assert _counts(result["decode"]) == {"desired": 1, "ready": 1, "updated": 1, "summary": "1/1"}
    assert result["observedGeneration"] == 3
    assert [(c["type"], c["status"], c["reason"]) for c in result["conditions"]] == [
        ("Ready", "True", "AllReplicasReady"),
        ("Progressing", "False", "RolloutComplete"),
        ("Degraded", "False", "AsExpected"),
        ("TransferPathReady", "Unknown", "NoDecodePods"),  # no pod reports a canary
    ]
    assert all(c["observedGeneration"] == 3 for c in result["conditions"])
    assert all(c["lastTransitionTime"] == T0_TEXT for c in result["conditions"])
    assert result["phase"] == "Ready"


def test_nothing_created_yet() -> None:
    result = _compute(body(), [])
    assert result["prefill"]["summary"] == "0/1"
    assert _cond(result, "Ready")["reason"] == "ReplicasNotReady"
    assert _cond(result, "Progressing")["reason"] == "RollingOut"
    assert "prefill 0/1 ready" in _cond(result, "Ready")["message"]
    assert result["phase"] == "Progressing"


def test_pods_starting() -> None:
    obj = body()
    result = _compute(obj, _observed(_desired(obj), ready=False))
    assert _counts(result["prefill"]) == {"desired": 1, "ready": 0, "updated": 1, "summary": "0/1"}
    assert _cond(result, "Progressing")["reason"] == "PodsStarting"


def test_drifted_pod_is_not_updated() -> None:
    obj = body()
    pods = _observed(_desired(obj))
    pods[0]["metadata"]["annotations"][SPEC_HASH] = "old"
    result = _compute(obj, pods)
    assert _counts(result["prefill"]) == {
        "desired": 1,
        "ready": 1,
        "updated": 0,
        "summary": "1/1 (0 updated)",
    }
    assert _cond(result, "Ready")["status"] == "False"
    assert _cond(result, "Progressing")["reason"] == "RollingOut"


def test_extra_pods_mean_scaling_down() -> None:
    big = body(decode=role(replicas=3))
    result = _compute(body(), _observed(_desired(big)))
    # ready counts every ready pod routers see, the surplus too (as a Deployment's does)
    assert result["decode"]["desired"] == 1 and result["decode"]["ready"] == 3
    assert result["decode"]["summary"] == "3/1"
    assert _cond(result, "Ready")["status"] == "True"
    assert _cond(result, "Progressing")["reason"] == "ScalingDown"
    assert "2 pod(s)" in _cond(result, "Progressing")["message"]


def test_terminating_pods_do_not_count() -> None:
    obj = body()
    pods = _observed(_desired(obj))
    pods[0]["metadata"]["deletionTimestamp"] = T0_TEXT
    assert _compute(obj, pods)["prefill"]["ready"] == 0


def test_failing_pods_degrade() -> None:
    obj = body()
    pods = _observed(_desired(obj), ready=False)
    pods[0]["status"]["containerStatuses"] = [
        {"name": "engine", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    ]
    pods[1]["status"]["conditions"].append(
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    )
    result = _compute(obj, pods)
    degraded = _cond(result, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "PodsFailing")
    assert "demo-prefill-0: CrashLoopBackOff" in degraded["message"]
    assert "demo-decode-0: Unschedulable" in degraded["message"]
    assert result["phase"] == "Degraded"


def test_invalid_spec() -> None:
    previous = _compute(body(), [])
    result = _compute(body(prefill=role("gpu")), [], previous=previous, generation=2)
    ready = _cond(result, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "spec.prefill.device: unknown device 'gpu'" in ready["message"]
    assert "nothing was created or changed" in ready["message"]
    assert _cond(result, "Degraded")["reason"] == "InvalidSpec"
    assert result["phase"] == "Invalid" and result["observedGeneration"] == 2
    assert result["prefill"] == previous["prefill"]  # last valid counts are kept


def test_unparseable_spec() -> None:
    obj = body()
    del obj["spec"]["engine"]
    assert "spec.engine: required" in _cond(_compute(obj, []), "Ready")["message"]


def test_last_transition_time_moves_only_on_a_flip() -> None:
    obj = body()
    first = _compute(obj, [])
    later = T0 + timedelta(minutes=5)
    # Same statuses, new message (pods exist but are not ready): times stay.
    second = _compute(obj, _observed(_desired(obj), ready=False), previous=first, now=later)
    for kind in status.CONDITION_TYPES:
        assert _cond(second, kind)["lastTransitionTime"] == T0_TEXT
    assert _cond(second, "Progressing")["reason"] != _cond(first, "Progressing")["reason"]
    # Ready flips to True and Progressing to False: only those two move.
    third = _compute(obj, _observed(_desired(obj)), previous=second, now=later)
    assert _cond(third, "Ready")["lastTransitionTime"] == "2026-01-01T12:05:00Z"
    assert _cond(third, "Progressing")["lastTransitionTime"] == "2026-01-01T12:05:00Z"
    assert _cond(third, "Degraded")["lastTransitionTime"] == T0_TEXT


def test_unchanged_world_gives_an_identical_status() -> None:
    obj = body()
    pods = _observed(_desired(obj))
    first = _compute(obj, pods)
    again = _compute(obj, pods, previous=first, now=T0 + timedelta(hours=1))
    assert again == first


def test_conditions_follow_the_conventions() -> None:
    results = [
        _compute(body(), []),
        _compute(body(prefill=role("gpu")), []),
        _compute(body(), _observed(_desired(body()))),
    ]
    for result in results:
        for c in result["conditions"]:
            assert c["reason"].isalnum() and c["reason"][0].isupper()
            assert c["message"][0].isupper() and c["message"].endswith(".")
            assert c["status"] in {"True", "False", "Unknown"}
            assert c["reason"] in status.REASONS[c["type"]]


def test_status_matches_the_crd_status_model() -> None:
    from disagg_operator.api import DeploymentStatus

    DeploymentStatus.model_validate(_compute(body(), []))


def _conditions(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in result["conditions"]]


def test_decode_without_prefill_replicas_is_not_ready() -> None:
    obj = body(prefill=role(replicas=0), decode=role(replicas=2))
    result = _compute(obj, _observed(_desired(obj)))
    assert result["prefill"]["summary"] == "0/0" and result["decode"]["summary"] == "2/2"
    assert _conditions(result) == [
        ("Ready", "False", "NoPrefill"),
        ("Progressing", "False", "RolloutComplete"),
        ("Degraded", "True", "NoPrefill"),
        ("TransferPathReady", "Unknown", "NoDecodePods"),
    ]
    message = _cond(result, "Ready")["message"]
    assert "decode pods cannot get KV until prefill has ready pods" in message
    assert "spec.prefill.replicas" in _cond(result, "Degraded")["message"]
    # The printer columns: Ready False, phase Degraded (not a plain Ready "prefill 0/0").
    assert result["phase"] == "Degraded"


def test_decode_with_every_prefill_pod_missing_is_not_ready() -> None:
    obj = body(prefill=role(replicas=2))
    decode_pods = [p for p in _desired(obj) if "-decode-" in p["metadata"]["name"]]
    result = _compute(obj, _observed(decode_pods))
    ready = _cond(result, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "NoPrefill")
    assert "prefill 0/2 ready" in ready["message"]
    # Missing pods are being created: progressing, not degraded.
    assert _cond(result, "Progressing")["reason"] == "RollingOut"
    assert _cond(result, "Degraded")["reason"] == "AsExpected"
    assert result["phase"] == "Progressing"


def test_failing_prefill_pods_stay_pods_failing() -> None:
    obj = body()
    pods = _observed(_desired(obj))
    pods[0]["status"] = {
        "containerStatuses": [{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
    }
    result = _compute(obj, pods)
    assert _cond(result, "Ready")["reason"] == "NoPrefill"
    assert _cond(result, "Degraded")["reason"] == "PodsFailing"


def test_everything_scaled_to_zero_is_ready() -> None:
    obj = body(prefill=role(replicas=0), decode=role(replicas=0))
    result = _compute(obj, [])
    assert _cond(result, "Ready")["reason"] == "AllReplicasReady"
    assert result["phase"] == "Ready"


def test_no_prefill_follows_the_conventions() -> None:
    obj = body(prefill=role(replicas=0))
    for c in _compute(obj, _observed(_desired(obj)))["conditions"]:
        assert c["message"][0].isupper() and c["message"].endswith(".")
        assert c["reason"] in status.REASONS[c["type"]]


def _refused(*names: str, message: str = "exceeded quota: q, limited: pods=1") -> list:
    from disagg_operator.controller.rules.refusals import Refusal

    return [Refusal("create", "Pod", n, 403, "Forbidden", message) for n in names]


def test_refused_writes_degrade_and_name_the_api_answer() -> None:
    obj = body()
    pods = _observed(_desired(obj))[:1]  # prefill exists and is ready, decode was refused
    dd, _ = validation.parse(obj)
    seen = Observed("demo", T0, pods, generation=1)
    result = status.compute(
        seen,
        spec=dd.spec if dd else None,
        problems=[],
        rollout=decide(dd, seen, rendering(dd, "uid-1")) if dd else None,
        refusals=_refused("demo-decode-0"),
    )
    ready, degraded = _cond(result, "Ready"), _cond(result, "Degraded")
    assert (ready["status"], ready["reason"]) == ("False", "ApiRefused")
    assert (degraded["status"], degraded["reason"]) == ("True", "ApiRefused")
    assert (
        "create Pod/demo-decode-0 refused: HTTP 403 Forbidden: exceeded quota: q, limited: pods=1"
        in degraded["message"]
    )
    assert _cond(result, "Progressing")["reason"] == "RollingOut"  # counts, as before
    assert result["phase"] == "Degraded"
    for c in result["conditions"]:
        assert c["reason"] in status.REASONS[c["type"]]
        assert c["message"][0].isupper() and c["message"].endswith(".")


def test_one_answer_for_many_writes_is_listed_once() -> None:
    obj = body(decode=role(replicas=2))
    dd, _ = validation.parse(obj)
    seen = Observed("demo", T0, [], generation=1)
    result = status.compute(
        seen,
        spec=dd.spec if dd else None,
        problems=[],
        rollout=decide(dd, seen, rendering(dd, "uid-1")) if dd else None,
        refusals=_refused("demo-decode-0", "demo-decode-1"),
    )
    message = _cond(result, "Degraded")["message"]
    assert "create Pod/demo-decode-0, create Pod/demo-decode-1 refused: HTTP 403" in message
    assert message.count("exceeded quota") == 1


def test_refusals_gone_return_degraded_to_as_expected() -> None:
    obj = body()
    dd, _ = validation.parse(obj)
    seen = Observed("demo", T0, _observed(_desired(obj)), generation=1)
    kwargs: dict[str, Any] = {
        "spec": dd.spec if dd else None,
        "problems": [],
        "rollout": decide(dd, seen, rendering(dd, "uid-1")) if dd else None,
    }
    refused = status.compute(seen, refusals=_refused("demo-decode-0"), **kwargs)
    healed = status.compute(replace(seen, previous=refused), **kwargs)
    assert _cond(healed, "Degraded")["reason"] == "AsExpected"
    assert _cond(healed, "Ready")["status"] == "True"
    assert healed["phase"] == "Ready"


def test_scale_fields_count_existing_decode_pods_and_name_their_selector() -> None:
    """What the scale subresource reads (.status.replicas, .status.selector): decode pods
    that exist, ready or not, and not those being deleted."""
    obj = body(decode=role(replicas=3))
    pods = _observed(_desired(obj), ready=False)
    pods[-1]["metadata"]["deletionTimestamp"] = T0_TEXT
    result = _compute(obj, pods)
    assert result["replicas"] == 2
    assert result["selector"] == "disagg.dev/deployment=demo,disagg.dev/role=decode"
    decode_pod = by_kind(render(obj, hmac_key="k"), "Pod")[-1]
    terms = dict(t.split("=") for t in result["selector"].split(","))
    assert terms.items() <= decode_pod["metadata"]["labels"].items()


def test_scale_fields_are_written_for_an_invalid_spec_too() -> None:
    obj = body(prefill=role(kvBufferDevice="cuda"))
    result = _compute(obj, [])
    assert _cond(result, "Ready")["reason"] == "InvalidSpec"
    assert (result["replicas"], result["selector"]) == (
        0,
        "disagg.dev/deployment=demo,disagg.dev/role=decode",
    )


def test_desired_prefill_follows_decode() -> None:
    obj = body(prefill={"device": "cpu", "perDecode": {"ratio": 0.5}}, decode=role(replicas=4))
    result = _compute(obj, _observed(_desired(obj)))
    assert result["prefill"]["desired"] == 2 and result["decode"]["desired"] == 4
    assert result["replicas"] == 4


AUTO: dict[str, Any] = {
    "targets": {"ttftMilliseconds": 1000, "itlMilliseconds": 50},
    "profile": {"configMap": "pools"},
    "prefill": {"max": 5},
    "decode": {"max": 8},
}
PLANNED = {
    "prefill": {"plannedReplicas": 3},
    "decode": {"plannedReplicas": 2},
    "autoscaling": {"reason": "ScaleUp", "message": "ScaleUp: prefill 3, decode 2"},
}


def test_the_planners_counts_are_kept_and_desired_follows_them() -> None:
    obj = body(autoscaling=AUTO, monitoring={"enabled": True})
    obj["status"] = PLANNED
    result = _compute(obj, [], previous=PLANNED)
    assert result["prefill"]["plannedReplicas"] == 3 and result["prefill"]["desired"] == 3
    assert result["decode"]["plannedReplicas"] == 2 and result["decode"]["desired"] == 2
    assert result["autoscaling"] == PLANNED["autoscaling"]
    from disagg_operator.api import DeploymentStatus

    DeploymentStatus.model_validate(result)


def test_the_planners_counts_go_with_spec_autoscaling() -> None:
    obj = body()
    obj["status"] = PLANNED
    result = _compute(obj, [], previous=PLANNED)
    assert "plannedReplicas" not in result["prefill"] and "autoscaling" not in result
    patch = status_patch(PLANNED, result)  # and the stored status loses them
    assert patch["autoscaling"] is None and patch["prefill"]["plannedReplicas"] is None
