"""The local kubelet's pure parts: probe timing as a kubelet runs it, the endpoints and
names a Service answers, and a pod's containers as processes at the pod's address."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_operator.api import HMAC_KEY
from disagg_operator.render.objects import render
from disagg_tools.local.engines import local_engine
from disagg_tools.local.kubelet.rules import containers, endpoints, probes
from disagg_tools.local.kubelet.rules.containers import UpError
from disagg_tools.local.rules.env import data_of

# ---------------------------------------------------------------- probes on a fake clock


def _drive(probes_: probes.Probes, answers: dict[str, list[str]], until: float) -> list[Any]:
    """Drive a container's workers on a fake clock (0.5 s ticks) as the kubelet does: a
    pod sync when the container starts and after every change of a result, each due
    worker run with its next scripted answer (Success once the script ends); the (time,
    started, ready, kill) history."""
    t, running, history = 0.0, probes.Seen("c://1", running=True, started_at=0.0), []
    changed = True  # the container started
    while t <= until:
        while True:
            seen = replace(running, started=probes_.started(running))
            if changed:
                probes_.sync(seen, t)
            changed = False
            for kind, worker in probes_.workers.items():
                if worker.due(t):
                    worker.ticked(t)
                    if worker.prepare(seen, t):
                        script = answers.get(kind) or []
                        changed |= worker.record(script.pop(0) if script else probes.SUCCESS)
            if not changed:
                break
        seen = replace(running, started=probes_.started(running))
        history.append((t, seen.started, probes_.ready(seen), probes_.kill_reason(seen)))
        t += 0.5
    return history


S, F = probes.SUCCESS, probes.FAILURE


def test_readiness_starts_failed_and_flips_after_its_thresholds() -> None:
    spec = {"readinessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 2,
                               "failureThreshold": 2, "successThreshold": 2}}  # fmt: skip
    history = _drive(probes.Probes.of(spec, 0.0), {probes.READINESS: [S, S, F, S, F, F]}, 14)
    ready = {t: r for t, _, r, _ in history}
    # the container's start is a pod sync: readiness runs at once (0 s), then every 2 s;
    # two successes make it ready
    assert ready[1.5] is False and ready[2.0] is True
    assert ready[4.0] is True and ready[6.0] is True  # one failure is not enough
    assert ready[9.5] is True and ready[10.0] is False  # two failures in a row


def test_a_startup_probe_holds_the_others_and_then_readiness_runs_at_once() -> None:
    spec = {
        "startupProbe": {"exec": {"command": ["x"]}, "periodSeconds": 1, "failureThreshold": 30},
        "readinessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10},
        "livenessProbe": {"exec": {"command": ["x"]}, "periodSeconds": 10},
    }
    ps = probes.Probes.of(spec, 0.0)
    history = _drive(ps, {probes.STARTUP: [F, F, F], probes.READINESS: [S]}, 6)
    started = [t for t, s, _, _ in history if s]
    assert started[0] == 4.0  # startup runs at 1, 2, 3 (failures), 4 (success)
    ready = [t for t, _, r, _ in history if r]
    assert ready[0] == 4.0  # the pod sync after it ran readiness at once, not at 10 s
    assert ps.workers[probes.STARTUP].on_hold  # never run again for this container


def test_failed_liveness_or_startup_asks_for_a_kill() -> None:
    spec = {"livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 2,
                              "periodSeconds": 1}}  # fmt: skip
    history = _drive(probes.Probes.of(spec, 0.0), {probes.LIVENESS: [F, F]}, 3)
    assert {t: k for t, _, _, k in history}[1.5] is None
    assert {t: k for t, _, _, k in history}[2.0] == "failed liveness probe"
    assert history[0][2] is True  # no readiness probe: ready once started
    start = probes.Probes.of({"startupProbe": {"exec": {"command": ["x"]},
                                               "failureThreshold": 1}}, 0.0)  # fmt: skip
    assert _drive(start, {probes.STARTUP: [F]}, 10)[-1][3] == "failed startup probe"


# ---------------------------------------------------------------- endpoints


def _pod(name: str, ip: str, *, ready: bool = True, ns: str = "a", going: bool = False) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": name, "labels": {"app": "x"}}
    if going:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status = {
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": str(ready)}],
    }
    ports = [{"name": "http", "containerPort": 8000}]
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "ports": ports}]},
        "status": status,
    }


SERVICE: dict[str, Any] = {
    "metadata": {"name": "svc", "namespace": "a"},
    "spec": {
        "selector": {"app": "x"},
        "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
    },
}
PODS = [
    _pod("p0", "127.0.1.2"),
    _pod("p1", "127.0.1.3", ready=False),
    _pod("p2", "127.0.1.4", going=True),
    _pod("p3", "127.0.1.5", ns="b"),
]


def test_an_endpoint_slice_says_ready_serving_and_terminating_as_the_controller_does() -> None:
    (got,) = endpoints.endpoint_slices(SERVICE, PODS)
    assert got["metadata"]["labels"]["kubernetes.io/service-name"] == "svc"
    assert got["ports"] == [{"name": "http", "port": 8000, "protocol": "TCP"}]  # named target
    states = {e["targetRef"]["name"]: e["conditions"] for e in got["endpoints"]}
    assert states == {  # another namespace's pod is not selected
        "p0": {"ready": True, "serving": True, "terminating": False},
        "p1": {"ready": False, "serving": False, "terminating": False},
        "p2": {"ready": False, "serving": True, "terminating": True},
    }


def test_a_named_target_port_a_pod_lacks_is_left_out_not_guessed() -> None:
    lacking = _pod("p9", "127.0.1.9")
    lacking["spec"]["containers"][0]["ports"] = []
    slices = endpoints.endpoint_slices(SERVICE, [PODS[0], lacking])
    assert sorted(s["ports"] for s in slices) == [[], [{"name": "http", "port": 8000,
                                                        "protocol": "TCP"}]]  # fmt: skip


def test_names_answer_ready_endpoints_only_and_short_names_in_their_own_namespace() -> None:
    own = endpoints.names([SERVICE], PODS, "a")
    assert own["svc"] == own["svc.a"] == own["svc.a.svc.cluster.local"] == ["127.0.1.2"]
    other = endpoints.names([SERVICE], PODS, "b")
    assert "svc" not in other and other["svc.a.svc"] == ["127.0.1.2"]
    none = endpoints.names([SERVICE], [_pod("p1", "127.0.1.3", ready=False)], "a")
    assert none["svc"] == []  # NXDOMAIN: no ready endpoint
    publish = {**SERVICE, "spec": {**SERVICE["spec"], "publishNotReadyAddresses": True}}
    assert endpoints.names([publish], PODS[:2], "a")["svc"] == ["127.0.1.2", "127.0.1.3"]
    assert endpoints.hosts_text({"svc": ["1.2.3.4"], "x": []}).splitlines()[1:] == [
        "svc 1.2.3.4",
        "x",
    ]


# ---------------------------------------------------------------- containers


def _reference_pod(**extra: Any) -> dict[str, Any]:
    engine = {
        "name": "engine",
        "command": ["disagg", "worker", "serve"],
        "env": [
            {"name": "DISAGG_HTTP_PORT", "value": "8000"},
            {"name": "UCX_TLS", "value": "tcp,self"},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ],
        "volumeMounts": [{"name": "hmac", "mountPath": "/etc/disagg/hmac"}],
        "lifecycle": {"preStop": {"exec": {"command": ["disagg", "worker", "drain"]}}},
    }
    canary = {
        "name": "transfer-canary",
        "command": ["disagg", "worker", "canary"],
        "args": ["--prefill", "http://demo-p-x:8000", "--decode", "http://127.0.0.1:8000"],
    }
    volumes = [{"name": "hmac", "secret": {"secretName": "keys"}}]
    spec = {"containers": [engine, canary], "volumes": volumes, **extra}
    return {"metadata": {"name": "demo-decode-0", "namespace": "a"}, "spec": spec}


SECRET = {"kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "sekrit"}}
KEYS = {"kind": "Secret", "metadata": {"name": "keys"}, "stringData": {HMAC_KEY: "x"}}


def _plan(pod: dict[str, Any]) -> containers.PodRun:
    place = containers.Place("127.0.1.7", "/tmp/v", "/tmp/m", hosts_file="/h/a")
    return containers.pod_run(pod, place, local_engine("reference"), data_of([SECRET, KEYS]))


def test_a_pods_containers_run_at_its_address_with_their_rendered_ports() -> None:
    run = _plan(_reference_pod())
    engine, canary = run.processes
    assert engine.port == 8000 and engine.env["DISAGG_HTTP_HOST"] == "127.0.1.7"
    assert engine.env["DISAGG_HMAC_SECRET_PATH"] == f"/tmp/v/hmac/{HMAC_KEY}"  # the Secret's file
    assert (engine.env["POD"], engine.env["KEY"]) == ("demo-decode-0", "sekrit")
    assert "UCX_TLS" not in engine.env and run.dropped == ["UCX_TLS=tcp,self"]
    assert engine.env["LOCAL_KUBELET_HOSTS_FILE"] == "/h/a"
    assert engine.env["PYTHONPATH"].split(os.pathsep)[0] == containers.DNS_SHIM
    assert engine.pre_stop[-2:] == ["worker", "drain"]
    # the pod's loopback is its address; a listening command gets --host
    assert "http://127.0.1.7:8000" in canary.argv and "127.0.0.1" not in " ".join(canary.argv)
    assert canary.argv[canary.argv.index("--host") + 1] == "127.0.1.7"


def test_what_cannot_run_here_is_named() -> None:
    pod = _reference_pod()
    pod["spec"]["containers"][1]["command"] = ["llm-d-routing-sidecar"]
    with pytest.raises(UpError, match="container transfer-canary: runs 'llm-d-routing-sidecar"):
        _plan(pod)
    pod = _reference_pod()
    pod["spec"]["containers"][0]["volumeMounts"].append({"name": "models", "mountPath": "/m"})
    with pytest.raises(UpError, match="mounts volume 'models'"):
        _plan(pod)
    pod = _reference_pod()
    pod["spec"]["containers"][0]["env"].append(
        {"name": "X", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}
    )
    with pytest.raises(UpError, match=r"env X: resourceFieldRef limits\.cpu is not set"):
        _plan(pod)


def test_a_named_probe_port_is_the_containers() -> None:
    container = {"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}
    probe = {"httpGet": {"path": "/health", "port": "http"}}
    assert containers.probe_url("127.0.1.9", container, probe) == "http://127.0.1.9:8080/health"
    with pytest.raises(UpError, match="not named"):
        containers.probe_url("127.0.1.9", container, {"httpGet": {"port": "metrics"}})


def test_dollar_references_are_expanded_as_the_kubelet_expands_them() -> None:
    """env values from the variables before them, command and args from the whole env
    (makeEnvironmentVariables, ExpandContainerCommandAndArgs)."""
    pod = _reference_pod()
    engine = pod["spec"]["containers"][0]
    engine["env"] += [
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "AT", "value": "$(IP):$(DISAGG_HTTP_PORT)-$(LATER)"},
        {"name": "LATER", "value": "x"},
    ]
    engine["args"] = ["--tag", "$(POD)@$(IP)", "--keep", "$$(IP)"]
    run = _plan(pod)
    env, argv = run.processes[0].env, run.processes[0].argv
    assert env["AT"] == "127.0.1.7:8000-$(LATER)"  # only what comes before it
    assert argv[-4:] == ["--tag", "demo-decode-0@127.0.1.7", "--keep", "$(IP)"]


def test_env_from_is_read_not_ignored() -> None:
    """A ConfigMap the engine's envFrom names (spec.<role>.podTemplate can add one) reaches
    the process, under its prefix, below the container's own env."""
    pod = _reference_pod()
    pod["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": "s"}, "prefix": "FROM_"}]
    assert _plan(pod).processes[0].env["FROM_k"] == "sekrit"
    pod["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "none"}}]
    with pytest.raises(UpError, match="ConfigMap 'none' does not exist"):
        _plan(pod)


def test_a_rendered_vllm_pod_runs_whole_on_the_kubelet_its_pre_stop_a_plain_command() -> None:
    """A vLLM pod's preStop is ``sleep`` (the endpoints' grace), not a ``disagg`` command:
    it runs as it is, where the kubelet once refused every vLLM pod for it."""
    root = Path(__file__).resolve().parents[3]
    manifest = yaml.safe_load((root / "examples" / "vllm-cpu.yaml").read_text())
    manifest["metadata"].update(namespace="default", uid="u")
    objects = render(manifest, hmac_key="k")
    (pod,) = [o for o in objects if o["metadata"]["name"] == "vllm-cpu-decode-0"]
    place = containers.Place("127.0.1.7", "/tmp/v", "/tmp/m", {"models": "/data/models"})
    run = containers.pod_run(pod, place, local_engine("vllm"), data_of(objects))
    engine = run.engine
    assert engine is not None and engine.pre_stop[0] == "sleep"
    hook = pod["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
    assert engine.pre_stop == hook
    assert engine.argv[engine.argv.index("--host") + 1] == "127.0.1.7"
    assert [p.container for p in run.processes] == [c["name"] for c in pod["spec"]["containers"]]
