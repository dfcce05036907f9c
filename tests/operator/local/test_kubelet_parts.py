"""The local kubelet's pure parts: probe timing as a kubelet runs it, the endpoints and
names a Service answers, and a pod's containers as processes at the pod's address."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_operator.engines.settings import DEFAULT
from disagg_operator.local.kubelet.rules import containers, endpoints, probes
from disagg_operator.local.rules.pods import UpError

# ---------------------------------------------------------------- probes


def _run(container: probes.Container, results: dict[str, list[bool]], until: float) -> list[Any]:
    """Drive ``container``'s probes on a fake clock (0.5 s ticks) with scripted results;
    the (time, ready, restart) history."""
    t, seen = 0.0, []
    while t <= until:
        for probe in container.due(t):
            script = results[probe.rule.kind]
            probe.record(script.pop(0) if script else True, t)
        seen.append((t, container.ready, container.must_restart()))
        t += 0.5
    return seen


def test_readiness_starts_failed_and_flips_after_its_thresholds() -> None:
    spec = {"readinessProbe": {"periodSeconds": 2, "failureThreshold": 2, "successThreshold": 2}}
    c = probes.Container.started(spec, now=0.0)
    assert not c.ready
    seen = _run(c, {"readinessProbe": [True, True, False, True, False, False]}, 12)
    ready = {t: r for t, r, _ in seen}
    assert ready[0.0] is False and ready[2.0] is True  # two successes, 2 s apart
    assert ready[4.0] is True and ready[6.0] is True  # one failure is not enough
    assert ready[10.0] is False  # two failures in a row


def test_a_startup_probe_holds_the_others_then_is_done() -> None:
    spec = {
        "startupProbe": {"periodSeconds": 1, "failureThreshold": 30},
        "readinessProbe": {"periodSeconds": 5},
        "livenessProbe": {"periodSeconds": 5, "initialDelaySeconds": 3},
    }
    c = probes.Container.started(spec, now=0.0)
    assert [p.rule.kind for p in c.due(0.0)] == ["startupProbe"]
    c.probes["startupProbe"].record(False, 0.0)
    assert not c.ready and c.must_restart() is None
    c.probes["startupProbe"].record(True, 1.0)
    assert sorted(p.rule.kind for p in c.due(3.0)) == ["livenessProbe", "readinessProbe"]
    assert not c.due(3.0)[0].done and c.probes["startupProbe"].done


def test_failed_liveness_or_startup_asks_for_a_restart() -> None:
    spec = {"livenessProbe": {"failureThreshold": 2, "periodSeconds": 1}}
    c = probes.Container.started(spec, now=0.0)
    assert c.ready  # no readiness probe: ready once started
    c.probes["livenessProbe"].record(False, 0.0)
    assert c.must_restart() is None
    c.probes["livenessProbe"].record(False, 1.0)
    assert c.must_restart() == "livenessProbe failed 2 times"
    start = probes.Container.started({"startupProbe": {"failureThreshold": 1}}, now=0.0)
    start.probes["startupProbe"].record(False, 0.0)
    assert start.must_restart() == "startupProbe failed 1 times"


def test_kubernetes_defaults_fill_in() -> None:
    rule = probes.Rule.of("readinessProbe", {"httpGet": {"path": "/", "port": 1}})
    assert (rule.delay, rule.period, rule.timeout, rule.successes, rule.failures) == (
        0.0, 10.0, 1.0, 1, 3,
    )  # fmt: skip


# ---------------------------------------------------------------- endpoints


def _pod(name: str, ip: str, *, ready: bool = True, ns: str = "a", going: bool = False) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": name, "labels": {"app": "x"}}
    if going:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status = {"podIP": ip, "conditions": [{"type": "Ready", "status": str(ready)}]}
    ports = [{"name": "http", "containerPort": 8000}]
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "ports": ports}]},
        "status": status,
    }


SERVICE = {
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
    got = endpoints.endpoint_slice(SERVICE, PODS)
    assert got["metadata"]["labels"]["kubernetes.io/service-name"] == "svc"
    assert got["ports"] == [{"name": "http", "port": 8000, "protocol": "TCP"}]  # named target
    states = {e["targetRef"]["name"]: e["conditions"] for e in got["endpoints"]}
    assert states == {  # another namespace's pod is not selected
        "p0": {"ready": True, "serving": True, "terminating": False},
        "p1": {"ready": False, "serving": False, "terminating": False},
        "p2": {"ready": False, "serving": True, "terminating": True},
    }


def test_names_answer_ready_pods_only_and_short_names_in_their_own_namespace() -> None:
    own = endpoints.names([SERVICE], PODS, "a")
    assert own["svc"] == own["svc.a"] == own["svc.a.svc.cluster.local"] == ["127.0.1.2"]
    other = endpoints.names([SERVICE], PODS, "b")
    assert "svc" not in other and other["svc.a.svc"] == ["127.0.1.2"]
    none = endpoints.names([SERVICE], [_pod("p1", "127.0.1.3", ready=False)], "a")
    assert none["svc"] == []  # NXDOMAIN: no ready pod
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
    spec = {"containers": [engine, canary], "volumes": [{"name": "hmac", "secret": {}}], **extra}
    return {"metadata": {"name": "demo-decode-0", "namespace": "a"}, "spec": spec}


def _plan(pod: dict[str, Any]) -> containers.PodRun:
    return containers.pod_run(
        pod, "127.0.1.7", DEFAULT.engines["reference"], secret_path="/s/hmac",
        folders={"hmac": "/tmp/v/hmac"}, hosts_file="/h/a",
        secrets=lambda name, key: "sekrit" if (name, key) == ("s", "k") else None,
        config_maps=lambda name, key: None,
    )  # fmt: skip


def test_a_pods_containers_run_at_its_address_with_their_rendered_ports() -> None:
    run = _plan(_reference_pod())
    engine, canary = run.processes
    assert engine.port == 8000 and engine.env["DISAGG_HTTP_HOST"] == "127.0.1.7"
    assert engine.env["DISAGG_HMAC_SECRET_PATH"] == "/s/hmac"
    assert (engine.env["POD"], engine.env["KEY"]) == ("demo-decode-0", "sekrit")
    assert "UCX_TLS" not in engine.env and run.notes == [
        "engine: dropped cluster-only UCX_TLS=tcp,self"
    ]
    assert engine.env["DISAGG_HOSTS_FILE"] == "/h/a"
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
    with pytest.raises(UpError, match="env X comes from"):
        _plan(pod)


def test_a_named_probe_port_is_the_containers() -> None:
    container = {"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}
    probe = {"httpGet": {"path": "/health", "port": "http"}}
    assert containers.probe_url("127.0.1.9", container, probe) == "http://127.0.1.9:8080/health"
    with pytest.raises(UpError, match="not named"):
        containers.probe_url("127.0.1.9", container, {"httpGet": {"port": "metrics"}})
