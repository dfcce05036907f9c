"""spec.model as a URI: the volumes, mounts, init container and engine flags each source
renders, on both pools; one served name for clients, the canary and llm-d."""

from __future__ import annotations

import dataclasses
from typing import Any

import kubernetes_validate
import pytest

from disagg_operator.engines.settings import DEFAULT
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from tests.operator.builders import body

KEY = "k" * 32


SETTINGS = dataclasses.replace(DEFAULT, canary_image="example.com/worker-cpu:1")


def _pods(model: str, **spec: Any) -> list[dict[str, Any]]:
    obj = body(engine="vllm", **spec)
    obj["spec"]["model"] = model
    return [o for o in render(obj, hmac_key=KEY, settings=SETTINGS) if o["kind"] == "Pod"]


def _engine(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "engine")


def _served(command: list[str]) -> str | None:
    return (
        command[command.index("--served-model-name") + 1]
        if "--served-model-name" in command
        else None
    )


def test_a_pvc_model_is_mounted_read_only_into_both_pools_and_served_by_name() -> None:
    pods = _pods("pvc://models/llama")
    assert len(pods) == 2
    for pod in pods:
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "model")
        assert volume["persistentVolumeClaim"] == {"claimName": "models", "readOnly": True}
        engine = _engine(pod)
        assert {"name": "model", "mountPath": "/mnt/models", "readOnly": True} in engine[
            "volumeMounts"
        ]
        assert engine["command"][:3] == ["vllm", "serve", "/mnt/models/llama"]
        assert _served(engine["command"]) == "llama"
        assert "initContainers" not in pod["spec"]
    canary = next(c for c in pods[1]["spec"]["containers"] if c["name"] == "transfer-canary")
    assert canary["args"][canary["args"].index("--model") + 1] == "llama"


def test_an_hf_model_is_downloaded_by_an_init_container_with_the_token() -> None:
    cache = {"claimName": "hf-cache", "tokenSecret": {"name": "hf", "key": "token"}}
    pods = _pods("hf://meta-llama/Llama-3.1-8B@main", modelCache=cache)
    for pod in pods:
        (init,) = pod["spec"]["initContainers"]
        assert init["name"] == "model-download" and init["image"] == "example.com/vllm:1"
        assert init["command"][-3:] == [
            "meta-llama/Llama-3.1-8B",
            "main",
            "/mnt/models/meta-llama/Llama-3.1-8B",
        ]
        token = next(e for e in init["env"] if e["name"] == "HF_TOKEN")
        assert token["valueFrom"]["secretKeyRef"] == {"name": "hf", "key": "token"}
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "model")
        assert volume["persistentVolumeClaim"] == {"claimName": "hf-cache"}
        engine = _engine(pod)
        assert engine["command"][2] == "/mnt/models/meta-llama/Llama-3.1-8B"
        assert _served(engine["command"]) == "meta-llama/Llama-3.1-8B"
    # without a claim: an emptyDir per pod, no token
    (pod, _) = _pods("hf://org/name")
    assert next(v for v in pod["spec"]["volumes"] if v["name"] == "model")["emptyDir"] == {}
    assert [e["name"] for e in pod["spec"]["initContainers"][0]["env"]] == [
        "HF_HOME",
        "HF_HUB_DISABLE_TELEMETRY",
    ]


def test_an_oci_model_is_an_image_volume() -> None:
    (pod, _) = _pods("oci://registry.example/models/llama:8b")
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "model")
    assert volume["image"] == {
        "reference": "registry.example/models/llama:8b",
        "pullPolicy": "IfNotPresent",
    }
    assert _engine(pod)["command"][2] == "/mnt/models"
    assert _served(_engine(pod)["command"]) == "llama"


@pytest.mark.parametrize(
    ("model", "served", "expected"),
    [
        ("/models/tiny-llama", None, "tiny-llama"),
        ("Qwen/Qwen3-0.6B", None, None),  # a hub id is served under itself: no flag
        ("Qwen/Qwen3-0.6B", "qwen", "qwen"),
        ("pvc://models", None, "models"),
        ("pvc://models/a/b/", "b-model", "b-model"),
    ],
)
def test_the_served_name(model: str, served: str | None, expected: str | None) -> None:
    extra = {"servedModelName": served} if served else {}
    (pod, _) = _pods(model, **extra)
    assert _served(_engine(pod)["command"]) == expected


@pytest.mark.parametrize("model", ["pvc://models/llama", "hf://org/name", "oci://r.example/m:1"])
def test_each_source_passes_the_upstream_pod_schema(model: str) -> None:
    for pod in _pods(model, modelCache={"claimName": "c"} if model.startswith("hf") else None):
        kubernetes_validate.validate(pod, "1.31.0", strict=True)


@pytest.mark.parametrize(
    ("spec", "field", "says"),
    [
        ({"model": "s3://bucket/llama"}, "spec.model", "unknown scheme s3://"),
        ({"model": "hf://llama"}, "spec.model", "hf://org/name"),
        ({"model": "pvc://Models_1/x"}, "spec.model", "pvc://claim/path"),
        ({"model": "oci://"}, "spec.model", "oci://registry"),
        ({"modelCache": {"claimName": "c"}}, "spec.modelCache", "hf:// models only"),
        ({"args": ["--served-model-name", "x"]}, "spec.decode.args[0]", "spec.servedModelName"),
    ],
)
def test_bad_sources_are_refused_by_field(spec: dict[str, Any], field: str, says: str) -> None:
    obj = body(engine="vllm")
    args = spec.pop("args", None)
    if args:
        obj["spec"]["decode"]["args"] = args
    obj["spec"].update(spec)
    problems = validation.parse(obj)[1]
    assert [p.field for p in problems] == [field] and says in problems[0].message, problems


def test_the_reference_engine_takes_no_model_source_fields() -> None:
    problems = validation.parse(body(servedModelName="x"))[1]
    assert [p.field for p in problems] == ["spec.servedModelName"]
    assert "vllm only" in problems[0].message
