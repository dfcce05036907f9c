"""A pod's containers through their lives against the kubelet's own tests: the cases of
``pkg/kubelet/kubelet_pods_test.go`` (``getPhase``, with ``podIsTerminal``) and
``pkg/api/v1/pod/util_test.go`` (``ContainerShouldRestart``) of kubernetes/kubernetes as
they stand in the 1.35 and 1.36 sources, restated as data, each named by its upstream
function, run against :mod:`disagg_tools.local.kubelet.rules.lifecycle`; then the
conditions of ``pkg/kubelet/status/generate.go`` and the back-off message of
``doBackOff``, checked here from their source. Init containers are left out: the local
kubelet refuses a pod that has them."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_tools.local.kubelet.rules import lifecycle

UPSTREAM = "kubernetes/kubernetes pkg/kubelet/kubelet_pods_test.go"


def _status(name: str, kind: str) -> dict[str, Any]:
    """The helpers of kubelet_pods_test.go: runningState, stoppedState, succeededState,
    failedState (exit -1), waitingState, waitingStateWithLastTermination."""
    states: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        "running": ({"running": {}}, {}),
        "stopped": ({"terminated": {}}, {}),
        "succeeded": ({"terminated": {"exitCode": 0}}, {}),
        "failed": ({"terminated": {"exitCode": -1}}, {}),
        "waiting": ({"waiting": {}}, {}),
        "waiting-after-exit": ({"waiting": {}}, {"terminated": {"exitCode": 0}}),
    }
    state, last = states[kind]
    return {"name": name, "state": state, "lastState": last}


# (test function, restart policy, A's state, B's state (None: no status), terminal, phase)
PHASES = [
    ("TestPodPhaseWithRestartAlways", "Always", None, None, False, "Pending"),
    ("TestPodPhaseWithRestartAlways", "Always", "running", "running", False, "Running"),
    ("TestPodPhaseWithRestartAlways", "Always", "stopped", "stopped", False, "Running"),
    ("TestPodPhaseWithRestartAlways", "Always", "succeeded", "succeeded", True, "Succeeded"),
    ("TestPodPhaseWithRestartAlways", "Always", "succeeded", "failed", True, "Failed"),
    ("TestPodPhaseWithRestartAlways", "Always", "running", "stopped", False, "Running"),
    ("TestPodPhaseWithRestartAlways", "Always", "running", None, False, "Pending"),
    ("TestPodPhaseWithRestartAlways", "Always", "running", "waiting", False, "Pending"),
    ("TestPodPhaseWithRestartAlways", "Always", "running", "waiting-after-exit", False,
     "Running"),
    ("TestPodPhaseWithRestartNever", "Never", None, None, False, "Pending"),
    ("TestPodPhaseWithRestartNever", "Never", "running", "running", False, "Running"),
    ("TestPodPhaseWithRestartNever", "Never", "succeeded", "succeeded", False, "Succeeded"),
    ("TestPodPhaseWithRestartNever", "Never", "failed", "failed", False, "Failed"),
    ("TestPodPhaseWithRestartNever", "Never", "running", "succeeded", False, "Running"),
    ("TestPodPhaseWithRestartNever", "Never", "running", None, False, "Pending"),
    ("TestPodPhaseWithRestartNever", "Never", "running", "waiting", False, "Pending"),
    ("TestPodPhaseWithRestartOnFailure", "OnFailure", None, None, False, "Pending"),
    ("TestPodPhaseWithRestartOnFailure", "OnFailure", "running", "running", False, "Running"),
    ("TestPodPhaseWithRestartOnFailure", "OnFailure", "succeeded", "succeeded", False,
     "Succeeded"),
    ("TestPodPhaseWithRestartOnFailure", "OnFailure", "failed", "failed", False, "Running"),
    ("TestPodPhaseWithRestartOnFailure", "OnFailure", "running", "succeeded", False, "Running"),
    ("TestPodPhaseWithRestartOnFailure", "OnFailure", "running", None, False, "Pending"),
    ("TestPodPhaseWithRestartOnFailure", "OnFailure", "running", "waiting", False, "Pending"),
    ("TestPodPhaseWithRestartOnFailure", "OnFailure", "running", "waiting-after-exit", False,
     "Running"),
]  # fmt: skip


@pytest.mark.parametrize(("test", "policy", "a", "b", "terminal", "want"), PHASES)
def test_pod_phase(
    test: str, policy: str, a: str | None, b: str | None, terminal: bool, want: str
) -> None:
    spec = {"containers": [{"name": "containerA"}, {"name": "containerB"}]}
    spec["restartPolicy"] = policy  # type: ignore[assignment]
    statuses = [_status(n, s) for n, s in (("containerA", a), ("containerB", b)) if s]
    assert lifecycle.phase(spec, statuses, done=terminal) == want, test


def _rule(action: str, op: str, values: list[int]) -> dict[str, Any]:
    return {"action": action, "exitCodes": {"operator": op, "values": values}}


# TestContainerHasRestartablePolicy (util_test.go): (name, container, pod policy, exit, restart)
SHOULD_RESTART = [
    ("Rule: 'In' operator matches with 'Restart' action",
     {"restartPolicy": "Never", "restartPolicyRules": [_rule("Restart", "In", [42, 50, 60])]},
     None, 42, True),
    ("Rule: 'NotIn' operator matches with 'Restart' action",
     {"restartPolicy": "Never", "restartPolicyRules": [_rule("Restart", "NotIn", [0, 1, 2])]},
     None, 99, True),
    ("Rule: 'In' operator does not match, should fall back to container policy",
     {"restartPolicy": "Never", "restartPolicyRules": [_rule("Restart", "In", [10, 20])]},
     None, 30, False),
    ("Rule: 'NotIn' operator does not match, should fall back to container policy",
     {"restartPolicy": "Never", "restartPolicyRules": [_rule("Restart", "NotIn", [10, 20])]},
     None, 10, False),
    ("Container Policy: 'Always'", {"restartPolicy": "Always"}, "Never", 0, True),
    ("Container Policy: 'OnFailure' with exit code 0", {"restartPolicy": "OnFailure"}, "Never",
     0, False),
    ("Container Policy: 'OnFailure' with non-zero exit code", {"restartPolicy": "OnFailure"},
     "Never", 1, True),
    ("Container Policy: 'Never' should return false", {"restartPolicy": "Never"}, "Always", 1,
     False),
    ("Pod Policy: Fallback to pod 'Always'", {}, "Always", 0, True),
    ("Pod Policy: Fallback to pod 'OnFailure' with non-zero exit code", {}, "OnFailure", 1,
     True),
    ("Pod Policy: Fallback to pod 'Never'", {}, "Never", 1, False),
    ("Pod Policy: Fallback with no policies specified should return true", {}, None, 0, True),
]  # fmt: skip


@pytest.mark.parametrize(("name", "container", "pod", "code", "want"), SHOULD_RESTART)
def test_container_should_restart(
    name: str, container: dict[str, Any], pod: str | None, code: int, want: bool
) -> None:
    spec = {} if pod is None else {"restartPolicy": pod}
    assert lifecycle.should_restart(container, spec, code) == want, name


# ---------------------------------------------------------------- checked from the source


def test_a_probe_kill_restarts_unless_the_policy_is_never() -> None:
    """computePodActions: the pod's policy is not Never, the container's overrides it."""
    assert lifecycle.restart_after_kill({}, {"restartPolicy": "OnFailure"})
    assert not lifecycle.restart_after_kill({}, {"restartPolicy": "Never"})
    assert lifecycle.restart_after_kill({"restartPolicy": "Always"}, {"restartPolicy": "Never"})
    assert not lifecycle.restart_after_kill({"restartPolicy": "Never"}, {})


def _pod(*ready: bool, gates: list[str] = (), conditions: list[Any] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    names = ["a", "b"][: len(ready)]
    spec: dict[str, Any] = {"containers": [{"name": n} for n in names]}
    spec["readinessGates"] = [{"conditionType": g} for g in gates]
    return {"spec": spec, "status": {"conditions": list(conditions)}}


def _statuses(*ready: bool) -> list[dict[str, Any]]:
    return [{"name": n, "ready": r} for n, r in zip("ab", ready, strict=False)]


def test_containers_ready_and_ready_say_which_container_is_unready() -> None:
    pod = _pod(True, False)
    got = {c["type"]: c for c in lifecycle.conditions(pod, _statuses(True, False), "Running", "T")}
    want = ("False", "ContainersNotReady", "containers with unready status: [b]")
    assert (got["Ready"]["status"], got["Ready"]["reason"], got["Ready"]["message"]) == want
    assert got["ContainersReady"]["message"] == want[2]
    unknown = lifecycle.containers_ready(pod["spec"], _statuses(True), "Running")
    assert unknown == ("False", "ContainersNotReady", "containers with unknown status: [b]")
    assert lifecycle.containers_ready(pod["spec"], _statuses(True, True), "Failed") == (
        "False", "PodFailed", "",
    )  # fmt: skip


def test_ready_waits_for_every_readiness_gate() -> None:
    missing = _pod(True, gates=["g"])
    assert lifecycle.pod_ready(missing, _statuses(True), "Running") == (
        "False", "ReadinessGatesNotReady",
        'corresponding condition of pod readiness gate "g" does not exist.',
    )  # fmt: skip
    off = _pod(True, gates=["g"], conditions=[{"type": "g", "status": "False"}])
    assert lifecycle.pod_ready(off, _statuses(True), "Running")[2] == (
        'the status of pod readiness gate "g" is not "True", but False'
    )
    on = _pod(True, gates=["g"], conditions=[{"type": "g", "status": "True"}])
    assert lifecycle.pod_ready(on, _statuses(True), "Running") == ("True", "", "")


def test_a_condition_keeps_its_transition_time_until_it_flips_and_others_are_kept() -> None:
    before = [
        {"type": "Ready", "status": "True", "lastTransitionTime": "T0"},
        {"type": "g", "status": "True", "lastTransitionTime": "T0"},
    ]
    pod = _pod(True, gates=["g"], conditions=before)
    kept = {c["type"]: c for c in lifecycle.conditions(pod, _statuses(True), "Running", "T1")}
    assert kept["Ready"]["lastTransitionTime"] == "T0" and kept["g"] == before[1]
    flipped = lifecycle.conditions(pod, _statuses(False), "Running", "T1")
    assert {c["type"]: c["lastTransitionTime"] for c in flipped}["Ready"] == "T1"
    order = [c["type"] for c in flipped]
    assert order == ["g", "PodReadyToStartContainers", "Initialized", "Ready",
                     "ContainersReady", "PodScheduled"]  # fmt: skip


def test_the_back_off_message_is_the_kubelets() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}}
    assert lifecycle.back_off_message(10, "engine", pod) == (
        "back-off 10s restarting failed container=engine pod=p_ns(u-1)"
    )
    assert [lifecycle.go_duration(s) for s in (20, 80, 160, 300, 3600)] == [
        "20s", "1m20s", "2m40s", "5m0s", "1h0m0s",
    ]  # fmt: skip


def test_exit_codes_and_the_runtimes_reason() -> None:
    assert [lifecycle.exit_code(c) for c in (0, 1, -9, -15)] == [0, 1, 137, 143]
    assert lifecycle.terminated(0, "a", "b")["reason"] == "Completed"
    assert lifecycle.terminated(137, "a", "b") == {
        "exitCode": 137, "reason": "Error", "startedAt": "a", "finishedAt": "b",
    }  # fmt: skip
