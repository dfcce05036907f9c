"""A pod's containers through their lives, and the status the kubelet writes of them, as
Kubernetes 1.36 decides it.

- whether an exited container starts again: ``pkg/api/v1/pod/util.go``
  ``ContainerShouldRestart`` (the container's ``restartPolicyRules`` and
  ``restartPolicy``, beta and on since 1.35 with ``ContainerRestartRules``, else the pod's
  ``restartPolicy``); a container killed for a failed liveness or startup probe starts
  again unless its policy is Never (``computePodActions``); nothing starts again once the
  pod is being deleted (``ShouldContainerBeRestarted``);
- the pod's phase: ``kubelet_pods.go`` ``getPhase`` (a pod deleted and stopped is terminal:
  Succeeded when every container exited 0, else Failed);
- its conditions: ``pkg/kubelet/status/generate.go`` (``ContainersReady`` and ``Ready``
  with the reason and message the kubelet gives; ``Ready`` also waits for the pod's
  ``readinessGates``), a condition's ``lastTransitionTime`` moving only when its status
  flips (the status manager keeps it otherwise).

Dicts in, dicts out; times come in as RFC 3339 strings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

ALWAYS, ON_FAILURE, NEVER = "Always", "OnFailure", "Never"
CRASH_LOOP = "CrashLoopBackOff"


def should_restart(container: Mapping[str, Any], pod_spec: Mapping[str, Any], code: int) -> bool:
    """Whether a container that exited with ``code`` is started again."""
    policy = container.get("restartPolicy")
    if policy is not None:
        for rule in container.get("restartPolicyRules") or []:
            codes = rule.get("exitCodes")
            if codes is None:
                continue
            matched = code in (codes.get("values") or [])
            op = codes.get("operator")
            if (op == "In" and matched) or (op == "NotIn" and not matched):
                if rule.get("action") == "Restart":
                    return True
                break  # the first matching rule decides; another action falls through
        if policy in (ALWAYS, ON_FAILURE, NEVER):
            return policy == ALWAYS or (policy == ON_FAILURE and code != 0)
    pod = pod_spec.get("restartPolicy", ALWAYS)
    return pod == ALWAYS or (pod == ON_FAILURE and code != 0) or pod not in (ON_FAILURE, NEVER)


def restart_after_kill(container: Mapping[str, Any], pod_spec: Mapping[str, Any]) -> bool:
    """Whether a container killed for a failed liveness or startup probe starts again."""
    policy = container.get("restartPolicy") or pod_spec.get("restartPolicy", ALWAYS)
    return bool(policy != NEVER)


def exit_code(returncode: int) -> int:
    """A process's return code as a container's exit code (a signal n is 128 + n)."""
    return 128 - returncode if returncode < 0 else returncode


def terminated(code: int, started_at: str, finished_at: str) -> dict[str, Any]:
    """A ``state.terminated`` (the runtime's reason: Completed for 0, else Error)."""
    reason = "Completed" if code == 0 else "Error"
    return {"exitCode": code, "reason": reason, "startedAt": started_at, "finishedAt": finished_at}


def go_duration(seconds: float) -> str:
    """Whole seconds as Go prints a time.Duration (``10s``, ``1m20s``, ``5m0s``)."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    minutes, s = divmod(s, 60)
    return f"{minutes // 60}h{minutes % 60}m{s}s" if minutes >= 60 else f"{minutes}m{s}s"


def back_off_message(delay_s: float, container: str, pod: Mapping[str, Any]) -> str:
    """The CrashLoopBackOff waiting message (``doBackOff``, ``format.Pod``)."""
    meta = pod["metadata"]
    who = f"{meta['name']}_{meta.get('namespace', 'default')}({meta.get('uid', '')})"
    return f"back-off {go_duration(delay_s)} restarting failed container={container} pod={who}"


def phase(pod_spec: Mapping[str, Any], statuses: Sequence[Mapping[str, Any]], done: bool) -> str:
    """``getPhase`` over the regular containers' statuses; ``done``: the pod is terminal
    (deleted and every container stopped)."""
    by_name = {s["name"]: s for s in statuses}
    unknown = running = waiting = stopped = succeeded = 0
    for container in pod_spec.get("containers", []):
        status = by_name.get(container["name"])
        state = (status or {}).get("state") or {}
        if "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            succeeded += state["terminated"].get("exitCode") == 0
        elif "waiting" in state:
            ran = ((status or {}).get("lastState") or {}).get("terminated")
            stopped, waiting = stopped + bool(ran), waiting + (not ran)
        else:
            unknown += 1  # no status, or one with no state
    if waiting:
        return "Pending"
    if running and not unknown:
        return "Running"
    if running or not stopped or unknown:
        return "Pending"
    if done:
        return "Succeeded" if stopped == succeeded else "Failed"
    policy = pod_spec.get("restartPolicy", ALWAYS)
    if policy == ALWAYS:
        return "Running"  # every container on its way to a restart
    if stopped == succeeded:
        return "Succeeded"
    return "Failed" if policy == NEVER else "Running"


def containers_ready(
    pod_spec: Mapping[str, Any], statuses: Sequence[Mapping[str, Any]], pod_phase: str
) -> tuple[str, str, str]:
    """``GenerateContainersReadyCondition``: (status, reason, message)."""
    by_name = {s["name"]: s for s in statuses}
    names = [c["name"] for c in pod_spec.get("containers", [])]
    unknown = [n for n in names if n not in by_name]
    unready = [n for n in names if n in by_name and not by_name[n].get("ready")]
    if pod_phase == "Succeeded" and not unknown:
        return "False", "PodCompleted", ""
    if pod_phase == "Failed":
        return "False", "PodFailed", ""
    said = [f"containers with {what} status: {_go_list(found)}"
            for what, found in (("unknown", unknown), ("unready", unready)) if found]  # fmt: skip
    return ("False", "ContainersNotReady", ", ".join(said)) if said else ("True", "", "")


def pod_ready(
    pod: Mapping[str, Any], statuses: Sequence[Mapping[str, Any]], pod_phase: str
) -> tuple[str, str, str]:
    """``GeneratePodReadyCondition``: ContainersReady's, then every readiness gate's
    condition (kept in the API's status by whoever owns it) must be True."""
    containers = containers_ready(pod["spec"], statuses, pod_phase)
    if containers[0] != "True":
        return containers
    have = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}
    said = []
    for gate in pod["spec"].get("readinessGates") or []:
        kind = gate["conditionType"]
        if kind not in have:
            said.append(
                f"corresponding condition of pod readiness gate {_go_quote(kind)} does not exist."
            )
        elif have[kind].get("status") != "True":
            said.append(
                f'the status of pod readiness gate {_go_quote(kind)} is not "True", '
                f"but {have[kind].get('status')}"
            )
    return ("False", "ReadinessGatesNotReady", ", ".join(said)) if said else ("True", "", "")


def conditions(
    pod: Mapping[str, Any], statuses: Sequence[Mapping[str, Any]], pod_phase: str, now: str
) -> list[dict[str, Any]]:
    """The pod's conditions after this status: the kubelet's own recomputed (no init
    containers, a sandbox always there, no scheduler here: Initialized,
    PodReadyToStartContainers and PodScheduled True), any other (a readiness gate's, a
    disruption's) kept as the API has it."""
    old = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}
    mine = {  # in the order generateAPIPodStatus appends them
        "PodReadyToStartContainers": ("True", "", ""),
        "Initialized": ("True", "", ""),
        "Ready": pod_ready(pod, statuses, pod_phase),
        "ContainersReady": containers_ready(pod["spec"], statuses, pod_phase),
        "PodScheduled": ("True", "", ""),
    }
    out = [c for kind, c in old.items() if kind not in mine]
    for kind, (status, reason, message) in mine.items():
        condition: dict[str, Any] = {"type": kind, "status": status}
        condition.update({k: v for k, v in (("reason", reason), ("message", message)) if v})
        before = old.get(kind) or {}
        kept = before.get("status") == status
        condition["lastTransitionTime"] = before.get("lastTransitionTime", now) if kept else now
        out.append(condition)
    return out


def _go_list(names: Sequence[str]) -> str:
    return "[" + " ".join(names) + "]"  # Go's %s of a []string


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'  # Go's %q
