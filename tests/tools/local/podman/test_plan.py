"""Rendered pods → pods of containers: what a kubelet fills in is filled in the same way
(field refs, $(VAR), volumes from the rendered objects, Services as the pods they select),
what the pod declares reaches podman unchanged (command, security context, limits,
probes), and what cannot run here is refused with the fix."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from disagg_operator.derive.resources import parse_quantity
from disagg_operator.render.objects import render
from disagg_tools.local.rules.podman import (
    RUN_LABEL,
    SHARE,
    PlanError,
    PodPlan,
    images_of,
    plan_pods,
    pod_create_argv,
    pods_of,
    run_argv,
)

ROOT = Path(__file__).resolve().parents[4]
QUICKSTART = ROOT / "examples" / "quickstart-cpu.yaml"
VLLM_CPU = ROOT / "examples" / "vllm-cpu.yaml"
IPS = ["10.89.0.10", "10.89.0.11", "10.89.0.12"]
NODE_IP = "10.89.0.1"


def _rendered(path: Path = QUICKSTART) -> list[dict[str, Any]]:
    body = yaml.safe_load(path.read_text())
    body["metadata"].update(namespace="team-a", uid="u-1")
    return render(body, hmac_key="k" * 32)


def _plan(objects: list[dict[str, Any]], **kw: Any) -> list[PodPlan]:
    images = {image: f"local/{image.rsplit('/', 1)[-1]}" for image in images_of(objects)}
    return plan_pods(objects, ips=IPS, host_ip=NODE_IP, images=images, claims={}, **kw)


def _flag(argv: list[str], flag: str) -> list[str]:
    return [argv[n + 1] for n, a in enumerate(argv) if a == flag]


def _pod(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == name)


def test_each_container_keeps_its_rendered_command_env_and_security() -> None:
    objects = _rendered()
    plans = _plan(objects)
    assert [(p.name, p.role, p.ip) for p in plans] == [
        ("quickstart-prefill-0", "prefill", IPS[0]),
        ("quickstart-decode-0", "decode", IPS[1]),
    ]
    for plan in plans:
        rendered = _pod(objects, plan.name)["spec"]
        assert [c.name for c in plan.containers] == [c["name"] for c in rendered["containers"]]
        for c, r in zip(plan.containers, rendered["containers"], strict=True):
            assert c.command == tuple(r["command"])
            assert c.args == (tuple(r["args"]) if "args" in r else None)
            for item in r.get("env", []):
                if "value" in item:
                    assert c.env[item["name"]] == item["value"]  # UCX_TLS included: not dropped
            sc = {**rendered["securityContext"], **r["securityContext"]}
            assert c.user == f"{sc['runAsUser']}:{sc['runAsGroup']}"
            assert c.run_as_non_root and c.read_only == sc["readOnlyRootFilesystem"] is True
            assert c.cap_drop == ("ALL",) and c.cap_add == () and c.no_new_privileges
            assert c.memory_bytes == parse_quantity(r["resources"]["limits"]["memory"])
        assert plan.grace_s == rendered["terminationGracePeriodSeconds"]
        engine = plan.engine_container
        # downward API as the kubelet fills it: this pod's name and its IP on the network
        assert engine.env["DISAGG_ENGINE_ID"] == plan.name
        assert engine.env["DISAGG_ADVERTISE_HOST"] == plan.ip
        assert engine.env["UCX_TLS"] == "tcp,self"
        assert plan.url == f"http://{plan.ip}:8000"


def test_the_podman_arguments_carry_the_security_context_limits_and_mounts() -> None:
    plan = _plan(_rendered())[1]
    engine = plan.engine_container
    sources = {v.name: f"/run/vol/{v.name}" for v in plan.volumes}
    argv = run_argv(plan, engine, sources, "r1")
    assert argv[:6] == ["run", "--replace", "--pod", plan.name, "--name", f"{plan.name}-engine"]
    assert _flag(argv, "--user") == ["65532:65532"]
    assert "--read-only" in argv and "--read-only-tmpfs=false" in argv  # no tmpfs podman adds
    assert _flag(argv, "--cap-drop") == ["ALL"] and "--cap-add" not in argv
    assert _flag(argv, "--security-opt") == ["no-new-privileges"]
    assert _flag(argv, "--memory") == [str(2**30)]
    assert _flag(argv, "--cpu-shares") == ["512"]  # requests.cpu 500m
    assert "--cpus" not in argv  # no CPU limit rendered
    assert json.loads(_flag(argv, "--entrypoint")[0]) == ["disagg", "worker", "serve"]
    assert argv[-1] == engine.image  # a command without args: nothing after the image
    env = dict(e.split("=", 1) for e in _flag(argv, "--env"))
    assert env == dict(engine.env)
    mounts = _flag(argv, "--mount")
    assert "type=bind,source=/run/vol/handshake,destination=/etc/disagg/handshake,ro=true" in (
        mounts
    )
    assert "type=bind,source=/run/vol/tmp,destination=/tmp" in mounts  # the writable /tmp
    assert _flag(argv, "--label") == [f"{RUN_LABEL}=r1"]


def test_secret_volumes_hold_the_rendered_secret_with_its_mode() -> None:
    objects = _rendered()
    secret = next(o for o in objects if o["kind"] == "Secret")
    for plan in _plan(objects):
        (handshake,) = [v for v in plan.volumes if v.name == "handshake"]
        assert handshake.kind == "folder" and handshake.read_only
        data, mode = handshake.files["hmac"]
        assert data == base64.b64decode(secret["data"]["hmac"]) and mode == 0o444
        (tmp,) = [v for v in plan.volumes if v.name == "tmp"]
        assert tmp.kind == "folder" and tmp.mode == 0o777 and not tmp.read_only


def test_services_resolve_to_the_pods_they_select_in_every_pod() -> None:
    objects = _rendered()
    prefill, decode = _plan(objects)
    canary = next(c for c in decode.containers if c.name == "transfer-canary")
    assert canary.args is not None
    target = urlparse(canary.args[canary.args.index("--prefill") + 1]).hostname
    assert target is not None
    # the canary's prefill Service is the kv-revision Service selecting the prefill pod
    assert decode.hosts[target] == prefill.ip
    assert decode.hosts["quickstart-decode.team-a.svc.cluster.local"] == decode.ip
    services = {k for k in decode.hosts if not k.startswith("quickstart-decode-0.")}
    assert {k: prefill.hosts[k] for k in services} == {k: decode.hosts[k] for k in services}
    argv = pod_create_argv(decode, "net", "r1")
    assert _flag(argv, "--ip") == [decode.ip] and _flag(argv, "--share") == [SHARE]
    assert f"{target}:{prefill.ip}" in _flag(argv, "--add-host")
    assert _flag(argv, "--hostname") == ["quickstart-decode-0"]


def test_vllm_pods_get_their_claim_config_map_shared_memory_and_probes() -> None:
    objects = _rendered(VLLM_CPU)
    with pytest.raises(PlanError, match="--claim models=DIR"):
        _plan(objects)
    images = {i: i for i in images_of(objects)}
    prefill, _ = plan_pods(
        objects, ips=IPS, host_ip=NODE_IP, images=images, claims={"models": "/data/models"}
    )
    volumes = {v.name: v for v in prefill.volumes}
    assert volumes["model"].kind == "claim" and volumes["model"].folder == "/data/models"
    assert volumes["model"].read_only
    assert volumes["dshm"].kind == "tmpfs"
    config_map = next(o for o in objects if o["kind"] == "ConfigMap")
    assert {k: v[0].decode() for k, v in volumes["engine-idle"].files.items()} == (
        config_map["data"]
    )
    engine = prefill.engine_container
    assert engine.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == prefill.ip
    assert engine.cpus == 2 and engine.cpu_shares == 1024
    assert engine.startup is not None and engine.startup.failure_threshold == 180
    assert engine.readiness is not None and engine.readiness.port == 8000
    rendered = next(o for o in objects if o["metadata"]["name"] == "vllm-cpu-prefill-0")
    pre_stop = rendered["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"  # vLLM's: it sleeps through the settle and the lease
    assert engine.pre_stop is not None and engine.pre_stop.command == tuple(pre_stop)
    assert engine.user is None  # vLLM pods: the image's user
    sources = {v: f"vol-{v}" for v in volumes}
    mounts = _flag(run_argv(prefill, engine, sources, "r"), "--mount")
    # the memory emptyDir at /dev/shm is the pod's own /dev/shm (one IPC namespace per
    # pod), sized to the pod's memory limit as the node bounds it
    assert not [m for m in mounts if "destination=/dev/shm" in m]
    assert prefill.shm_size == f"{6 * 1024}m"
    assert _flag(pod_create_argv(prefill, "net", "r"), "--shm-size") == ["6144m"]
    assert "type=bind,source=vol-model,destination=/mnt/models,ro=true" in mounts


def _one_pod(container: dict[str, Any], **spec: Any) -> list[dict[str, Any]]:
    """A minimal rendered pair: ``container`` in the decode pod, a plain prefill pod."""
    pods = []
    for role in ("prefill", "decode"):
        c = container if role == "decode" else {"name": "engine", "image": "img"}
        pods.append(
            {
                "kind": "Pod",
                "metadata": {
                    "name": f"d-{role}-0",
                    "namespace": "ns",
                    "uid": "uid-1",
                    "labels": {"disagg.dev/role": role, "team": "ml"},
                    "annotations": {"note": "x"},
                },
                "spec": {"containers": [c], **(spec if role == "decode" else {})},
            }
        )
    config = {"kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"A": "1", "B": "2"}}
    secret = {
        "kind": "Secret",
        "metadata": {"name": "sec"},
        "data": {"token": base64.b64encode(b"s3cret").decode()},
    }
    return [config, secret, *pods]


def _decode(container: dict[str, Any], **spec: Any) -> PodPlan:
    objects = _one_pod({"name": "engine", "image": "img", **container}, **spec)
    return plan_pods(objects, ips=IPS, host_ip=NODE_IP, images={"img": "img"}, claims={})[1]


def test_env_is_filled_as_a_kubelet_fills_it() -> None:
    container = {
        "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
        "env": [
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
            {
                "name": "TEAM",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}},
            },
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "token"}}},
            {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "B"}}},
            {
                "name": "MEM_MI",
                "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
            },
            {"name": "URL", "value": "http://$(NS).svc:$(MISSING)/$$(NS)"},
        ],
        "resources": {"limits": {"memory": "1536Mi"}},
        "command": ["serve", "--ns", "$(NS)"],
        "args": ["--token=$(TOKEN)"],
    }
    engine = _decode(container).engine_container
    assert engine.env == {
        "CFG_A": "1",
        "CFG_B": "2",
        "NS": "ns",
        "UID": "uid-1",
        "NODE": NODE_IP,
        "TEAM": "ml",
        "TOKEN": "s3cret",
        "B": "2",
        "MEM_MI": "1536",
        "URL": "http://ns.svc:$(MISSING)/$(NS)",  # undefined kept, $$ escapes
    }
    assert engine.command == ("serve", "--ns", "ns") and engine.args == ("--token=s3cret",)


def test_downward_api_and_projected_volumes_are_files() -> None:
    plan = _decode(
        {"volumeMounts": [{"name": "info", "mountPath": "/etc/info"}]},
        volumes=[
            {
                "name": "info",
                "downwardAPI": {
                    "items": [
                        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                    ]
                },
            },
            {
                "name": "all",
                "projected": {
                    "defaultMode": 0o440,
                    "sources": [
                        {"configMap": {"name": "cfg", "items": [{"key": "A", "path": "a"}]}},
                        {"secret": {"name": "sec"}},
                        {"serviceAccountToken": {"path": "token"}},
                    ],
                },
            },
        ],
    )
    info, projected = plan.volumes
    assert info.files["name"] == (b"d-decode-0", 0o644)
    assert info.files["labels"][0] == b'disagg.dev/role="decode"\nteam="ml"'
    assert projected.files == {"a": (b"1", 0o440), "token": (b"s3cret", 0o440)}
    assert info.read_only and projected.read_only


@pytest.mark.parametrize(
    ("container", "spec", "message"),
    [
        ({"securityContext": {"privileged": True}}, {}, "privileged"),
        (
            {"securityContext": {"runAsNonRoot": True, "runAsUser": 0}},
            {},
            "runAsNonRoot with runAsUser 0",
        ),
        ({"resources": {"limits": {"nvidia.com/gpu": 1}}}, {}, "GPU"),
        ({}, {"initContainers": [{"name": "fetch-model", "image": "x"}]}, "--model DIR"),
        ({}, {"volumes": [{"name": "m", "image": {"reference": "r/m:1"}}]}, "--model DIR"),
        ({}, {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}, "hostPath volumes"),
        ({"readinessProbe": {"grpc": {"port": 1}}}, {}, "grpc probes are not run"),
        ({"livenessProbe": {"httpGet": {"port": "web"}}}, {}, "port 'web' is not a named"),
        (
            {"env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}}]},
            {},
            "'status.phase' is not one a kubelet resolves",
        ),
        (
            {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k"}}}]},
            {},
            "Secret 'nope' does not exist",
        ),
        (
            {},
            {"volumes": [{"name": "s", "secret": {"secretName": "nope"}}]},
            "volume s: Secret 'nope' does not exist",
        ),
    ],
)
def test_what_cannot_run_here_is_refused_with_the_reason(
    container: dict[str, Any], spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace("$", r"\$")):
        _decode(container, **spec)


def test_optional_references_that_are_missing_are_left_out() -> None:
    ref = {"name": "nope", "key": "k", "optional": True}
    engine = _decode({"env": [{"name": "X", "valueFrom": {"secretKeyRef": ref}}]}).engine_container
    assert "X" not in engine.env
    volume = {"name": "s", "secret": {"secretName": "nope", "optional": True}}
    (planned,) = [v for v in _decode({}, volumes=[volume]).volumes if v.name == "s"]
    assert planned.files == {}


def test_probes_keep_their_timing_and_named_ports() -> None:
    engine = _decode(
        {
            "ports": [{"name": "web", "containerPort": 8000}],
            "livenessProbe": {
                "tcpSocket": {"port": "web"},
                "periodSeconds": 2,
                "failureThreshold": 1,
                "initialDelaySeconds": 3,
                "timeoutSeconds": 4,
            },
            "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]}},
            "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
        }
    ).engine_container
    assert engine.liveness is not None and engine.readiness is not None
    assert (engine.liveness.kind, engine.liveness.port) == ("tcp", 8000)
    assert (engine.liveness.period_s, engine.liveness.failure_threshold) == (2, 1)
    assert (engine.liveness.initial_delay_s, engine.liveness.timeout_s) == (3, 4)
    # Kubernetes' defaults where the probe says nothing
    assert (engine.readiness.period_s, engine.readiness.failure_threshold) == (10, 3)
    assert engine.readiness.command == ("cat", "/tmp/ready")
    assert engine.pre_stop is not None and engine.pre_stop.seconds == 5


def test_a_local_model_folder_is_mounted_read_only_at_its_own_path() -> None:
    objects = _one_pod({"name": "engine", "image": "img"})
    plan = plan_pods(
        objects, ips=IPS, host_ip=NODE_IP, images={"img": "img"}, claims={}, binds={"/m": "/m"}
    )[1]
    mounts = _flag(run_argv(plan, plan.engine_container, {}, "r"), "--mount")
    assert mounts == ["type=bind,source=/m,destination=/m,ro=true"]


def test_prefill_pods_come_first_and_need_an_address_each() -> None:
    objects = _one_pod({"name": "engine", "image": "img"})
    reordered = [*objects[:2], objects[3], objects[2]]
    assert [p["metadata"]["name"] for p in pods_of(reordered)] == ["d-prefill-0", "d-decode-0"]
    with pytest.raises(PlanError, match="2 pods need 2 addresses"):
        plan_pods(objects, ips=IPS[:1], host_ip=NODE_IP, images={"img": "img"}, claims={})
    changed = copy.deepcopy(objects)
    changed[3]["spec"]["containers"][0]["image"] = "other"
    with pytest.raises(PlanError, match="no local image stands for other"):
        plan_pods(changed, ips=IPS, host_ip=NODE_IP, images={"img": "img"}, claims={})
