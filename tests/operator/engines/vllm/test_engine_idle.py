"""vLLM CPU pools get the engine-idle shim: a ConfigMap with the module, mounted as the
engine's PYTHONPATH; GPU pools and a delay of 0 do not."""

from __future__ import annotations

from typing import Any

import kubernetes_validate

from disagg_operator.engines.vllm import engine_idle
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from tests.operator.builders import GPU, body, role

KEY = "k" * 32


def _objects(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in render(obj, hmac_key=KEY)}


def _engine(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "engine")


def test_cpu_pools_mount_the_shim_as_their_pythonpath() -> None:
    objects = _objects(body(engine="vllm"))
    cm = objects["demo-engine-idle"]
    assert cm["kind"] == "ConfigMap" and cm["data"] == {"sitecustomize.py": engine_idle.SOURCE}
    assert cm["metadata"]["ownerReferences"][0]["name"] == "demo"
    for pod in (objects["demo-prefill-0"], objects["demo-decode-0"]):
        engine = _engine(pod)
        env = {e["name"]: e.get("value") for e in engine["env"]}
        assert env["PYTHONPATH"] == "/opt/disagg/python"
        assert env["DISAGG_NIXL_PROGRESS_DELAY_US"] == "5000"
        assert env["DISAGG_VLLM_QUEUE_POLL_US"] == "100"
        assert env["DISAGG_VLLM_KEEP_CPU_AFFINITY"] == "1"  # vLLM 0.32's NIXL worker pins
        mount = {"name": "engine-idle", "mountPath": "/opt/disagg/python", "readOnly": True}
        assert mount in engine["volumeMounts"]
        volume = {"name": "engine-idle", "configMap": {"name": "demo-engine-idle"}}
        assert volume in pod["spec"]["volumes"]
        kubernetes_validate.validate(pod, "1.31.0", strict=True)
    kubernetes_validate.validate(cm, "1.31.0", strict=True)


def test_a_gpu_pool_and_a_zero_delay_get_none() -> None:
    objects = _objects(body(engine="vllm", prefill=role("cuda", resources=GPU)))
    prefill = {e["name"] for e in _engine(objects["demo-prefill-0"])["env"]}
    decode = {e["name"] for e in _engine(objects["demo-decode-0"])["env"]}
    assert "PYTHONPATH" not in prefill and "PYTHONPATH" in decode
    zero = {"queuePollMicroseconds": 0}
    obj = body(engine="vllm", kvTransfer={"nixlProgressDelayMicroseconds": 0})
    only_queue = _objects(obj)
    env = {e["name"]: e.get("value") for e in _engine(only_queue["demo-decode-0"])["env"]}
    assert env["DISAGG_VLLM_QUEUE_POLL_US"] == "100"
    assert env["DISAGG_NIXL_PROGRESS_DELAY_US"] == "0"  # off, said: the shim's default is 5000
    gpu = _objects(
        body(engine="vllm", prefill=role("cuda", resources=GPU, queuePollMicroseconds=50))
    )
    env = {e["name"]: e.get("value") for e in _engine(gpu["demo-prefill-0"])["env"]}
    assert env["DISAGG_VLLM_QUEUE_POLL_US"] == "50" and env["DISAGG_NIXL_PROGRESS_DELAY_US"] == "0"
    assert env["DISAGG_VLLM_KEEP_CPU_AFFINITY"] == "0"  # vLLM pins only on CPU pools
    for r in ("prefill", "decode"):
        obj["spec"][r].update(zero)
    # the pin's lever alone keeps the shim
    assert "demo-engine-idle" in _objects(obj)
    for r in ("prefill", "decode"):
        obj["spec"][r]["keepCpuAffinity"] = False
    off = _objects(obj)
    assert "demo-engine-idle" not in off
    assert all(v["name"] != "engine-idle" for v in off["demo-decode-0"]["spec"]["volumes"])
    assert "demo-engine-idle" not in _objects(body())  # the reference engine: its own agent


def test_the_shim_s_env_is_derived() -> None:
    obj = body(engine="vllm", decode=role(env=[{"name": "PYTHONPATH", "value": "/x"}]))
    (p,) = validation.parse(obj)[1]
    assert p.field == "spec.decode.env[0]" and "nixlProgressDelayMicroseconds: 0" in p.message
    assert "queuePollMicroseconds: 0" in p.message and "keepCpuAffinity: false" in p.message
    obj = body(engine="vllm", kvTransfer={"nixlProgressDelayMicroseconds": 0})
    obj["spec"]["decode"].update(queuePollMicroseconds=0, keepCpuAffinity=False)
    obj["spec"]["decode"]["env"] = [{"name": "PYTHONPATH", "value": "/x"}]
    assert validation.parse(obj)[1] == []  # off: PYTHONPATH is the user's
